"""Which engine runs a `.pt` / `.weights` model for the tools and the API, and loading it there (docs/inference.md
"CPU engines" says why in this order; docs/benchmarks.md has the figures).

`auto` on the CPU: ncnn (Winograd 3x3 convolutions; detect.inference.ncnn_model) where every layer of the model
has an ncnn form, else OpenVINO (detect.inference.openvino_model), else PyTorch's packed path; on CUDA always
PyTorch. An engine that is not installed is skipped; one whose network does not match the PyTorch model is
skipped with a warning. Naming an engine (`ncnn`, `openvino`, `torch`) runs that one or fails with the reason.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from detect.darknet import Darknet
from detect.runtime.commands import spelt

from .ncnn_model import INSTALL_HINT as NCNN_HINT
from .ncnn_model import UnsupportedLayer, load_ncnn_model, ncnn_available
from .openvino_model import INSTALL_HINT as OPENVINO_HINT
from .openvino_model import load_openvino_model, openvino_available

log = logging.getLogger(__name__)

BACKENDS = ("auto", "ncnn", "openvino", "torch")
CPU_ENGINES = ("ncnn", "openvino")  # auto's order
_HINTS = {"ncnn": NCNN_HINT, "openvino": OPENVINO_HINT}


def _available(engine: str) -> bool:
    return ncnn_available() if engine == "ncnn" else openvino_available()


def cpu_backend(requested: str, device: torch.device, flag: str = "--backend",
                device_flag: str = "--device") -> list[str]:
    """The engines to try, in order, for a model on `device`: `auto` gives the installed CPU engines then "torch"
    on the CPU, ["torch"] on CUDA; a named engine gives just itself. ValueError for an unknown name, a CPU
    engine asked for on CUDA, or one that is not installed, naming the options as `flag` and `device_flag`."""
    if requested not in BACKENDS:
        raise ValueError(f"{spelt(flag, requested)}: choose one of {', '.join(BACKENDS)}")
    if device.type != "cpu":
        if requested in CPU_ENGINES:
            raise ValueError(f"{spelt(flag, requested)} runs on the CPU only, not on "
                             f"{spelt(device_flag, str(device))}; use {spelt(device_flag, 'cpu')}, or "
                             f"{spelt(flag, 'auto')} to run PyTorch on {device}")
        return ["torch"]
    if requested == "auto":
        return [engine for engine in CPU_ENGINES if _available(engine)] + ["torch"]
    if requested in CPU_ENGINES and not _available(requested):
        raise ValueError(f"{spelt(flag, requested)}: {requested} is not installed ({_HINTS[requested]}); or use "
                         f"{spelt(flag, 'torch')}")
    return [requested]


def _load(engine: str, model: Darknet, img_size: int, threads: int, cache_root: Path | None):
    if engine == "ncnn":
        return load_ncnn_model(model, threads, img_size)
    return load_openvino_model(model, img_size, threads, cache_root)


def load_cpu_engine(model: Darknet, engines: list[str], img_size: int, threads: int, cache_root: Path | None,
                    source: str):
    """`model` on the first of `engines` (from `cpu_backend`) that takes it, or None where that is "torch" (the
    caller then runs the PyTorch model). With one engine named, its failure is a ValueError naming `source`;
    under `auto` a model ncnn cannot express goes to the next engine (an info line), one that fails its check
    with a warning."""
    for engine in engines:
        if engine == "torch":
            return None
        try:
            return _load(engine, model, img_size, threads, cache_root)
        except UnsupportedLayer as error:
            if len(engines) == 1:
                raise ValueError(f"{source}: ncnn cannot run this model ({error}); --backend auto picks an engine "
                                 f"that can") from None
            log.info("%s: ncnn cannot run %s; trying the next engine", source, error)
        except ValueError as error:
            if len(engines) == 1:
                raise ValueError(f"{source}: {error}; --backend torch runs it on PyTorch") from None
            log.warning("%s: %s; trying the next engine", source, error)
    return None
