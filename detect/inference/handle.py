"""What the loader hands every front end: a model ready to run (`Runner`) and what a caller must know to feed it
(`ModelHandle`).

Every engine keeps one contract, the Darknet eval model's: `runner(x)` takes float [N, 3, H, W] in [0, 1] and
returns [N, P, 5+K] rows (cx, cy, w, h in input pixels, objectness, class probabilities), with `num_classes`
and `max_stride` beside it. The PyTorch model is a Runner as it is; the compiled engines (ncnn, OpenVINO,
onnxruntime) inherit `CompiledRunner`, whose eval/train/to do nothing, so code written for an nn.Module
(switching modes around an evaluation) takes them unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from .class_conf import ClassConf


@runtime_checkable
class Runner(Protocol):
    num_classes: int
    max_stride: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor: ...


class CompiledRunner:
    """The base of the engines that hold no PyTorch state: modes and devices are fixed when they are built."""

    training = False
    engine = "compiled"  # which runtime runs it, as the handle reports it

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def to(self, *args, **kwargs):
        return self


@dataclass(frozen=True)
class ModelHandle:
    """A model file loaded for inference (detect.inference.loading.load_model_file)."""

    runner: Runner
    names: list[str] | None  # the class names the file carries (None: it carries none)
    img_size: int  # long side of an image on its canvas
    input_shape: tuple[int, int] | None  # (h, w) of a fixed-size ONNX export: every image is fitted into it
    square: bool  # img_size x img_size canvases instead of each image's rect canvas
    engine: str  # "torch", "ncnn", "openvino" or "onnxruntime"
    path: Path
    resize: str = "letterbox"  # how an image becomes the input (detect.data.augmentation.resize_modes)
    class_conf: ClassConf | None = None  # per-class confidence thresholds the file carries (or None)
    # (h, w) of a non-square cfg whose Darknet weights were trained at that shape: the canvas either mode feeds
    # (detect.data.augmentation.resize_modes.network_canvas); None for square cfgs and for this project's .pt (trained square)
    net_shape: tuple[int, int] | None = None

    @property
    def num_classes(self) -> int:
        return self.runner.num_classes

    @property
    def max_stride(self) -> int:
        return self.runner.max_stride
