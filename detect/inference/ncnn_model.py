"""A Darknet model run by ncnn on the CPU: the default CPU engine of the tools and the API where the model's layers
all have an ncnn form (docs/inference.md "CPU engines" has the figures behind the choice).

`load_ncnn_model(model, threads, img_size)` -> `NcnnModel`, which keeps the eval-model contract (`model(x)`: float
[N, 3, H, W] in [0, 1] -> [N, P, 5+K] rows, any batch and any size that is a multiple of `max_stride`;
`eval()`, `train()`, `to()` do nothing: detect.inference.handle.CompiledRunner), so the tools take it in place
of the PyTorch model.

ncnn runs the network up to the [yolo] heads' inputs (detect.inference.ncnn_graph writes it from the fused model
in well under a second, so nothing is cached); the heads' decode stays the PyTorch model's own. Its 3x3
convolutions use Winograd transforms, which do less arithmetic than OpenVINO's direct convolutions (OpenCV's
Darknet importer uses Winograd too; ncnn's kernels are faster). Storage and arithmetic are float32 throughout:
ncnn would store weights and activations as fp16 or bf16 where the CPU has them. Each load checks the network
against the PyTorch model.
"""

from __future__ import annotations

import copy
import logging
import tempfile
import threading
from pathlib import Path

import numpy as np
import torch

from detect.darknet import Darknet

from .engine_check import check_against_torch, engine_input
from .handle import CompiledRunner
from .ncnn_graph import INPUT_BLOB, NcnnGraph, UnsupportedLayer, ncnn_graph

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install ncnn"
REDUCED_PRECISION_OPTIONS = ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_bf16_storage",
                             "use_bf16_packed", "use_int8_inference", "use_int8_storage", "use_int8_packed",
                             "use_int8_arithmetic")


def ncnn_available() -> bool:
    try:
        import ncnn  # noqa: F401
    except (ImportError, OSError):  # not installed, or its libraries cannot load here
        return False
    return True


def ncnn_version() -> str:
    import ncnn

    return ncnn.__version__


class NcnnModel(CompiledRunner):
    """An ncnn network with the eval-model contract (module docstring). Images of a batch run one after the
    other (ncnn takes one image a pass); one pass runs at a time (a lock), so one model may serve several
    threads, as the PyTorch one does."""

    engine = "ncnn"

    def __init__(self, net, graph: NcnnGraph, model: Darknet):
        self.num_classes = model.num_classes
        self.max_stride = model.max_stride
        self.input_size = model.input_size
        self._net, self._outputs, self._heads = net, graph.head_blobs, graph.heads
        self._lock = threading.Lock()

    def _head_inputs(self, image: np.ndarray) -> list[np.ndarray]:
        import ncnn

        extractor = self._net.create_extractor()
        extractor.input(INPUT_BLOB, ncnn.Mat(image))
        maps = []
        for blob in self._outputs:
            status, mat = extractor.extract(blob)
            if status != 0:
                raise RuntimeError(f"ncnn could not compute blob {blob} (status {status})")
            maps.append(np.array(mat))  # a copy: the extractor's memory goes with it
        return maps

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        images = engine_input(x, self.max_stride)
        with self._lock:
            per_image = [self._head_inputs(image) for image in images]
        size = tuple(x.shape[2:])
        rows = []
        for k, head in enumerate(self._heads):
            raw = head(torch.from_numpy(np.stack([maps[k] for maps in per_image])))
            rows.append(head.decode(raw, size).reshape(raw.shape[0], -1, raw.shape[-1]))
        return torch.cat(rows, 1)


def _net(graph: NcnnGraph, threads: int):
    """The ncnn.Net of `graph`, float32 only, `threads` threads. ncnn reads its weights from a file (loading
    from memory would keep pointers into a buffer Python may free), so they pass through a temporary folder."""
    import ncnn

    net = ncnn.Net()
    net.opt.num_threads = threads
    for option in REDUCED_PRECISION_OPTIONS:
        if hasattr(net.opt, option):
            setattr(net.opt, option, False)
    with tempfile.TemporaryDirectory(prefix="detect-ncnn-") as folder:
        param, weights = Path(folder) / "model.param", Path(folder) / "model.bin"
        param.write_text(graph.param)
        weights.write_bytes(graph.weights)
        if net.load_param(str(param)) != 0:
            raise ValueError("ncnn could not read the network it was given (a converter fault: please report it)")
        if net.load_model(str(weights)) != 0:
            raise ValueError("ncnn could not read the weights it was given (a converter fault: please report it)")
    return net


def load_ncnn_model(model: Darknet, threads: int, img_size: int | None = None) -> NcnnModel:
    """`model` (as loaded; not changed) as an ncnn network with `threads` threads, its kernels chosen for
    `img_size` x `img_size` inputs (default: the model's size; any size runs). ValueError when a layer has no
    ncnn form (UnsupportedLayer, naming it) or the network does not match the PyTorch model."""
    fused = copy.deepcopy(model).fuse().eval()
    graph = ncnn_graph(fused, (img_size, img_size) if img_size else None)
    runnable = NcnnModel(_net(graph, threads), graph, fused)
    try:
        diff = check_against_torch(runnable, fused, "ncnn")
    except RuntimeError as error:
        raise ValueError(f"ncnn could not run this model ({error})") from None
    log.info("CPU inference: ncnn %s, float32, %d thread(s) (max |diff| from PyTorch %.1e)", ncnn_version(), threads,
             diff)
    return runnable


__all__ = ["NcnnModel", "UnsupportedLayer", "load_ncnn_model", "ncnn_available", "ncnn_version"]
