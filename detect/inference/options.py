"""The user's inference options as one typed value, and the one builder of the Predictor's settings from them.

The command-line flags become `InferenceOptions` in one function (detect.inference.cli_flags.inference_options),
the API fills it from its keyword arguments, and `build_settings(handle, options, defaults, device)` turns it,
with the loaded model, into InferenceSettings for every tool. None means "not given": the tool's `ToolDefaults`
fill it, so a value given equal to a default (`--conf 0.001`) is still taken as given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from detect.ops.slicing import DEFAULT_OVERLAP
from detect.runtime.precision import amp_dtype

from .handle import ModelHandle
from .loading import CLI, Spelling, conf_settings, load_model_file
from .predictor import InferenceSettings


@dataclass(frozen=True)
class InferenceOptions:
    """What a user asked of inference; None where not given (the tool's ToolDefaults apply)."""

    img_size: int | None = None  # None: the model's own size (detect.inference.loading)
    conf: float | None = None
    iou: float | None = None
    max_det: int | None = None
    batch_size: int | None = None
    square: bool = False
    resize: str | None = None  # None: the model's own mode
    augment: bool = False
    slice_size: int | None = None
    slice_overlap: float = DEFAULT_OVERLAP
    amp: str = "off"  # autocast precision name (detect.runtime.precision.AMP_DTYPES)
    backend: str = "auto"  # CPU engine of a .pt / .weights model (detect.inference.engines)
    multi_label: bool | None = None
    merge: bool | None = None


@dataclass(frozen=True)
class ToolDefaults:
    """A tool's values for the options a user left out."""

    conf: float | None  # None: the model file's per-class thresholds, else DEFAULT_CONF
    iou: float
    max_det: int
    batch_size: int
    multi_label: bool = False
    merge: bool = False

    def settings(self, img_size: int | None = None, **fields) -> InferenceSettings:
        """These defaults as settings without a loaded model (the trainer's evaluation: its loader makes the
        canvases); `fields` override."""
        return InferenceSettings(img_size, **{"conf": self.conf, "iou": self.iou, "max_det": self.max_det,
                                              "batch_size": self.batch_size, "multi_label": self.multi_label,
                                              "merge": self.merge, **fields})


# detect.predict (and its --track): a detection threshold, plain NMS, one image or frame a batch
PREDICT = ToolDefaults(conf=None, iou=0.45, max_det=300, batch_size=1)
API_DEFAULTS = replace(PREDICT, batch_size=16)
# detect.val, the trainer's evaluation, the int8 check: the mAP protocol (every box down to 0.001, merge-NMS)
EVALUATION = ToolDefaults(conf=0.001, iou=0.6, max_det=300, batch_size=32, multi_label=True, merge=True)
# detect.audit: the evaluation's protocol; the faint boxes tell a real object the model barely sees from an empty
# region (a spurious label): a floor of 0.01 and 100 boxes an image ranked the errors worse (docs/benchmarks.md)
AUDIT = EVALUATION


def build_settings(handle: ModelHandle, options: InferenceOptions, defaults: ToolDefaults, device,
                   spelling: Spelling = CLI) -> InferenceSettings:
    """The Predictor's settings of `options` on the loaded model `handle` (its canvas: InferenceSettings.for_model),
    `defaults` filling what was not given. The confidence: a given conf for every class; else the tool's default
    number (detect.val's 0.001); else the model file's per-class thresholds, else DEFAULT_CONF (conf_settings,
    which logs the choice; `spelling` names the option there)."""
    if options.conf is None and defaults.conf is not None:
        thresholds = {"conf": defaults.conf, "class_conf": None}
    else:
        thresholds = conf_settings(handle, options.conf, spelling)

    def given(value, default):
        return default if value is None else value

    return InferenceSettings.for_model(
        handle, **thresholds, iou=given(options.iou, defaults.iou), max_det=given(options.max_det, defaults.max_det),
        batch_size=given(options.batch_size, defaults.batch_size),
        amp_dtype=amp_dtype(options.amp, torch.device(device)), augment=options.augment,
        slice_size=options.slice_size, slice_overlap=options.slice_overlap,
        multi_label=given(options.multi_label, defaults.multi_label), merge=given(options.merge, defaults.merge))


def load_handle(weights, cfg, options: InferenceOptions, device, *, cache_dir=None,
               spelling: Spelling = CLI) -> ModelHandle:
    """`weights` loaded as `options` ask (size, square, CPU backend, test-time augmentation, resize mode):
    detect.inference.loading.load_model_file."""
    return load_model_file(weights, cfg, device=device, img_size=options.img_size, square=options.square,
                           backend=options.backend, cache_dir=cache_dir, augment=options.augment,
                           resize=options.resize, spelling=spelling)
