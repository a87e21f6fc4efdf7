"""Detection from a user's own code: load a model once, then call it on images.

    from detect.api import Detector
    detector = Detector.load("weights/yolov3-tiny.weights", cfg="cfg/yolov3-tiny.cfg", names=coco_names)
    for det in detector(["a.jpg", "b.jpg"]):      # one Detections per image
        print(det.to_dicts())                       # boxes in the image's own pixels, with class names
    det = detector(frame_bgr)                       # one HxWx3 array (BGR like OpenCV; rgb=True for RGB)
    with detector.stream("rtsp://camera/live") as frames:   # or 0 (a webcam), http(s):// MJPEG, a video file
        for frame, det in frames: ...                       # the newest frame each time; frames.stats at the end
    Detector.load(..., slice_size=640)              # sliced inference: small objects in large images

The weights are a training checkpoint or `.pt` (which carries its cfg and names), Darknet `.weights` with
their cfg, or an ONNX file (through `detect.export.runtime`). Images are letterboxed exactly as
`detect.predict` and `detect.val` see them (`model_input`, `detect_images`, which predict uses too), so the
API, predict and evaluation give the same detections.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from detect.data.augment import letterbox
from detect.data.geometry import rect_shape, round_up
from detect.data.images import BadImage, read_image
from detect.evaluation.postprocess import non_max_suppression, scale_to_original
from detect.export.cpu_engine import BACKENDS
from detect.export.loading import (
    DEFAULT_DYNAMIC_SIZE,
    check_onnx_backend,
    default_names,
    is_onnx_path,
    load_darknet,
    load_onnx,
    log_default_size,
)
from detect.ops.preprocess import to_model_input
from detect.ops.slicing import DEFAULT_OVERLAP, check_slice, merge_tiles, needs_tiles, tile_grid
from detect.ops.tta import AugmentedModel
from detect.runtime.dist import resolve_device
from detect.runtime.precision import autocast
from detect.streams.reader import (
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WAIT_S,
    DEFAULT_TIMEOUT_S,
    FrameStream,
    open_stream,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class InferenceSettings:
    """How images become model inputs and raw outputs become detections."""

    img_size: int  # long side of the image on its canvas
    conf: float = 0.25
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


def canvas_shape(width: int, height: int, settings: InferenceSettings, stride: int) -> tuple[int, int]:
    """(h, w) of the model input for an image: fixed, square, or the rect canvas of detect.val."""
    if settings.fixed_shape is not None:
        return settings.fixed_shape
    if settings.square:
        return (round_up(settings.img_size, stride),) * 2
    return rect_shape(width, height, settings.img_size, stride)


def model_input(image_bgr: np.ndarray, settings: InferenceSettings, stride: int):
    """(uint8 RGB [3, H, W] letterboxed, ratio, (left, top)) of one image."""
    h, w = image_bgr.shape[:2]
    long_side = None if settings.fixed_shape is not None else settings.img_size
    boxed, ratio, pad = letterbox(image_bgr, canvas_shape(w, h, settings, stride), long_side)
    return np.ascontiguousarray(boxed[:, :, ::-1].transpose(2, 0, 1)), ratio, pad


def detect_images(model, images_bgr: list[np.ndarray], settings: InferenceSettings, device) -> list[torch.Tensor]:
    """Per image, rows (x1, y1, x2, y2, score, class) in the image's own pixels, on the CPU. Images that share
    a canvas shape run in one batch (up to settings.batch_size); a batch gives each image what it gets alone.
    With `settings.slice_size`, each image's tiles run too (as images of their own, batched with the others)
    and are merged with the whole-image pass (detect.ops.slicing)."""
    if settings.slice_size is not None:
        return _detect_sliced(model, images_bgr, settings, device)
    stride = model.max_stride
    if settings.augment:
        model = AugmentedModel(model, stride)
    prepared = [model_input(image, settings, stride) for image in images_bgr]
    by_shape = defaultdict(list)
    for i, (array, _, _) in enumerate(prepared):
        by_shape[array.shape].append(i)
    results: list[torch.Tensor | None] = [None] * len(images_bgr)
    channels_last = torch.device(device).type == "cuda"
    for indices in by_shape.values():
        for start in range(0, len(indices), settings.batch_size):
            chunk = indices[start:start + settings.batch_size]
            batch = torch.from_numpy(np.stack([prepared[i][0] for i in chunk]))
            with torch.inference_mode():
                x = to_model_input(batch, torch.device(device), channels_last)
                with autocast(device, settings.amp_dtype):
                    rows = model(x).float()  # boxes and scores in float32 whatever the autocast dtype
                dets = non_max_suppression(rows, settings.conf, settings.iou, settings.max_det,
                                           multi_label=settings.multi_label, merge=settings.merge)
            for i, det in zip(chunk, dets):
                _, ratio, pad = prepared[i]
                boxes = scale_to_original(det, ratio, pad, images_bgr[i].shape[:2])
                results[i] = torch.cat((boxes, det[:, 4:6]), dim=1).cpu()
    return results


def _detect_sliced(model, images_bgr: list[np.ndarray], settings: InferenceSettings, device) -> list[torch.Tensor]:
    """detect_images over every image and every tile of it at once, then each image's tiles merged into it."""
    size, overlap = settings.slice_size, settings.slice_overlap
    grids = [tile_grid(w, h, size, overlap) if needs_tiles(w, h, size) else []
             for h, w in (image.shape[:2] for image in images_bgr)]
    crops = [np.ascontiguousarray(image[y1:y2, x1:x2])
             for image, grid in zip(images_bgr, grids) for x1, y1, x2, y2 in grid]
    rows = detect_images(model, list(images_bgr) + crops, replace(settings, slice_size=None), device)
    merged, at = [], len(images_bgr)
    for image, whole, grid in zip(images_bgr, rows, grids):
        h, w = image.shape[:2]
        tiles = rows[at:at + len(grid)]
        at += len(grid)
        merged.append(merge_tiles(whole, tiles, grid, w, h, settings.iou, settings.max_det) if grid else whole)
    return merged


@dataclass(frozen=True)
class Detections:
    """What was found in one image, best first; boxes in the image's own pixels."""

    boxes: np.ndarray  # float32 [n, 4] x1, y1, x2, y2
    scores: np.ndarray  # float32 [n] objectness x class probability
    class_ids: np.ndarray  # int64 [n]
    names: list[str]  # every class name of the model, indexed by class id

    @classmethod
    def from_rows(cls, rows: torch.Tensor, names: list[str]) -> Detections:
        rows = rows.float().numpy()
        return cls(rows[:, :4].copy(), rows[:, 4].copy(), rows[:, 5].astype(np.int64), names)

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def labels(self) -> list[str]:
        """The class name of each detection."""
        return [self.names[k] for k in self.class_ids]

    def to_dicts(self) -> list[dict]:
        return [{"class_id": int(k), "name": self.names[k], "score": float(s), "box_xyxy": [float(v) for v in b]}
                for b, s, k in zip(self.boxes, self.scores, self.class_ids)]


class Detector:
    """A model loaded once (`Detector.load`), called on images: `detector(images, rgb=False)`.

    `images`: a path, an HxWx3 uint8 array (BGR like OpenCV; `rgb=True` for RGB) or a list of those (or an
    [N, H, W, 3] array). One image gives one `Detections`, a list gives a list.
    """

    def __init__(self, model, names: list[str], settings: InferenceSettings, device: torch.device):
        self.model, self.names, self.settings, self.device = model, list(names), settings, device

    @classmethod
    def load(cls, weights, cfg=None, *, names: list[str] | None = None, device: str = "auto",
             img_size: int | None = None, conf: float = 0.25, iou: float = 0.45, max_det: int = 300,
             square: bool = False, batch_size: int = 16, augment: bool = False, slice_size: int | None = None,
             slice_overlap: float = DEFAULT_OVERLAP, backend: str = "auto") -> Detector:
        """`weights`: a `.pt` checkpoint (cfg and names inside), Darknet `.weights` (give `cfg`) or `.onnx`.
        `names` override the class names the file carries (default: theirs; else COCO's for an 80-class
        model, else "0", "1", ...; logged once).
        `img_size`: long side of the input, a multiple of the model's largest stride (default: the size a
        `.pt` was trained at, else the cfg's [net] size; a fixed-size ONNX model's own; logged once).
        `augment`: test-time augmentation (detect.ops.tta; not for a fixed-size ONNX model).
        `slice_size`: sliced inference for small objects (detect.ops.slicing): tiles of this many pixels,
        overlapping by at least `slice_overlap` of a tile, each run at `img_size`, merged with the whole image.
        `backend`: the engine of a `.pt` / `.weights` model on the CPU: "auto" (ncnn where the model's layers
        allow, else OpenVINO, else PyTorch; detect.export.cpu_engine), "ncnn", "openvino" or "torch"."""
        _check_settings(img_size, conf, iou, max_det, batch_size)
        if slice_size is not None:
            check_slice(slice_size, slice_overlap, "slice_size", "slice_overlap")
        resolved = resolve_device(device, 0)
        if is_onnx_path(weights):
            check_onnx_backend(weights, backend)
            model, carried, fixed = load_onnx(weights, resolved, img_size)
            if img_size is None:
                img_size = max(fixed) if fixed else DEFAULT_DYNAMIC_SIZE
                log_default_size("img_size", img_size, f"{Path(weights).name}'s " + (
                    "fixed input size" if fixed else "default for a dynamic ONNX model"))
        else:
            model, carried, img_size = load_darknet(weights, cfg, resolved, img_size, "img_size", backend)
            fixed = None
        if augment and fixed is not None:
            raise ValueError(f"augment=True runs the model at other sizes, but {weights} takes {fixed[0]}x{fixed[1]} "
                             f"inputs only; export it with --dynamic")
        names = list(names or carried or default_names(model.num_classes, weights, "names="))
        if len(names) != model.num_classes:
            raise ValueError(f"{len(names)} class names were given but {weights} predicts {model.num_classes} "
                             f"classes; give the names the weights were trained with")
        settings = InferenceSettings(img_size, conf, iou, max_det, square, fixed, batch_size, augment=augment,
                                     slice_size=slice_size, slice_overlap=slice_overlap)
        return cls(model, names, settings, resolved)

    def __call__(self, images, rgb: bool = False):
        batch = isinstance(images, (list, tuple)) or (isinstance(images, np.ndarray) and images.ndim == 4)
        arrays = [_as_bgr(item, rgb) for item in (images if batch else [images])]
        rows = detect_images(self.model, arrays, self.settings, self.device)
        found = [Detections.from_rows(r, self.names) for r in rows]
        return found if batch else found[0]

    def stream(self, source, *, live: bool | None = None, retries: int = DEFAULT_RETRIES,
               retry_wait_s: float = DEFAULT_RETRY_WAIT_S, timeout_s: float = DEFAULT_TIMEOUT_S) -> FrameStream:
        """Detections on every frame the model gets to of a webcam index, a URL (rtsp://, http(s):// video or
        MJPEG) or a video file: `with detector.stream(url) as frames: for frame, found in frames: ...`, then
        `frames.stats` (read, processed, dropped, reconnects). A live source's frames are read on a thread and
        the newest wins (none queue up while the model works); a file's are all processed. A stream that stops
        is reopened `retries` times, `retry_wait_s` apart (detect.streams.reader). StreamError (a ValueError)
        when the source cannot be opened."""
        return FrameStream(open_stream(source, live=live, retries=retries, retry_wait_s=retry_wait_s,
                                       timeout_s=timeout_s), self)


def add_backend_flag(parser) -> None:
    """--backend of detect.predict and detect.val: which engine runs a .pt / .weights model on the CPU."""
    parser.add_argument("--backend", default="auto", choices=BACKENDS,
                        help="CPU inference engine: auto = ncnn where the model's layers allow, else OpenVINO, else "
                             "PyTorch (README \"CPU inference\"); ncnn, openvino or torch to choose. CUDA and .onnx "
                             "files ignore auto")


def add_slice_flags(parser) -> None:
    """--slice SIZE and --overlap F of detect.predict and detect.val (sliced inference), checked as they parse."""

    def number(kind, name: str, low: float, high: float):
        def parse(text: str):
            value = kind(text)
            if not low <= value < high:
                raise ValueError
            return value
        parse.__name__ = name  # argparse's message: invalid <name> value: '...'
        return parse

    parser.add_argument("--slice", type=number(int, "tile size (a positive number of pixels)", 1, float("inf")),
                        default=None, metavar="SIZE",
                        help="sliced inference for small objects in large images: tiles of SIZE pixels, each run at "
                             "--img-size, plus the whole image; boxes mapped back and merged by class-wise NMS")
    parser.add_argument("--overlap", type=number(float, "overlap (a fraction in [0, 1))", 0, 1),
                        default=DEFAULT_OVERLAP, metavar="F",
                        help=f"with --slice: neighbouring tiles overlap by at least this fraction of SIZE "
                             f"(default {DEFAULT_OVERLAP})")


def _check_settings(img_size, conf, iou, max_det, batch_size) -> None:
    if img_size is not None and img_size < 1:
        raise ValueError(f"img_size must be a positive number of pixels, got {img_size}")
    if not 0 <= conf < 1 or not 0 <= iou <= 1:
        raise ValueError(f"conf must be in [0, 1) and iou in [0, 1], got {conf} and {iou}")
    if max_det < 1 or batch_size < 1:
        raise ValueError(f"max_det and batch_size must be positive, got {max_det} and {batch_size}")


def _as_bgr(image, rgb: bool) -> np.ndarray:
    """An HxWx3 uint8 BGR array from a path or an array (grayscale HxW is accepted and made BGR)."""
    if isinstance(image, (str, Path)):
        try:
            return read_image(image)
        except BadImage as e:
            raise ValueError(f"image {image}: {e.detail}; expected an image file "
                             f"(JPEG, PNG, BMP, TIFF or WebP)") from None
    if not isinstance(image, np.ndarray):
        raise TypeError(f"expected an image path or a numpy array, got a {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image array (0..255), got dtype {image.dtype}")
    if image.ndim == 2:
        return np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise ValueError(f"expected an HxWx3 image array, got shape {image.shape}")
    return np.ascontiguousarray(image[:, :, ::-1]) if rgb else image
