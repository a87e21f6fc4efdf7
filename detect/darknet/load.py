"""The one way every tool builds a model: a cfg plus optional weights (Darknet `.weights`, a partial backbone
such as `darknet53.conv.74`, a `.pt` weights file or a training checkpoint), read once.

Training asks for `names` (the cfg's heads are rewritten to that many classes; the convs feeding them keep their
box and objectness rows and the class rows whose names the source shares, see detect.darknet.transfer);
evaluation and prediction ask for `exact=True` (weights that do not fit the cfg are an error, since a partly
initialised model gives meaningless numbers).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from detect.darknet.pt_files import (
    checkpoint_record,
    checkpoint_state_dict,
    is_torch_checkpoint,
    load_checkpoint,
)
from detect.runtime.commands import spelt

from .model import Darknet
from .packed import pack_model
from .weights import load_weights

log = logging.getLogger(__name__)


@dataclass
class LoadedModel:
    model: Darknet
    report: dict | None  # what load_weights copied, skipped and transferred per head (None without weights)
    names: list[str] | None  # class names a .pt carries (None for .weights)
    record: dict | None = None  # what a .pt says about itself (pt_files.checkpoint_record; None for .weights)


def check_img_size(img_size: int, stride: int, flag: str = "--img-size") -> int:
    """The one check of a requested input size against a model's largest stride (train, val, predict, export and
    the Python API): a positive multiple of `stride`, else a ValueError that names the flag and the nearest sizes
    that work."""
    if img_size >= stride and img_size % stride == 0:
        return img_size
    below = max(stride, img_size // stride * stride)
    above = below + stride if below < img_size else below
    nearest = f"{below} or {above}" if below != above else f"{below}"
    raise ValueError(f"{flag} {img_size} must be a multiple of the model's largest stride {stride} (and at least "
                     f"{stride}): try {nearest}")


def _cfg_required(weights: Path | None, cfg_flag: str = "--cfg", weights_flag: str = "--weights") -> str:
    """Why a cfg is needed, naming what `weights` looks like (a .pt would have carried its cfg); the options as
    the caller's user spells them (`cfg_flag`: --cfg on the command line, cfg= in the API)."""
    if weights is None:
        return f"{cfg_flag} is required: there are no {weights_flag} to take a cfg from"
    if weights.suffix == ".weights" or re.fullmatch(r"\.(conv\.)?\d+", weights.suffix) or ".conv." in weights.name:
        return (f"{cfg_flag} is required: {weights} is Darknet weights, which hold no cfg; pass the cfg they were "
                f"trained with")
    return (f"{cfg_flag} is required: {weights} is not a PyTorch checkpoint (which would carry its cfg), so it is "
            f"read as Darknet weights, which hold no cfg; expected a .pt, or Darknet .weights / a partial backbone "
            f"such as darknet53.conv.74 with {cfg_flag}")


def load_model(cfg=None, weights=None, *, num_classes: int | None = None, names: list[str] | None = None,
               img_size=None, exact: bool = False, cfg_flag: str = "--cfg",
               weights_flag: str = "--weights") -> LoadedModel:
    """Build `cfg` (a path or cfg text; a .pt may supply its own) and load `weights` into it. `names`, the
    classes to train, set `num_classes` and let class rows be matched by name with the source's. Errors name the
    two as `cfg_flag` and `weights_flag` (the command line's flags unless the caller spells them otherwise)."""
    if names is not None:
        names = list(names)
        if num_classes is not None and num_classes != len(names):
            raise ValueError(f"num_classes={num_classes} but {len(names)} class names were given; "
                             f"pass one or the other, or both agreeing")
        num_classes = len(names)
    checkpoint, source_names = None, None
    if weights is not None:
        weights = Path(weights)
        if not weights.is_file():
            raise FileNotFoundError(f"{spelt(weights_flag, str(weights))}: file not found")
        if is_torch_checkpoint(weights):
            checkpoint = load_checkpoint(weights)
            checkpoint_state_dict(checkpoint, weights)  # raises when the file holds no weights
            source_names = list(checkpoint.get("names") or []) or None
            cfg = cfg or checkpoint.get("cfg_text")
    if cfg is None:
        raise ValueError(_cfg_required(weights, cfg_flag, weights_flag))
    model = Darknet(cfg, img_size=img_size, num_classes=num_classes)
    if model.is_classifier:
        raise ValueError(f"{spelt(cfg_flag, str(model.cfg_path or 'text'))}: a classifier cfg has no [yolo] heads; "
                         f"pick a detection cfg")
    report = None if weights is None else load_weights(model, weights, checkpoint=checkpoint, names=names)
    if exact and report is not None:
        _check_complete(report, weights)
        problems = list(report.get("skipped", [])) + list(report.get("missing", []))
        if problems:
            raise ValueError(f"{weights} does not fit {model.cfg_path or 'the cfg'} ({model.num_classes} "
                             f"classes): {len(problems)} tensor(s) differ, e.g. {problems[0]}; pass the cfg the "
                             f"weights were trained with")
    record = checkpoint_record(weights, checkpoint) if checkpoint is not None else None
    return LoadedModel(model, report, source_names, record)


def _check_complete(report: dict, weights) -> None:
    """A `.weights` file ending early at a layer boundary loads as a backbone; evaluation needs it whole."""
    loaded, total = report.get("layers_loaded"), report.get("total_layers")
    if loaded is not None and loaded < total:
        raise ValueError(f"{weights} holds the weights of layers 0..{loaded - 1} only, of {total} (a partial "
                         f"file such as a .conv.N backbone); expected the complete .weights of this cfg")


def uses_channels_last(device: torch.device, amp_dtype: torch.dtype | None = None) -> bool:
    """Whether models and inputs on `device` run in NHWC: the layout of the tensor cores' convolutions, and of
    oneDNN's bf16 ones on the CPU (training under bf16 autocast)."""
    return device.type == "cuda" or (device.type == "cpu" and amp_dtype == torch.bfloat16)


def for_inference(model: Darknet, device: torch.device, pack: bool = True) -> Darknet:
    """Fused, in eval mode, on `device`, in the memory layout `uses_channels_last` picks. On the CPU the
    convolutions are also packed for oneDNN (`detect.darknet.packed`; NHWC activations) unless `pack=False`:
    the model can then run inference only, on the CPU."""
    model = model.fuse().eval().to(device)
    if uses_channels_last(device):
        model.to(memory_format=torch.channels_last)
    if pack and device.type == "cpu":
        pack_model(model)
    return model
