"""Exported ONNX models run by OpenVINO (the CPU, when installed) or onnxruntime, standing in for the PyTorch
eval model.

`load_onnx_model(path, device)` -> `OnnxModel`: `names`, `num_classes`, `max_stride`, `input_size` ((h, w), or
None for a --dynamic export), `batch_size` (None when dynamic); `model(x)` takes float [N, 3, H, W] in [0, 1]
and returns [N, P, 5+K] like `Darknet.eval()(x)`. A fixed batch is served in chunks (the last one padded);
a fixed input size must be fed at that size (detect.inference.loading fits every image into it). It is a
`CompiledRunner` (detect.inference.handle). On the CPU OpenVINO runs the file when it is installed (it ran the
int8 graph of `detect.export --int8` faster than onnxruntime: docs/inference.md "CPU engines"); a file OpenVINO cannot
take runs on onnxruntime, with a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch

from .handle import CompiledRunner
from .onnx_metadata import OnnxMetadata, int8_warning
from .openvino_model import compile_onnx, openvino_available
from .optional import require

log = logging.getLogger(__name__)
UNCHECKED_INT8 = "unchecked_int8"  # the attribute of the load warning about an int8 graph's missing or failed check


def _providers(ort, device) -> list[str]:
    device = torch.device(device)
    if device.type == "cpu":
        return ["CPUExecutionProvider"]
    if device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    raise ValueError(f"--device {device}: this onnxruntime has no provider for it (available: "
                     f"{', '.join(ort.get_available_providers())}); install onnxruntime-gpu or use --device cpu")


class OnnxModel(CompiledRunner):
    """A detect.export graph with the eval-model contract (module docstring). `run` maps one input batch
    (numpy) to its rows; `engine` names the runtime behind it ("openvino" or "onnxruntime")."""

    def __init__(self, run, metadata: OnnxMetadata, path: Path, engine: str = "onnxruntime"):
        self.run_batch, self.metadata, self.path, self.engine = run, metadata, path, engine
        self.names = metadata.names
        self.resize = metadata.resize  # how the model sees images (the loader's handle follows it)
        self.class_conf = metadata.class_conf  # per-class confidence thresholds, or None (the handle's)
        self.net_shape = metadata.net_shape  # a Darknet-trained non-square network's (h, w), or None
        self.num_classes = metadata.num_classes
        self.max_stride = metadata.max_stride
        self.input_size = metadata.input_size
        self.batch_size = metadata.batch
        self._input_dtype = np.float16 if metadata.precision == "fp16" else np.float32

    def _check_size(self, x: torch.Tensor) -> None:
        if x.dim() != 4 or x.shape[1] != 3:
            raise ValueError(f"{self.path}: expected input [N, 3, H, W], got {tuple(x.shape)}")
        size = tuple(x.shape[2:])
        if self.input_size is not None and size != tuple(self.input_size):
            raise ValueError(f"{self.path} was exported for {self.input_size[0]}x{self.input_size[1]} inputs, "
                             f"got {size[0]}x{size[1]}; feed that size or export with --dynamic")
        if size[0] % self.max_stride or size[1] % self.max_stride:
            raise ValueError(f"{self.path}: input {size[0]}x{size[1]} is not a multiple of the stride "
                             f"{self.max_stride}")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        self._check_size(x)
        images = x.detach().cpu().contiguous().numpy().astype(self._input_dtype, copy=False)
        if self.batch_size is None:
            rows = self.run_batch(images)
        else:  # a fixed batch: whole chunks, the last one padded with blank images
            chunks = []
            for start in range(0, len(images), self.batch_size):
                chunk = images[start:start + self.batch_size]
                padded = np.zeros((self.batch_size, *chunk.shape[1:]), chunk.dtype)
                padded[:len(chunk)] = chunk
                chunks.append(self.run_batch(padded)[:len(chunk)])
            rows = np.concatenate(chunks)
        return torch.from_numpy(rows).float().to(x.device)


def session_runner(session):
    """An onnxruntime session as OnnxModel's `run`."""
    name = session.get_inputs()[0].name
    return lambda batch: session.run(None, {name: batch})[0]


def _check_rows(metadata: OnnxMetadata, path: Path) -> None:
    if metadata.output != "rows":
        raise ValueError(f"{path} has NMS in its graph (exported with --nms) and returns detections, not rows; "
                         f"export without --nms for detect.val / detect.predict")


def _log_loaded(path: Path, engine: str, metadata: OnnxMetadata) -> None:
    log.info("%s: %s, %s, input %s", path, engine, metadata.precision,
             "dynamic" if metadata.input_size is None else "x".join(map(str, metadata.input_size)))
    warning = int8_warning(metadata, path)
    if warning:  # tagged: the export's own check loads the graph before its verdict exists (export.int8_check)
        log.warning(warning, extra={UNCHECKED_INT8: True})


def _load_onnxruntime(path: Path, device) -> OnnxModel:
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # warnings about unused initialisers etc. are not the user's business
    # threads that spin while waiting hold cores a shared machine's other processes need (as OMP_WAIT_POLICY=PASSIVE
    # for torch: docs/inference.md "CPU engines")
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    providers = _providers(ort, device)
    state = ort.capi.onnxruntime_pybind11_state  # onnxruntime's own error types (not RuntimeError & co)
    try:
        session = ort.InferenceSession(str(path), options, providers=providers)
    except (state.Fail, state.InvalidProtobuf, state.InvalidGraph, state.InvalidArgument,
            state.NotImplemented) as e:
        raise ValueError(f"{path}: onnxruntime cannot load it ({type(e).__name__}: {e})") from None
    metadata = OnnxMetadata.from_props(session.get_modelmeta().custom_metadata_map, path)
    _check_rows(metadata, path)
    _log_loaded(path, f"onnxruntime {ort.__version__}", metadata)
    return OnnxModel(session_runner(session), metadata, path)


def load_onnx_model(path, device="cpu") -> OnnxModel:
    """An exported model (without --nms) as an `OnnxModel` running on `device` ("cpu" or "cuda"): OpenVINO on the
    CPU when it is installed and can take the file, else onnxruntime."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--weights {path}: file not found")
    if torch.device(device).type == "cpu" and openvino_available():
        try:
            run, props, version = compile_onnx(path, torch.get_num_threads())
        except RuntimeError as error:  # OpenVINO's own failures; the file may still run on onnxruntime
            log.warning("%s: OpenVINO cannot run it (%s); using onnxruntime", path, str(error).splitlines()[0])
        else:
            metadata = OnnxMetadata.from_props(props, path)
            _check_rows(metadata, path)
            _log_loaded(path, f"OpenVINO {version}", metadata)
            return OnnxModel(run, metadata, path, engine="openvino")
    return _load_onnxruntime(path, device)

