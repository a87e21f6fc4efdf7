"""A loaded model file evaluated on a split, the way detect.val and the int8 check of detect.export run it.

Two feeds, both data loaders (`--workers` decode, `--cache` keeps the decoded images):
- the eval loader (detect.data.loader.build_eval_loader): letterboxed rect or square canvases, batched by
  shape; its batches take the Predictor's forward pass and postprocess (NMS), the evaluator scores them
  (`evaluate_batches`);
- whole images (`WholeImages`): each image at its own size for the Predictor to prepare, where the eval
  loader's canvases are not the ones the Predictor makes: --slice (tiles cut from the full image) and an export
  fixed at a non-square size (every image fitted into it). Whole batches of images are dealt to the ranks, so
  an image meets the same neighbours whatever the world size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from torch.utils.data import DataLoader, Dataset

from detect.data.augmentation.augment import PAD_VALUE
from detect.data.datasets import UnreadableImages
from detect.data.loader import attach_image_cache, build_eval_loader, close_loader, loader_kwargs
from detect.data.records.images import load_image
from detect.evaluation.evaluator import (
    CocoEvaluator,
    EvalResult,
    evaluate_batches,
    evaluate_images,
)
from detect.inference.handle import ModelHandle
from detect.inference.predictor import Predictor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Feed:
    """How the split's images reach the model: the loader's settings and this process's place in the group."""

    split: str = "val"
    batch: int = 32
    workers: int = 0
    rank: int = 0
    world_size: int = 1
    cache_dir: Path | None = None
    cache: str | None = None  # "ram" | "disk": decoded images kept (detect.data.records.image_cache)


def uses_the_eval_loader(handle: ModelHandle, slice_size: int | None) -> bool:
    """Whether the eval loader's canvases (rect, or square at img_size) are the ones the Predictor would make."""
    shape = handle.input_shape
    return slice_size is None and (shape is None or shape[0] == shape[1])


def rank_steps(records: list, per_step: int, rank: int, world_size: int) -> list[list[int]]:
    """This rank's steps (record indices, `per_step` a step) of whole batches dealt round-robin."""
    steps = [list(range(i, min(i + per_step, len(records)))) for i in range(0, len(records), per_step)]
    return steps[rank::world_size]


def evaluate_model(handle: ModelHandle, predictor: Predictor, source, evaluator: CocoEvaluator,
                   feed: Feed) -> EvalResult:
    """The metrics of `predictor` (built on `handle`) on `source`, fed as the module docstring says (collective:
    every rank calls it, with its own `feed.rank`). Loader workers are stopped whatever ends the run."""
    slicing = predictor.settings.slice_size is not None
    if uses_the_eval_loader(handle, predictor.settings.slice_size):
        loader = build_eval_loader(source, feed.split, handle.img_size, feed.batch, feed.workers, handle.max_stride,
                                   feed.rank, feed.world_size, rect=not handle.square, cache_dir=feed.cache_dir,
                                   cache=feed.cache, resize=handle.resize,
                                   # a fixed-size export takes its own (square) shape, whatever the cfg's was
                                   net_shape=handle.net_shape if handle.input_shape is None else None)
        run = evaluate_batches
    else:
        steps = rank_steps(source.records, 1 if slicing else feed.batch, feed.rank, feed.world_size)
        loader = whole_image_loader(source, steps, feed)
        run = evaluate_images
    try:
        return run(predictor, loader, evaluator)
    finally:
        close_loader(loader)


class WholeImages(Dataset):
    """Steps of a split's images at their own size: item i is [(image id, BGR image), ...] of `steps[i]`. An
    image that cannot be read is evaluated as a blank one (as the eval loader does), with one warning."""

    def __init__(self, records: list, steps: list[list[int]]):
        self.records, self.steps = records, steps
        self.image_cache = None
        self.unreadable = UnreadableImages()

    def __len__(self) -> int:
        return len(self.steps)

    def decode_resized(self, index: int):
        """Image `index` as the image cache keeps it: at its own size (scale 1)."""
        return load_image(self.records[index].path), 1.0

    def image(self, index: int):
        cached = self.image_cache.get(index) if self.image_cache is not None else None
        if cached is not None:
            return cached[0]
        record = self.records[index]
        try:
            return load_image(record.path)
        except OSError as e:
            self.unreadable.report(record.path, e, "it is evaluated as a blank image")
            return np.full((record.height, record.width, 3), PAD_VALUE, np.uint8)

    def __getitem__(self, step: int):
        return [(self.records[i].image_id, self.image(i)) for i in self.steps[step]]


def _as_is(step):
    return step


def whole_image_loader(source, steps: list[list[int]], feed: Feed) -> DataLoader:
    """A loader of `WholeImages` (one step an item), its images decoded on `feed.workers` processes; with
    `feed.cache`, kept at full size in the image cache (the room it needs estimated at the largest image)."""
    dataset = WholeImages(source.records, steps)
    if feed.cache:
        largest = max((max(r.width, r.height) for r in source.records), default=1)
        dataset.image_cache = attach_image_cache(source, dataset, largest, "whole", feed.cache, feed.cache_dir)
    # the eval loader's worker options (data.loader): OpenCV's threads off before the fork, workers kept for
    # close_loader; one step an item, passed on as it is
    return DataLoader(dataset, batch_size=None, collate_fn=_as_is, **loader_kwargs(feed.workers))
