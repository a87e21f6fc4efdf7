"""The model the tools run, from any file a user has: a training checkpoint or `.pt` (its cfg and names inside),
Darknet `.weights` with their cfg, or an exported `.onnx` (through detect.export.runtime); its input size and
class names when the user gives none, each default logged."""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from detect.darknet.load import check_img_size, for_inference, load_model
from detect.darknet.pt_files import trained_img_size
from detect.darknet.transfer import COCO_NAMES
from detect.data.spec import default_cache_dir, read_class_names

from .cpu_engine import cpu_backend, load_cpu_engine

log = logging.getLogger("detect.api")  # the messages users of the API and the tools have always seen
DEFAULT_DYNAMIC_SIZE = 416  # an ONNX model with a dynamic input size, when no img_size is given


def is_onnx_path(path) -> bool:
    """Whether `path` names an exported ONNX model (run through detect.export.runtime) by its suffix."""
    return Path(path).suffix.lower() == ".onnx"



def load_tool_model(weights, cfg, device: torch.device, img_size: int | None, square: bool, backend: str = "auto",
                    cache_dir=None):
    """(model, the names it carries or None, square, img_size) for detect.val and detect.predict: an exported
    `.onnx` through onnxruntime (a fixed-size one runs square at its own size only; a dynamic one at
    DEFAULT_DYNAMIC_SIZE when `img_size` is None), else the Darknet model loaded exactly and prepared for
    inference (fused; packed on the CPU), with `img_size` checked against its largest stride (None: the size a
    `.pt` was trained at, else the cfg's [net] size; the size chosen is logged), run by `backend` (see
    `load_darknet`)."""
    if is_onnx_path(weights):
        check_onnx_backend(weights, backend)
        from detect.export.runtime import load_onnx_model, onnx_square_letterbox

        model = load_onnx_model(weights, device)
        if img_size is None:
            fixed = model.input_size
            img_size = fixed[0] if fixed is not None else DEFAULT_DYNAMIC_SIZE
            log_default_size("--img-size", img_size, f"{Path(weights).name}'s " + (
                "fixed input size" if fixed is not None else "default for a dynamic ONNX model"))
        return model, model.names, onnx_square_letterbox(model, img_size, square), img_size
    model, names, img_size = load_darknet(weights, cfg, device, img_size, "--img-size", backend, cache_dir)
    return model, names, square, img_size


def check_onnx_backend(weights, backend: str) -> None:
    if backend != "auto":
        raise ValueError(f"--backend {backend} is for .pt and .weights models; {weights} runs on onnxruntime "
                         f"(leave --backend out)")



def load_darknet(weights, cfg, device: torch.device, img_size: int | None, flag: str, backend: str = "auto",
                 cache_dir=None):
    """(model prepared for inference, the names it carries or None, input size): the size given (`flag`), else
    the size a `.pt` was trained at, else the cfg's [net] size; a multiple of the model's largest stride, checked
    before anything runs (the model is built at its cfg's size, which any such multiple can run at).
    `backend` (detect.export.cpu_engine.cpu_backend): on the CPU `auto` runs the model on ncnn where its layers
    allow, else on OpenVINO (cached under `cache_dir`, default the user's cache), else, and on CUDA, the PyTorch
    model runs fused (and packed on the CPU)."""
    loaded = load_model(cfg, weights, exact=True)
    if img_size is None:
        trained = trained_img_size(weights)
        img_size = trained or max(loaded.model.input_size)
        cfg_name = loaded.model.cfg_path or f"the cfg {Path(weights).name} carries"
        log_default_size(flag, img_size, f"the size {Path(weights).name} was trained at" if trained else
                          f"the [net] size of {cfg_name}")
    check_img_size(img_size, loaded.model.max_stride, flag)
    engines = cpu_backend(backend, device)
    if engines != ["torch"]:
        compiled = load_cpu_engine(loaded.model, engines, img_size, torch.get_num_threads(),
                                   Path(cache_dir) if cache_dir else default_cache_dir(), str(weights))
        if compiled is not None:
            return compiled, loaded.names, img_size
        if backend == "auto":
            log.warning("%s: no CPU engine took this model; running it on PyTorch", weights)
    return for_inference(loaded.model, device), loaded.names, img_size



def log_default_size(flag: str, img_size: int, why: str) -> None:
    log.info("%s %d: %s (%s not given)", flag, img_size, why, flag)



def default_names(num_classes: int, weights, flag: str = "--names") -> list[str]:
    """Class names for a model whose file carries none and that was given none: COCO's 80 for an 80-class
    model (the official Darknet .weights are COCO's, as fine-tuning assumes: detect.darknet.transfer), else the
    class ids "0", "1", ...; the choice is logged once."""
    source = Path(weights).name
    if num_classes == 80 and COCO_NAMES.is_file():
        log.info("class names: COCO's 80 (%s carries none; %s overrides)", source, flag)
        return read_class_names(COCO_NAMES)
    log.info("class names: the class ids 0..%d (%s carries no names and the model has %d classes, not COCO's "
             "80; %s gives them)", num_classes - 1, source, num_classes, flag)
    return [str(k) for k in range(num_classes)]



def load_onnx(path, device: torch.device, img_size: int | None):
    """(model, names, fixed (h, w) or None) of an ONNX file, through detect.export.runtime."""
    try:
        from detect.export.runtime import load_onnx_model
    except ImportError as e:
        raise ValueError(f"{path}: running ONNX models needs detect.export.runtime and onnxruntime, which "
                         f"cannot be imported here ({e}); use the .pt or .weights instead") from None
    model = load_onnx_model(path, str(device))
    fixed = tuple(model.input_size) if model.input_size is not None else None
    if fixed is not None and img_size is not None and img_size != max(fixed):
        raise ValueError(f"{path} takes {fixed[0]}x{fixed[1]} inputs only, but img_size={img_size} was given; "
                         f"leave img_size out or export the model at that size")
    return model, list(model.names or []), fixed
