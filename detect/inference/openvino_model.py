"""The CPU inference engine of the tools and the API: a Darknet model converted to OpenVINO and compiled for this
CPU (docs/inference.md "CPU engines" has the figures behind the choice).

The engine choice is detect.inference.engines': OpenVINO runs the models ncnn cannot.
`load_openvino_model(model, img_size, threads, cache_root)` -> `OpenVinoModel`, which keeps the eval-model
contract (`model(x)`: float [N, 3, H, W] in [0, 1] -> [N, P, 5+K], any batch and any size that is a multiple
of `max_stride`; `eval()`, `train()`, `to()` do nothing: detect.inference.handle.CompiledRunner), so the tools take it in place
of the PyTorch model.

Conversion traces the fused model once (seconds) with the batch, height and width left free; the result is
kept as OpenVINO IR under `<cache>/openvino/`, keyed by the cfg, the weights and the OpenVINO version, so a
later run of the same model reads it back. Each load checks the compiled model against the PyTorch
model on a small input of another batch and size than the trace's, which catches a size the trace fixed
by mistake. Inference runs in float32 (`INFERENCE_PRECISION_HINT`: OpenVINO would pick bf16 by itself on a
CPU that has it, which moved boxes by up to 3 pixels).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import logging
import os
import threading
import warnings
from pathlib import Path

import numpy as np
import torch

from detect.darknet import Darknet

from .engine_check import check_against_torch, engine_input
from .handle import CompiledRunner

log = logging.getLogger(__name__)

CONVERSION_VERSION = "1"  # part of the cache key: a change to `_convert` rebuilds every cached model
INSTALL_HINT = "pip install openvino"


def openvino_version() -> str:
    """OpenVINO's release, without its build suffix ("2026.4.1")."""
    import openvino

    return openvino.__version__.split("-")[0]


def openvino_available() -> bool:
    try:
        import openvino  # noqa: F401
    except (ImportError, OSError):  # not installed, or its libraries cannot load here
        return False
    return True


def _runner(compiled):
    """`compiled`'s first output for one float input batch (numpy), a copy; one inference at a time."""
    request, lock = compiled.create_infer_request(), threading.Lock()

    def run(images: np.ndarray) -> np.ndarray:
        with lock:
            request.infer({0: np.ascontiguousarray(images)}, share_inputs=True)
            return request.get_output_tensor(0).data.copy()  # the request's buffer is reused next call
    return run


def _config(threads: int) -> dict:
    """float32 whatever the CPU offers: OpenVINO picks bf16 by itself where the CPU has it (module docstring).
    Threads not pinned to cores: with one core busy elsewhere, pinned threads took 58.9 ms a yolov3-tiny pass
    (p90 67.0) against 51.5 (p90 54.8) unpinned and 52.6 for PyTorch; 26.5 ms all three on a quiet machine."""
    return {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads,
            "ENABLE_CPU_PINNING": False}


def compile_onnx(path: Path, threads: int):
    """(run, the file's metadata_props as strings, OpenVINO's version) of an ONNX file, compiled for this CPU.
    RuntimeError when OpenVINO cannot read or compile it."""
    core = _core()
    model = core.read_model(str(path))
    framework = model.get_rt_info()["framework"] if model.has_rt_info(["framework"]) else {}
    props = {key: value.astype(str) for key, value in framework.items()}  # the file's metadata_props
    return _runner(core.compile_model(model, "CPU", _config(threads))), props, openvino_version()


class OpenVinoModel(CompiledRunner):
    """A compiled OpenVINO model with the eval-model contract (module docstring). One inference runs at a time
    (a lock), so one model may serve several threads, as the PyTorch one does."""

    engine = "openvino"

    def __init__(self, compiled, model: Darknet):
        self.num_classes = model.num_classes
        self.max_stride = model.max_stride
        self.input_size = model.input_size
        self._run = _runner(compiled)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        images = engine_input(x, self.max_stride)
        return torch.from_numpy(self._run(images))


@functools.cache
def _core():
    """The process's one OpenVINO Core, never released. Creating the CPU plugin points the calling thread's
    alternate signal stack into the plugin's memory; a Core that was freed unloaded the plugin, and the next signal
    handled on that thread (a loader worker's SIGCHLD) crashed the process with SIGSEGV."""
    import openvino as ov

    return ov.Core()


def _model_key(model: Darknet, openvino_version: str) -> str:
    """What the converted model depends on: the cfg, every tensor of the fused model, the OpenVINO version."""
    digest = hashlib.sha256()
    for part in (CONVERSION_VERSION, openvino_version, model.cfg_text):
        digest.update(part.encode() + b"\0")
    for name, tensor in model.state_dict().items():
        digest.update(name.encode() + str(tuple(tensor.shape)).encode() + str(tensor.dtype).encode())
        digest.update(memoryview(tensor.detach().cpu().contiguous().numpy()).cast("B"))
    return digest.hexdigest()[:32]


def _convert(ov, fused: Darknet, img_size: int):
    """The fused model as an OpenVINO model with batch, height and width free, traced at `img_size`."""
    example = torch.rand(1, 3, img_size, img_size, generator=torch.Generator().manual_seed(0))
    with warnings.catch_warnings():
        # the tracer's notes on Python ints taken from sizes: the free-size check after compiling covers them
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.trace's deprecation: it is what OpenVINO calls
        return ov.convert_model(fused, example_input=example, input=[ov.PartialShape([-1, 3, -1, -1])])


def _read_cached(core, xml: Path):
    try:
        return core.read_model(str(xml))
    except Exception as error:  # noqa: BLE001 - a damaged cache entry is rebuilt, never fatal
        log.warning("%s: cannot read the cached OpenVINO model (%s); converting again", xml, error)
        return None


def _write_cache(ov, converted, xml: Path) -> None:
    """Save next to the final names and rename the weights first, so a complete .xml always has its .bin
    (ranks or processes converting the same model at once each write whole files)."""
    tmp = xml.with_name(f"{xml.stem}.{os.getpid()}.{threading.get_ident()}.tmp.xml")
    try:
        xml.parent.mkdir(parents=True, exist_ok=True)
        ov.save_model(converted, str(tmp), compress_to_fp16=False)
        os.replace(tmp.with_suffix(".bin"), xml.with_suffix(".bin"))
        os.replace(tmp, xml)
    except OSError as error:
        log.warning("cannot cache the converted OpenVINO model in %s (%s); the next run converts it again",
                    xml.parent, error)
    finally:
        for leftover in (tmp, tmp.with_suffix(".bin")):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)


def load_openvino_model(model: Darknet, img_size: int, threads: int, cache_root: Path | None) -> OpenVinoModel:
    """`model` (as loaded; not changed) compiled by OpenVINO for this CPU with `threads` threads. The converted
    model is cached under `cache_root`/openvino (None: not cached). ValueError when the conversion fails or the
    result does not match the PyTorch model."""
    import openvino as ov

    fused = copy.deepcopy(model).fuse().eval()
    core = _core()
    xml = None
    if cache_root is not None:
        xml = Path(cache_root) / "openvino" / f"{_model_key(fused, ov.__version__)}.xml"
    converted = _read_cached(core, xml) if xml is not None and xml.is_file() else None
    source = f"cached {xml}" if converted is not None else "converted"
    if converted is None:
        try:
            converted = _convert(ov, fused, img_size)
        except Exception as error:  # noqa: BLE001 - the frontend's own types; reported as one line
            summary = next((line for line in str(error).splitlines() if line.strip()), type(error).__name__)
            raise ValueError(f"OpenVINO could not convert this model ({type(error).__name__}: {summary})") from None
        if xml is not None:
            _write_cache(ov, converted, xml)
    try:
        runnable = OpenVinoModel(core.compile_model(converted, "CPU", _config(threads)), fused)
        diff = check_against_torch(runnable, fused, "OpenVINO")
    except RuntimeError as error:  # OpenVINO's own failures (compiling, shape inference) come as RuntimeError
        summary = " ".join(line.strip() for line in str(error).splitlines() if line.strip())
        raise ValueError(f"OpenVINO could not run this model ({summary[:300]})") from None
    log.info("CPU inference: OpenVINO %s, float32, %d thread(s), model %s (max |diff| from PyTorch %.1e)",
             openvino_version(), threads, source, diff)
    return runnable
