"""Detection from a user's own code: load a model once, then call it on images.

    from detect.api import Detector
    detector = Detector.load("weights/yolov3-tiny.weights", cfg="cfg/yolov3-tiny.cfg", names=coco_names)
    for det in detector(["a.jpg", "b.jpg"]):      # one Detections per image
        print(det.to_dicts())                       # boxes in the image's own pixels, with class names
    det = detector(frame_bgr)                       # one HxWx3 array (BGR like OpenCV; rgb=True for RGB)
    det = detector(PIL.Image.open("c.png"))         # a PIL image, any mode (L, RGBA, P, ...)
    with detector.stream("rtsp://camera/live") as frames:   # or 0 (a webcam), http(s):// MJPEG, a video file
        for frame, det in frames: ...                       # the newest frame each time; frames.stats at the end
    with detector.track("clip.mp4") as frames:      # or a stream, a folder of images, a list of images
        for frame, det in frames: det.track_ids     # ids per source; frames.class_counts() at the end
    Detector.load(..., slice_size=640)              # sliced inference: small objects in large images

The weights are a training checkpoint or `.pt` (which carries its cfg and names), Darknet `.weights` with
their cfg, or an ONNX file. They load through the loader detect.predict and detect.val use
(detect.inference.loading) and run through the same Predictor (detect.inference.predictor), so the API,
predict and evaluation give one model file's image the same detections.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from detect.data.records.images import BadImage, read_image
from detect.inference.loading import API, class_names
from detect.inference.options import API_DEFAULTS, InferenceOptions, build_settings, load_handle
from detect.inference.predictor import InferenceSettings, Predictor, check_ranges
from detect.ops.slicing import DEFAULT_OVERLAP, check_slice
from detect.runtime.dist import resolve_device
from detect.streams.reader import (
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WAIT_S,
    DEFAULT_TIMEOUT_S,
    FrameStream,
    open_stream,
)
from detect.tracking.config import DEFAULT_TRACKER
from detect.tracking.frames import ImageFrames, TrackStream, is_image_sequence
from detect.tracking.settings import for_tracking
from detect.tracking.sources import SourceTracks

__all__ = ["Detections", "Detector"]


@dataclass(frozen=True)
class Detections:
    """What was found in one image, best first; boxes in the image's own pixels."""

    boxes: np.ndarray  # float32 [n, 4] x1, y1, x2, y2
    scores: np.ndarray  # float32 [n] objectness x class probability
    class_ids: np.ndarray  # int64 [n]
    names: list[str]  # every class name of the model, indexed by class id
    track_ids: np.ndarray | None = None  # int64 [n] from Detector.track, else None

    @classmethod
    def from_rows(cls, rows, names: list[str]) -> Detections:
        """Rows (x1, y1, x2, y2, score, class): a Predictor's tensor [n, 6], or a tracker's array [k, 7] whose
        last column is the track id."""
        rows = rows.float().numpy() if isinstance(rows, torch.Tensor) else np.asarray(rows, np.float64)
        ids = rows[:, 6].astype(np.int64) if rows.shape[1] > 6 else None
        boxes, scores = rows[:, :4].astype(np.float32), rows[:, 4].astype(np.float32)
        return cls(boxes, scores, rows[:, 5].astype(np.int64), names, ids)

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def labels(self) -> list[str]:
        """The class name of each detection."""
        return [self.names[k] for k in self.class_ids]

    def to_dicts(self) -> list[dict]:
        ids = [None] * len(self) if self.track_ids is None else self.track_ids.tolist()
        return [{"class_id": int(k), "name": self.names[k], "score": float(s), "box_xyxy": [float(v) for v in b]}
                | ({} if i is None else {"track_id": i})
                for b, s, k, i in zip(self.boxes, self.scores, self.class_ids, ids)]


class Detector:
    """A model loaded once (`Detector.load`), called on images: `detector(images, rgb=False)`.

    `images`: a path, an HxWx3 uint8 array (BGR like OpenCV; `rgb=True` for RGB; HxW and HxWx1 grayscale), a
    PIL image of any mode (converted to RGB: grayscale, palette and RGBA alike; `rgb` does not apply), or a list
    of those (or an [N, H, W, 3] array). One image gives one `Detections`, a list gives a list.
    """

    def __init__(self, predictor: Predictor, names: list[str]):
        self.predictor, self.names = predictor, list(names)

    @property
    def model(self):
        return self.predictor.runner

    @property
    def settings(self) -> InferenceSettings:
        return self.predictor.settings

    @property
    def device(self) -> torch.device:
        return self.predictor.device

    @classmethod
    def load(cls, weights, cfg=None, *, names: list[str] | None = None, device: str = "auto",
             img_size: int | None = None, conf: float | None = None, iou: float = API_DEFAULTS.iou,
             max_det: int = API_DEFAULTS.max_det, square: bool = False, batch_size: int = API_DEFAULTS.batch_size,
             augment: bool = False, slice_size: int | None = None, slice_overlap: float = DEFAULT_OVERLAP,
             backend: str = "auto", resize: str | None = None) -> Detector:
        """`weights`: a `.pt` checkpoint (cfg and names inside), Darknet `.weights` (give `cfg`) or `.onnx`.
        `names` override the class names the file carries (default: theirs; else COCO's for an 80-class
        model, else "0", "1", ...; logged once).
        `img_size`: long side of the input, a multiple of the model's largest stride (default: the size a
        `.pt` was trained at, else the cfg's [net] size; a fixed-size ONNX model's own; logged once).
        `augment`: test-time augmentation (detect.ops.tta; not for a fixed-size ONNX model).
        `slice_size`: sliced inference for small objects (detect.ops.slicing): tiles of this many pixels,
        overlapping by at least `slice_overlap` of a tile, each run at `img_size`, merged with the whole image.
        `backend`: the engine of a `.pt` / `.weights` model on the CPU: "auto" (ncnn where the model's layers
        allow, else OpenVINO, else PyTorch; detect.inference.engines), "ncnn", "openvino" or "torch".
        `conf`: one confidence threshold for every class. Not given (None), the per-class thresholds the file
        carries are used (chosen by training or detect.val --save-thresholds; detections are then filtered at
        `settings.conf`, the lowest of them), and for a file without them 0.25; the choice is logged once.
        `iou` (0.45), `max_det` (300): predict's NMS; `batch_size` (16): images per forward pass at most.
        `resize`: "letterbox" or "stretch" instead of the model's own mode (what a `.pt` was trained with, else
        the cfg's `letter_box`, 0 = stretch as Darknet; an ONNX export's metadata)."""
        check_ranges(img_size, conf, iou, max_det, batch_size)
        if slice_size is not None:
            check_slice(slice_size, slice_overlap, "slice_size", "slice_overlap")
        for value, name, what in ((weights, "weights", "model file (.pt, .weights or .onnx)"),
                                  (cfg, "cfg", ".cfg file")):
            if value is not None and Path(value).is_dir():
                raise ValueError(f"{name}={str(value)!r} is a folder; give the {what} in it")
        resolved = resolve_device(device, 0, API.device)
        options = InferenceOptions(img_size=img_size, conf=conf, iou=iou, max_det=max_det, batch_size=batch_size,
                                   square=square, resize=resize, augment=augment, slice_size=slice_size,
                                   slice_overlap=slice_overlap, backend=backend)
        handle = load_handle(weights, cfg, options, resolved, spelling=API)
        names = class_names(handle, names, API.names)
        settings = build_settings(handle, options, API_DEFAULTS, resolved, API)
        return cls(Predictor(handle.runner, settings, resolved), names)

    def __call__(self, images, rgb: bool = False):
        batch = isinstance(images, (list, tuple)) or (isinstance(images, np.ndarray) and images.ndim == 4)
        arrays = [_as_bgr(item, rgb) for item in (images if batch else [images])]
        found = [Detections.from_rows(rows, self.names) for rows in self.predictor(arrays)]
        return found if batch else found[0]

    def stream(self, source, *, live: bool | None = None, retries: int = DEFAULT_RETRIES,
               retry_wait_s: float = DEFAULT_RETRY_WAIT_S, timeout_s: float = DEFAULT_TIMEOUT_S) -> FrameStream:
        """Detections on every frame the model gets to of a webcam index, a URL (rtsp://, http(s):// video or
        MJPEG) or a video file: `with detector.stream(url) as frames: for frame, found in frames: ...`, then
        `frames.stats` (read, processed, dropped, reconnects). A live source's frames are read on a thread and
        the newest wins (none queue up while the model works); a file's are all processed. A stream that stops
        is reopened `retries` times, `retry_wait_s` apart (detect.streams.reader). StreamError (a ValueError)
        when the source cannot be opened."""
        if isinstance(source, (str, Path)) and Path(source).is_dir():
            raise ValueError(f"source={str(source)!r} is a folder: stream() reads a webcam index, a URL or a video "
                             f"file; give its images to the detector (detector([paths])) or the folder to "
                             f"track() to follow objects over them")
        return FrameStream(open_stream(source, live=live, retries=retries, retry_wait_s=retry_wait_s,
                                       timeout_s=timeout_s), self)

    def track(self, source, tracker: str = DEFAULT_TRACKER, *, rgb: bool = False, fps: float | None = None,
              live: bool | None = None, retries: int = DEFAULT_RETRIES, retry_wait_s: float = DEFAULT_RETRY_WAIT_S,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> TrackStream:
        """Objects followed over the frames of one source: a video file, a webcam index or a URL (read as
        `stream` reads them), a folder of images (in name order) or a list of images (paths or arrays, `rgb` as
        in a call). `with detector.track("clip.mp4") as frames: for frame, found in frames: found.track_ids`,
        then `frames.class_counts()` ({class name: distinct tracks}). Each call has its own tracker (`tracker`:
        "bytetrack" or "sort", detect.tracking): ids count from 1. The model's thresholds are the tracker's high
        score and boxes down to its low score feed ByteTrack's second stage; `found` holds the tracked boxes
        (Kalman-filtered) only. `fps`: an image sequence's frame rate (default 30), which scales how long an
        unseen track is kept. An [N, H, W, 3] array is N frames in order."""
        if fps is not None and not fps > 0:
            raise ValueError(f"fps must be a positive frame rate, got {fps}")
        settings, config = for_tracking(self.settings, tracker)
        detect = copy.copy(self.predictor)
        detect.settings = settings  # the same model, keeping boxes down to the tracker's low score
        if isinstance(source, np.ndarray) and source.ndim == 4:  # [N, H, W, 3]: N frames, as a call takes them
            source = list(source)
        if is_image_sequence(source):
            items = [_as_bgr(i, rgb) if isinstance(i, np.ndarray) else i for i in source] \
                if isinstance(source, (list, tuple)) else source
            frames = ImageFrames(items, fps)
        else:
            frames = open_stream(source, live=live, retries=retries, retry_wait_s=retry_wait_s, timeout_s=timeout_s)
        return TrackStream(frames, detect, SourceTracks(config, frames.fps),
                           lambda rows: Detections.from_rows(rows, self.names), self.names)


def _as_bgr(image, rgb: bool) -> np.ndarray:
    """An HxWx3 uint8 BGR array from a path, a PIL image or an array (grayscale HxW or HxWx1 made BGR)."""
    if isinstance(image, (str, Path)):
        if Path(image).is_dir():
            raise ValueError(f"image {image} is a folder; give its image files (a list of paths), or the folder "
                             f"to Detector.track to follow objects over its images")
        try:
            return read_image(image)
        except BadImage as e:
            raise ValueError(f"image {image}: {e.detail}; expected an image file "
                             f"(JPEG, PNG, BMP, TIFF or WebP)") from None
    if _is_pil_image(image):
        return _pil_to_bgr(image)
    if not isinstance(image, np.ndarray):
        raise TypeError(f"expected an image path, a PIL image or a numpy array, got a {type(image).__name__}")
    if image.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image array (0..255), got dtype {image.dtype}")
    if image.ndim == 3 and image.shape[2] == 1:
        image = image[:, :, 0]
    if image.ndim == 2 and min(image.shape) >= 1:  # gray: the same value in every channel, whatever `rgb`
        return np.repeat(image[:, :, None], 3, axis=2)
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise ValueError(f"expected an HxWx3, HxWx1 or HxW image array, got shape {image.shape}")
    return np.ascontiguousarray(image[:, :, ::-1]) if rgb else image


def _is_pil_image(image) -> bool:
    """Whether `image` is a PIL image (PIL is imported by whoever made one; the API does not import it)."""
    pil = sys.modules.get("PIL.Image")
    return pil is not None and isinstance(image, pil.Image)


def _pil_to_bgr(image) -> np.ndarray:
    """A PIL image of any 8-bit mode as BGR: grayscale (L, 1, LA), palette (P, PA), RGBA, CMYK, ... through
    PIL's own conversion to RGB (alpha dropped); 16-bit and float modes are refused."""
    if image.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        raise ValueError(f"a PIL image of mode {image.mode} (16-bit or float): convert it to 8 bits first, e.g. "
                         f"image.convert('L') or an array scaled to uint8")
    if min(image.size) < 1:
        raise ValueError(f"an empty PIL image (size {image.size})")
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])
