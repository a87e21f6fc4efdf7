"""The one inference path of the API, detect.predict, detect.val and detect.bench: an image becomes the model's
input (`prepare`: the letterbox onto its canvas), a batch of inputs becomes rows (`forward`: on the device, under
autocast), rows become detections in the image's own pixels (`postprocess`: NMS, the letterbox undone).
`predictor(images)` runs the three over any images, sliced (detect.ops.slicing) or augmented (detect.ops.tta)
as the settings ask; the eval loader's batches, letterboxed onto the same canvases in its workers, take `forward`
and `postprocess` (detect.evaluation.evaluator): the Predictor alone runs NMS, with its settings' thresholds.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import torch

from detect.darknet.load import uses_channels_last
from detect.data.augmentation.augment import letterbox
from detect.data.augmentation.geometry import rect_shape, round_up
from detect.data.augmentation.resize_modes import check_resize_mode, network_canvas, stretch
from detect.ops.preprocess import to_model_input
from detect.ops.slicing import DEFAULT_OVERLAP, merge_tiles, needs_tiles, tile_grid
from detect.ops.tta import AugmentedModel
from detect.runtime.precision import autocast

from .class_conf import DEFAULT_CONF
from .handle import ModelHandle, Runner
from .postprocess import image_detections


@dataclass(frozen=True)
class InferenceSettings:
    """How images become model inputs and raw outputs become detections."""

    img_size: int | None  # long side of the image on its canvas (None: the eval loader makes the canvases)
    conf: float = DEFAULT_CONF  # with class_conf: their lowest (nothing scoring below it is kept)
    iou: float = 0.45
    max_det: int = 300
    square: bool = False  # img_size x img_size canvas instead of the image's own rect canvas
    fixed_shape: tuple[int, int] | None = None  # a model that takes one (h, w) only: fitted into it
    batch_size: int = 16  # images per forward pass at most
    amp_dtype: torch.dtype | None = None  # autocast dtype of the forward pass on CUDA (ignored on the CPU)
    augment: bool = False  # test-time augmentation (detect.ops.tta): three passes per image, one NMS
    slice_size: int | None = None  # sliced inference (detect.ops.slicing): tiles of this many pixels + the image
    slice_overlap: float = DEFAULT_OVERLAP  # neighbouring tiles overlap by at least this fraction of a tile
    multi_label: bool = False  # NMS keeps every class above conf for a box (detect.val's default), not the best
    merge: bool = False  # merge-NMS (detect.val's default): a kept box is the weighted mean of its cluster
    resize: str = "letterbox"  # letterbox or stretch onto the canvas (detect.data.augmentation.resize_modes)
    # one threshold per class in place of conf: a detection of class k is kept when its score >= class_conf[k]
    # (detect.inference.class_conf: chosen on a validation split)
    class_conf: tuple[float, ...] | None = None
    net_shape: tuple[int, int] | None = None  # a Darknet-trained non-square network's (h, w): the canvas's shape

    def __post_init__(self):
        check_resize_mode(self.resize, "resize mode")

    @property
    def thresholds(self) -> float | tuple[float, ...]:
        """What NMS filters the candidates by: the per-class thresholds, else conf."""
        return self.conf if self.class_conf is None else self.class_conf

    @classmethod
    def for_model(cls, handle: ModelHandle, **options) -> InferenceSettings:
        """Settings whose canvas (size, square or rect, fixed shape, resize mode) is the loaded model's."""
        return cls(handle.img_size, square=handle.square, fixed_shape=handle.input_shape, resize=handle.resize,
                   net_shape=handle.net_shape, **options)


def check_ranges(img_size: int | None, conf: float | None, iou: float | None, max_det: int | None,
                 batch_size: int | None, spell=lambda name: name) -> None:
    """The one range check of the inference settings a user gives: ValueError naming the first value out of
    range, spelt by `spell(setting)` as the caller's user writes it (the CLI's --max-det, the API's max_det=).
    None: not given (the tool's default; for `conf` the model file's per-class thresholds, else DEFAULT_CONF)."""
    for name, value in (("img_size", img_size), ("batch_size", batch_size), ("max_det", max_det)):
        if value is not None and value < 1:
            raise ValueError(f"{spell(name)} must be a positive integer, got {value}")
    if (conf is not None and not 0 <= conf < 1) or (iou is not None and not 0 <= iou <= 1):
        raise ValueError(f"{spell('conf')} must be in [0, 1) and {spell('iou')} in [0, 1], got {conf} and {iou}")


def canvas_shape(width: int, height: int, settings: InferenceSettings, stride: int) -> tuple[int, int]:
    """(h, w) of the model input for an image: fixed, the network's own shape when stretching (square, or a
    Darknet-trained non-square network's: network_canvas) and a non-square Darknet network's under either mode
    (Darknet letterboxes into its width x height too), square, or the rect canvas of detect.val."""
    if settings.fixed_shape is not None:
        return settings.fixed_shape
    if settings.resize == "stretch" or settings.net_shape is not None:
        return network_canvas(settings.img_size, stride, settings.net_shape)
    if settings.square:
        return (round_up(settings.img_size, stride),) * 2
    return rect_shape(width, height, settings.img_size, stride)


def model_input(image_bgr: np.ndarray, settings: InferenceSettings, stride: int):
    """(uint8 RGB [3, H, W] on its canvas, ratio, (left, top)) of one image. Letterbox: a fixed shape takes the
    largest scale that fits, otherwise the image's long side is brought to img_size. Stretch: the image fills the
    canvas, ratio (x, y), no border."""
    h, w = image_bgr.shape[:2]
    shape = canvas_shape(w, h, settings, stride)
    if settings.resize == "stretch":
        (boxed, ratio), pad = stretch(image_bgr, shape), (0, 0)
    else:
        long_side = None if settings.fixed_shape is not None else settings.img_size
        boxed, ratio, pad = letterbox(image_bgr, shape, long_side)
    return np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1)), ratio, pad


class Predictor:
    """A Runner with its settings and device: `predictor(images_bgr)` -> per image, rows (x1, y1, x2, y2, score,
    class) in the image's own pixels, on the CPU. Images that share a canvas shape run in one batch (up to
    settings.batch_size); a batch gives each image what it gets alone."""

    def __init__(self, runner: Runner, settings: InferenceSettings, device, channels_last: bool | None = None):
        self.device = torch.device(device)
        self.settings = settings
        # a module fed only letterboxed batches (the trainer's evaluation) need not say its stride
        self.stride = getattr(runner, "max_stride", None)
        self.runner = AugmentedModel(runner, self.stride) if settings.augment else runner
        self.channels_last = uses_channels_last(self.device) if channels_last is None else channels_last

    def prepare(self, image_bgr: np.ndarray):
        """(uint8 RGB [3, H, W] on its canvas, ratio, (left, top)): `model_input` with these settings."""
        return model_input(image_bgr, self.settings, self.stride)

    def to_input(self, batch: torch.Tensor) -> torch.Tensor:
        """uint8 [N, 3, H, W] -> the float input on the device, in the layout the runner takes."""
        return to_model_input(batch, self.device, self.channels_last)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """The runner's rows of input `x`, in float32 whatever the autocast dtype."""
        with torch.inference_mode(), autocast(self.device, self.settings.amp_dtype):
            return self.runner(x).float()

    def forward(self, batch: torch.Tensor) -> torch.Tensor:
        return self.run(self.to_input(batch))

    def postprocess(self, rows: torch.Tensor, placements) -> list[torch.Tensor]:
        """Per image, its detections in its own pixels (CPU); `placements`: (ratio, pad, (h, w)) per image."""
        s = self.settings
        with torch.inference_mode():
            found = image_detections(rows, placements, s.thresholds, s.iou, s.max_det, s.multi_label, s.merge)
        return [det.cpu() for det in found]

    def __call__(self, images_bgr: list[np.ndarray]) -> list[torch.Tensor]:
        if self.settings.slice_size is not None:
            return self._sliced(images_bgr)
        return self._whole(images_bgr)

    def _whole(self, images_bgr: list[np.ndarray]) -> list[torch.Tensor]:
        prepared = [self.prepare(image) for image in images_bgr]
        by_shape = defaultdict(list)
        for i, (array, _, _) in enumerate(prepared):
            by_shape[array.shape].append(i)
        results: list[torch.Tensor | None] = [None] * len(images_bgr)
        for indices in by_shape.values():
            for start in range(0, len(indices), self.settings.batch_size):
                chunk = indices[start:start + self.settings.batch_size]
                rows = self.forward(torch.from_numpy(np.stack([prepared[i][0] for i in chunk])))
                placements = [(*prepared[i][1:], images_bgr[i].shape[:2]) for i in chunk]
                for i, det in zip(chunk, self.postprocess(rows, placements)):
                    results[i] = det
        return results

    def _sliced(self, images_bgr: list[np.ndarray]) -> list[torch.Tensor]:
        """Every image and every tile of it at once (tiles are images of their own, batched with the others),
        then each image's tiles merged into it."""
        size, overlap = self.settings.slice_size, self.settings.slice_overlap
        grids = [tile_grid(w, h, size, overlap) if needs_tiles(w, h, size) else []
                 for h, w in (image.shape[:2] for image in images_bgr)]
        crops = [np.ascontiguousarray(image[y1:y2, x1:x2])
                 for image, grid in zip(images_bgr, grids) for x1, y1, x2, y2 in grid]
        rows = self._whole(list(images_bgr) + crops)
        merged, at = [], len(images_bgr)
        for image, found, grid in zip(images_bgr, rows, grids):
            h, w = image.shape[:2]
            tiles = rows[at:at + len(grid)]
            at += len(grid)
            merged.append(merge_tiles(found, tiles, grid, w, h, self.settings.iou, self.settings.max_det)
                          if grid else found)
        return merged
