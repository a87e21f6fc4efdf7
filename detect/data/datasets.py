"""Torch datasets over a source: augmented square training samples and letterboxed evaluation samples.

Both return uint8 CHW RGB tensors (conversion to float happens on the device). Training labels are
[n, 5] = (class, cx, cy, w, h) normalised to the sample; `collate_*` adds the batch index column.
"""

from __future__ import annotations

import logging
import signal
from collections import OrderedDict

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from detect.data.augmentation.augment import (
    PAD_VALUE,
    draw_hsv_gains,
    draw_mix_ratio,
    flip_boxes_lr,
    flip_boxes_ud,
    letterbox_place,
    letterbox_resize,
)
from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.augmentation.device_augment import DeviceSample, collate_device
from detect.data.augmentation.resize_modes import (
    TRAIN_RESIZE_MODES,
    check_resize_mode,
    stretch,
    stretch_ratio,
)
from detect.data.augmentation.sample_plan import (
    GeometryPlan,
    SamplePlan,
    paint_sample,
    plan_geometry,
)
from detect.data.formats.sources import DatasetSource
from detect.data.records.images import load_image, load_image_for_size, resize_long_side

log = logging.getLogger(__name__)

# Images in a row that may fail to read before a sample gives up: a few vanished files are skipped, a data
# mount that went away entirely stops the epoch with a message that says so.
MAX_UNREADABLE_IN_A_ROW = 16


class UnreadableImages:
    """Images that could not be read during the run (deleted, or a network mount gone since the label cache was
    built): each is reported once per process and counted."""

    def __init__(self):
        self.paths: set[str] = set()

    def report(self, path: str, error: OSError, instead: str) -> None:
        if path not in self.paths:
            self.paths.add(path)
            log.warning("cannot read %s (%s); %s (%d unreadable image(s) so far in this process)", path,
                        error.strerror or error, instead, len(self.paths))


def xyxy_to_normalised_cxcywh(boxes: np.ndarray, width: int, height: int) -> np.ndarray:
    scale = np.array([width, height, width, height], dtype=np.float32)
    b = boxes.astype(np.float32) / scale
    return np.stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2, b[:, 2] - b[:, 0], b[:, 3] - b[:, 1]], 1)


def to_chw_rgb(image_bgr: np.ndarray, flip_lr: bool = False, flip_ud: bool = False) -> torch.Tensor:
    """One copy does the channel swap, the optional flips and the HWC -> CHW transpose."""
    view = image_bgr[::-1 if flip_ud else 1, ::-1 if flip_lr else 1, ::-1]
    return torch.from_numpy(np.ascontiguousarray(view.transpose(2, 0, 1)))


def _split_key(key) -> tuple:
    """(epoch, index, batch, draw) of a training key; a bare index is (0, index, None, 0)."""
    if not isinstance(key, tuple):
        return 0, key, None, 0
    epoch, index, *rest = key
    return epoch, index, rest[0] if rest else None, rest[1] if len(rest) > 1 else 0


class TrainDataset(Dataset):
    """Mosaic (probability `mosaic`; of those, 9 tiles with probability `mosaic9`) or a centred single image, then
    affine (and perspective), mixup with a second such sample (probability `mixup`), HSV and flips, at `img_size`."""

    def __init__(self, source: DatasetSource, img_size: int, augment: AugmentConfig, seed: int = 0,
                 buffer_images: int = 0, epochs: int | None = None, image_cache=None, resize: str = "letterbox"):
        self.source = source
        # stretch: every image (alone or a mosaic tile) first fills img_size x img_size, as Darknet trains;
        # stretch-single: only the images that are not mosaic tiles
        self.resize = check_resize_mode(resize, "resize", TRAIN_RESIZE_MODES)
        self.image_cache = image_cache  # detect.data.records.image_cache.ImageCache of decode_resized's outputs, or None
        self.records = source.records
        self.img_size = int(img_size)
        self.augment = augment
        self.seed = int(seed)
        self.mosaic_epochs = augment.mosaic_epochs(epochs)  # later epochs see whole images (None: every epoch)
        # Recently decoded images (per worker): a mosaic draws 3 random partners, so on small and medium
        # datasets most draws hit images decoded moments ago; decoding is the dominant cost.
        self._recent: OrderedDict[int, tuple[np.ndarray, float]] = OrderedDict()
        self.buffer_images = int(buffer_images)
        self.unreadable = UnreadableImages()
        self.on_device = False  # True: samples are DeviceSample sources, painted per batch on the device

    def __len__(self) -> int:
        return len(self.records)

    def load_resized(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(image with long side = img_size, or stretched to img_size x img_size, boxes scaled to it)."""
        if index in self._recent:
            self._recent.move_to_end(index)
            image, r = self._recent[index]
        else:
            cached = self.image_cache.get(index) if self.image_cache is not None else None
            image, r = cached if cached is not None else self.decode_resized(index)
            if self.buffer_images > 0:
                self._recent[index] = (image, r)
                if len(self._recent) > self.buffer_images:
                    self._recent.popitem(last=False)
        rec = self.records[index]
        if self.resize == "stretch":  # the two ratios follow from the sizes (the cache keeps NaN)
            rx, ry = stretch_ratio(rec.width, rec.height, image.shape[:2])
            r = np.array([rx, ry, rx, ry])
        return image, rec.boxes.astype(np.float64) * r

    def decode_resized(self, index: int) -> tuple[np.ndarray, float]:
        """Image `index` decoded and resized to long side img_size, and its scale from the original (what the
        image cache holds, built by this same method)."""
        rec = self.records[index]
        image, decoded_scale = load_image_for_size(rec.path, rec.width, rec.height, self.img_size)
        if self.resize == "stretch":
            return stretch(image, (self.img_size, self.img_size))[0], float("nan")
        image, r = resize_long_side(image, self.img_size)
        return image, r * decoded_scale

    def __getitem__(self, key):
        """`key` is an index, or (epoch, index[, batch[, draw]]) from the training sampler. The draws depend on
        (seed, epoch, index) only, and on `draw` for the later copies of an image that repeat-factor sampling
        repeats within an epoch; mosaic partners come from `batch` (images this worker decodes anyway),
        else from the whole dataset. An image that cannot be read any more is reported and the next index's
        sample is given instead, so the epoch goes on."""
        epoch, index, batch, draw = _split_key(key)
        for attempt in range(MAX_UNREADABLE_IN_A_ROW):
            at = (index + attempt) % len(self.records)
            try:
                return self._sample(epoch, at, batch, draw)
            except OSError as e:
                self.unreadable.report(e.filename or self.records[at].path, e, "its sample is replaced")
        raise OSError(f"{MAX_UNREADABLE_IN_A_ROW} images in a row cannot be read (the last {self.records[at].path}):"
                      f" has the data folder or its mount gone away?")

    def _sample(self, epoch: int, index: int, batch, draw: int = 0):
        plan = self.plan(epoch, index, batch, draw)
        s = self.img_size
        labels = np.concatenate([plan.classes[:, None].astype(np.float32),
                                 xyxy_to_normalised_cxcywh(plan.boxes, s, s)], 1)
        if self.on_device:  # the pixels are painted with the whole batch on the device: send their sources
            return DeviceSample.of(plan), torch.from_numpy(labels), self.records[index].path
        return to_chw_rgb(paint_sample(plan), plan.flip_lr, plan.flip_ud), torch.from_numpy(labels), \
            self.records[index].path

    def plan(self, epoch: int, index: int, batch=None, draw: int = 0) -> SamplePlan:
        """Every draw of sample (epoch, index) and its boxes (detect.data.augmentation.sample_plan), no pixel painted yet."""
        # Every draw comes from this one generator, in a fixed order, and a draw for an augmentation that is off
        # is not made (so a new key at 0 leaves the samples of earlier runs as they were). `draw` k > 0: the k-th
        # repeat of this image in the epoch (repeat-factor sampling) gets a stream of its own.
        rng = np.random.default_rng([self.seed, int(epoch), int(index)] + ([int(draw)] if draw else []))
        s, cfg = self.img_size, self.augment
        mosaic_epoch = self.mosaic_epochs is None or int(epoch) < self.mosaic_epochs
        pool = batch if batch else range(len(self.records))
        geometries = [self._geometry(rng, index, pool, mosaic_epoch)]
        boxes, classes, ratio = geometries[0].boxes, geometries[0].classes, None
        if mosaic_epoch and cfg.mixup > 0 and rng.random() < cfg.mixup:
            # the second sample is made like the first (its own mosaic draw), from the same pool
            geometries.append(self._geometry(rng, pool[int(rng.integers(0, len(pool)))], pool, mosaic_epoch))
            ratio = draw_mix_ratio(rng)
            boxes = np.concatenate([boxes, geometries[1].boxes])
            classes = np.concatenate([classes, geometries[1].classes])
        gains = draw_hsv_gains(rng, cfg)
        flip_lr = cfg.fliplr > 0 and rng.random() < cfg.fliplr
        flip_ud = cfg.flipud > 0 and rng.random() < cfg.flipud
        if flip_lr:
            boxes = flip_boxes_lr(boxes, s)
        if flip_ud:
            boxes = flip_boxes_ud(boxes, s)
        return SamplePlan(geometries, ratio, gains, flip_lr, flip_ud, boxes, classes, s)

    def _geometry(self, rng: np.random.Generator, index: int, pool, mosaic_epoch: bool) -> GeometryPlan:
        """Image `index` alone or in a mosaic of 4 or 9 with partners from `pool`, warped."""
        cfg = self.augment
        use_mosaic = cfg.mosaic > 0 and rng.random() < cfg.mosaic
        use_mosaic &= mosaic_epoch
        nine = use_mosaic and cfg.mosaic9 > 0 and rng.random() < cfg.mosaic9
        partners = (8 if nine else 3) if use_mosaic else 0
        indices = [index, *(pool[j] for j in rng.integers(0, len(pool), partners))] if partners else [index]
        images, boxes = zip(*(self.load_resized(i) for i in indices))
        if self.resize == "stretch-single" and not partners:  # the long-side image filled out to the square
            image, (rx, ry) = stretch(images[0], (self.img_size, self.img_size))
            images, boxes = (image,), (boxes[0] * np.array([rx, ry, rx, ry]),)
        classes = [self.records[i].classes for i in indices]
        return plan_geometry(rng, list(images), list(boxes), classes, self.img_size, cfg)


class EvalDataset(Dataset):
    """Samples on their canvases (`shapes`) with the metas to undo the placement: letterboxed (each image at long
    side `img_size`) or, with `resize` "stretch", resized to fill the canvas (ratio (x, y), no border)."""

    def __init__(self, source: DatasetSource, shapes: np.ndarray, img_size: int, image_cache=None,
                 resize: str = "letterbox"):
        self.source = source
        self.resize = check_resize_mode(resize, "resize")
        self.image_cache = image_cache  # decode_resized's outputs, or None
        self.records = source.records
        self.shapes = shapes  # [N, 2] (h, w) per image
        self.img_size = int(img_size)
        self.unreadable = UnreadableImages()

    def __len__(self) -> int:
        return len(self.records)

    def decode_resized(self, index: int) -> tuple[np.ndarray, float]:
        """Image `index` at its scale in its canvas, and that scale (what the image cache holds; stretched: the
        canvas-sized image, and NaN, as its two ratios follow from the sizes)."""
        image = load_image(self.records[index].path)
        if self.resize == "stretch":
            return stretch(image, self.canvas(index))[0], float("nan")
        return letterbox_resize(image, self.canvas(index), self.img_size)

    def canvas(self, index: int) -> tuple[int, int]:
        return int(self.shapes[index][0]), int(self.shapes[index][1])

    def __getitem__(self, index: int):
        rec = self.records[index]
        out_h, out_w = self.canvas(index)
        cached = self.image_cache.get(index) if self.image_cache is not None else None
        try:
            resized, ratio = cached if cached is not None else self.decode_resized(index)
        except OSError as e:  # still evaluated once (as an image with nothing found), so no image is lost
            self.unreadable.report(rec.path, e, "it is evaluated as a blank image")
            resized, ratio = np.full((out_h, out_w, 3), PAD_VALUE, np.uint8), float("nan")
            if self.resize != "stretch":
                resized, ratio = letterbox_resize(np.full((rec.height, rec.width, 3), PAD_VALUE, np.uint8),
                                                  (out_h, out_w), self.img_size)
        if self.resize == "stretch":
            out, ratio, (left, top) = resized, stretch_ratio(rec.width, rec.height, (out_h, out_w)), (0, 0)
            boxes = rec.boxes.astype(np.float64) * np.array([ratio[0], ratio[1], ratio[0], ratio[1]])
        else:
            out, ratio, (left, top) = letterbox_place(resized, ratio, (out_h, out_w))
            boxes = rec.boxes.astype(np.float64) * ratio + np.array([left, top, left, top])
        labels = np.concatenate([rec.classes[:, None].astype(np.float32),
                                 xyxy_to_normalised_cxcywh(boxes, out_w, out_h)], 1)
        meta = {"image_id": rec.image_id, "orig_size": (rec.height, rec.width), "ratio": ratio,
                "pad": (left, top), "path": rec.path}
        return to_chw_rgb(out), torch.from_numpy(labels), meta


def _stack_targets(labels: list[torch.Tensor]) -> torch.Tensor:
    rows = [torch.cat([torch.full((len(lb), 1), float(i)), lb], 1) for i, lb in enumerate(labels)]
    return torch.cat(rows, 0) if rows else torch.zeros((0, 6))


def _stack_images(images) -> torch.Tensor:
    """uint8 [B, 3, H, W]; in a loader worker default_collate builds it straight in shared memory, which
    saves copying every batch once more on its way to the training process."""
    return default_collate(list(images))


def collate_train(batch):
    images, labels, paths = zip(*batch)
    return _stack_images(images), _stack_targets(list(labels)), list(paths)


def collate_train_device(batch):
    """Training batches whose pixels are painted on the device: (DeviceBatch, targets, paths)."""
    samples, labels, paths = zip(*batch)
    return collate_device(list(samples)), _stack_targets(list(labels)), list(paths)


def collate_eval(batch):
    images, labels, metas = zip(*batch)
    return _stack_images(images), _stack_targets(list(labels)), list(metas)


def worker_init(worker_id: int) -> None:
    """Loader workers: no OpenCV thread pools (the workers are the parallelism), and SIGTERM and Ctrl-C left to
    the training process: torchrun, schedulers and the terminal signal the whole process group, and a worker that
    died on it would break the batch the trainer needs to finish its step and save. Workers still exit with their
    parent."""
    cv2.setNumThreads(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
