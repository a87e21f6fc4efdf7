"""The one loader of a user's model file, for the API, detect.val, detect.predict and the int8 check: a training
checkpoint or `.pt` (its cfg and names inside), Darknet `.weights` with their cfg, or an exported `.onnx`
(detect.inference.onnx_runtime); the input size and class names when the user gives none, each default logged.

The ONNX policy, the same for every caller: a dynamic export runs like the PyTorch model (rect canvases, any
size that is a multiple of its stride; DEFAULT_DYNAMIC_SIZE when none is given); a fixed-size export runs at its
own (h, w) only, square or not, every image fitted into it (letterboxed, keeping its aspect ratio, or stretched
when the model's resize mode says so), so the API, predict and val give one model file's image the same boxes.
Test-time augmentation needs a dynamic export (it runs the model at other sizes).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from detect.darknet.load import check_img_size, for_inference, load_model
from detect.darknet.pt_files import trained_img_size, trained_resize
from detect.data.augmentation.resize_modes import check_resize_mode
from detect.data.formats.spec import default_cache_dir
from detect.ops.class_names import read_coco_names
from detect.runtime.commands import spelt

from .class_conf import check_class_count, conf_options, read_class_conf
from .engines import cpu_backend, load_cpu_engine
from .handle import ModelHandle

log = logging.getLogger(__name__)
DEFAULT_DYNAMIC_SIZE = 416  # an ONNX model with a dynamic input size, when no size is given


@dataclass(frozen=True)
class Spelling:
    """How a front end names its options in the loader's messages."""

    img_size: str
    names: str
    augment: str
    resize: str
    conf: str = "--conf"
    backend: str = "--backend"
    device: str = "--device"
    cfg: str = "--cfg"
    weights: str = "--weights"


CLI = Spelling("--img-size", "--names", "--augment", "--resize")
API = Spelling("img_size", "names=", "augment=True", "resize=", "conf=", "backend=", "device=", "cfg=", "weights=")


def is_onnx_path(path) -> bool:
    """Whether `path` names an exported ONNX model by its suffix."""
    return Path(path).suffix.lower() == ".onnx"


def load_model_file(weights, cfg=None, *, device: torch.device, img_size: int | None = None, square: bool = False,
                    backend: str = "auto", cache_dir=None, augment: bool = False, resize: str | None = None,
                    spelling: Spelling = CLI) -> ModelHandle:
    """`weights` ready for inference on `device` (module docstring). A `.pt` / `.weights` model is loaded exactly,
    its `img_size` checked against its largest stride before anything runs, and run by `backend` on the CPU
    (`load_darknet`). The handle's resize mode is the model's own (`model_resize`) unless `resize` overrides it
    (one log line). The per-class confidence thresholds the file carries (detect.inference.class_conf) ride on
    the handle. ValueError for a size the file cannot take, and for `augment` with a fixed-size export."""
    if resize is not None:
        check_resize_mode(resize, spelling.resize)
    if is_onnx_path(weights):
        handle = _load_onnx(weights, device, img_size, square, backend, spelling)
    else:
        handle = load_darknet(weights, cfg, device, img_size, spelling.img_size, backend, cache_dir, square,
                              spelling)
    if augment and handle.input_shape is not None:
        h, w = handle.input_shape
        raise ValueError(f"{spelling.augment} runs the model at other sizes, but {weights} takes {h}x{w} inputs "
                         f"only; export it with --dynamic")
    return with_resize(handle, resize, spelling.resize)


def with_resize(handle: ModelHandle, resize: str | None, flag: str = "--resize") -> ModelHandle:
    """`handle` fed by `resize` instead of its model's own mode (logged once), or as it is for None. Stretching
    fills the network's own shape (square, fixed, or a Darknet-trained non-square cfg's), not rect canvases; a
    non-square Darknet network is letterboxed into its own shape too, as Darknet's letter_box does."""
    if resize is None or resize == handle.resize:
        return handle
    log.info("%s %s: overrides the mode %s was made for (%s); its boxes may be worse than with %s", flag,
             resize, handle.path.name, handle.resize, handle.resize)
    return dataclasses.replace(handle, resize=resize)


def model_resize(model, weights, record: dict | None = None) -> tuple[str, str]:
    """(the resize mode `model` loaded from `weights` expects, why): what a `.pt` recorded (its `record`,
    LoadedModel.record, when read already), else the cfg's `[net] letter_box` (0, Darknet's default: stretch;
    1: letterbox), as Darknet feeds its weights."""
    recorded = trained_resize(record if record is not None else weights)
    if recorded is not None:
        return recorded, f"as {Path(weights).name} was trained"
    letter_box = int(model.net_options.get("letter_box", 0))
    return ("letterbox" if letter_box else "stretch"), f"the cfg's letter_box={letter_box}"


def chosen_resize(model, weights, record: dict | None, override: str | None, flag: str = "--resize") -> str:
    """The mode to feed `model` with: `override` when given (one line when it differs from the model's own),
    else the model's own (`model_resize`)."""
    mode, why = model_resize(model, weights, record)
    if override is not None and override != mode:
        log.info("%s %s: overrides the mode the model was made for (%s, %s)", flag, override, mode, why)
        return override
    return mode


def check_onnx_backend(weights, backend: str, flag: str = "--backend") -> None:
    if backend != "auto":
        raise ValueError(f"{spelt(flag, backend)} is for .pt and .weights models; {weights} runs on onnxruntime "
                         f"(leave {flag.rstrip('=')} out)")


def _onnx_runtime(path):
    try:  # through sys.modules, where a stand-in runtime may take its place
        onnx_runtime = importlib.import_module("detect.inference.onnx_runtime")
    except ImportError as e:
        raise ValueError(f"{path}: running ONNX models needs detect.inference.onnx_runtime and onnxruntime, which "
                         f"cannot be imported here ({e}); use the .pt or .weights instead") from None
    return onnx_runtime


def _load_onnx(weights, device, img_size: int | None, square: bool, backend: str, spelling: Spelling) -> ModelHandle:
    check_onnx_backend(weights, backend, spelling.backend)
    runner = _onnx_runtime(weights).load_onnx_model(weights, str(device))
    fixed = tuple(runner.input_size) if runner.input_size is not None else None
    mode = getattr(runner, "resize", "letterbox")  # exports from before the metadata said were letterboxed
    if img_size is None:
        img_size = max(fixed) if fixed else DEFAULT_DYNAMIC_SIZE
        log_default_size(spelling.img_size, img_size, f"{Path(weights).name}'s " + (
            "fixed input size" if fixed else "default for a dynamic ONNX model"))
    elif fixed is not None and img_size != max(fixed):
        raise ValueError(f"{weights} takes {fixed[0]}x{fixed[1]} inputs only, but {spelling.img_size} {img_size} "
                         f"was given; leave {spelling.img_size} out, or export the model at that size or with "
                         f"--dynamic")
    if fixed is not None:
        if not square:
            log.info("%s takes %dx%d inputs only: every image is fitted into that canvas (no rect canvases)",
                     weights, *fixed)
        square = fixed[0] == fixed[1]
    engine = getattr(runner, "engine", "onnxruntime")
    return ModelHandle(runner, list(runner.names) if runner.names else None, img_size, fixed, square, engine,
                       Path(weights), mode, getattr(runner, "class_conf", None), getattr(runner, "net_shape", None))


def load_darknet(weights, cfg, device: torch.device, img_size: int | None, flag: str, backend: str = "auto",
                 cache_dir=None, square: bool = False, spelling: Spelling = CLI) -> ModelHandle:
    """The handle of a `.pt` / `.weights` model: its runner, the names it carries, input size, resize mode
    (`model_resize`), class thresholds and, for Darknet weights of a non-square cfg, the network shape stretching
    fills; the file read once. The size: the one given (`flag`), else the size a `.pt` was trained at, else the
    cfg's [net] size; a multiple of the model's largest stride, checked before anything runs (the model
    is built at its cfg's size, which any such multiple can run at).
    `backend` (detect.inference.engines.cpu_backend): on the CPU `auto` runs the model on ncnn where its layers
    allow, else on OpenVINO (cached under `cache_dir`, default the user's cache), else, and on CUDA, the PyTorch
    model runs fused (and packed on the CPU). `spelling` names --backend, --device, --cfg and --weights in its
    errors."""
    loaded = load_model(cfg, weights, exact=True, cfg_flag=spelling.cfg, weights_flag=spelling.weights)
    if img_size is None:
        trained = trained_img_size(loaded.record)
        img_size = trained or max(loaded.model.input_size)
        cfg_name = loaded.model.cfg_path or f"the cfg {Path(weights).name} carries"
        log_default_size(flag, img_size, f"the size {Path(weights).name} was trained at" if trained else
                         f"the [net] size of {cfg_name}")
    check_img_size(img_size, loaded.model.max_stride, flag)
    mode, why = model_resize(loaded.model, weights, loaded.record)
    net_shape = darknet_net_shape(loaded)
    log.info("%s: images are %s to the input (%s)%s", Path(weights).name,
             "stretched" if mode == "stretch" else "letterboxed", why,
             f"; into its {net_shape[1]}x{net_shape[0]} network shape (scaled to {flag} {img_size}), as Darknet "
             f"feeds it" if net_shape is not None else "")
    runner = None
    engines = cpu_backend(backend, device, spelling.backend, spelling.device)
    if engines != ["torch"]:
        runner = load_cpu_engine(loaded.model, engines, img_size, torch.get_num_threads(),
                                 Path(cache_dir) if cache_dir else default_cache_dir(), str(weights))
        if runner is None and backend == "auto":
            log.warning("%s: no CPU engine took this model; running it on PyTorch", weights)
    if runner is None:
        runner = for_inference(loaded.model, device)
    return ModelHandle(runner, loaded.names, img_size, None, square, getattr(runner, "engine", "torch"),
                       Path(weights), mode, read_class_conf(weights, loaded.record), net_shape)


def darknet_net_shape(loaded) -> tuple[int, int] | None:
    """(h, w) of the cfg's [net] when it is not square and the weights are Darknet's (trained at that shape, which
    Darknet stretches or letterboxes every image into), else None: square cfgs, and this project's .pt (trained
    square)."""
    h, w = loaded.model.input_size
    return (h, w) if h != w and loaded.record is None else None


def conf_settings(handle: ModelHandle, conf: float | None, spelling: Spelling = CLI) -> dict:
    """`conf` and `class_conf` of the InferenceSettings of predict and the API: the `conf` given for every class,
    else the file's per-class thresholds, else the default (detect.inference.class_conf.conf_options)."""
    if conf is None:
        check_class_count(handle.class_conf, handle.num_classes, handle.path, spelling.conf)
    return conf_options(handle.class_conf, conf, handle.path, spelling.conf)


def log_default_size(flag: str, img_size: int, why: str) -> None:
    log.info("%s %d: %s (%s not given)", flag, img_size, why, flag)


def class_names(handle: ModelHandle, given: list[str] | None = None, flag: str = "--names") -> list[str]:
    """The class names of `handle`'s detections: `given` (by `flag`), else those the file carries, else
    `default_names`; ValueError when their count is not the model's."""
    names = list(given or handle.names or default_names(handle.num_classes, handle.path, flag))
    if len(names) != handle.num_classes:
        raise ValueError(f"{len(names)} class names ({flag}) but {handle.path.name} predicts {handle.num_classes} "
                         f"classes; give the names the weights were trained with")
    return names


def default_names(num_classes: int, weights, flag: str = "--names") -> list[str]:
    """Class names for a model whose file carries none and that was given none: COCO's 80 for an 80-class
    model (the official Darknet .weights are COCO's, as fine-tuning assumes: detect.darknet.transfer; spelt as
    COCO's jsons spell them, so predict and val print the same names), else the class ids "0", "1", ...
    (detect.ops.class_names.are_class_ids); the choice is logged once."""
    source = Path(weights).name
    coco = read_coco_names() if num_classes == 80 else None
    if coco is not None:
        log.info("class names: COCO's 80 (%s carries none; %s overrides)", source, flag)
        return coco
    log.info("class names: the class ids 0..%d (%s carries no names and the model has %d classes, not COCO's "
             "80; %s gives them)", num_classes - 1, source, num_classes, flag)
    return [str(k) for k in range(num_classes)]
