"""The builders the training loop and the evaluator call.

    loader = build_train_loader(spec, img_size, batch_size, augment, workers, stride, rank, world_size, seed)
    for epoch in ...: for images, targets, paths in loader.epoch(epoch): ...   # set_epoch is called for you
    loader.close()
    source = open_split(spec, "val")    # once; the evaluator gets the same source
    loader = build_eval_loader(source, "val", img_size, batch_size, workers, stride, rank, world_size)
    for images, targets, metas in loader: ...

Batches hold uint8 images on the host (pinned when CUDA is present); `detect.ops.preprocess.to_model_input` puts
them on the device as the model's input.
"""

from __future__ import annotations

import hashlib
import logging
import weakref
from pathlib import Path

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.augmentation.resize_modes import network_canvas
from detect.data.datasets import (
    EvalDataset,
    TrainDataset,
    collate_eval,
    collate_train,
    collate_train_device,
    worker_init,
)
from detect.data.formats.sources import DatasetSource, open_source
from detect.data.formats.spec import DataSpec, default_cache_dir, load_data_spec
from detect.data.formats.synthetic import SyntheticConfig, ensure_synthetic
from detect.data.sampling.repeat_sampling import RepeatFactors
from detect.data.sampling.samplers import (
    EpochKeyedBatchSampler,
    ShardedBatchSampler,
    eval_batches,
    train_batch_sampler,
)

log = logging.getLogger(__name__)

# Batches each worker keeps in flight. Every worker builds whole batches, so with a GPU's many workers two are
# plenty, and more only holds shared memory (workers x factor x batch bytes: 2 GB at 15 x 4 x 64 x 416^2 x 3).
PREFETCH_FACTOR = 2


def resolve_spec(spec: DataSpec | str | Path, cache_dir: Path | None = None) -> DataSpec:
    """A spec with files on disk: a path is loaded; a synthetic spec is generated (rank 0 first) as COCO."""
    if not isinstance(spec, DataSpec):
        spec = load_data_spec(spec)
    if spec.format != "synthetic":
        return spec
    cfg = SyntheticConfig.from_options(spec.options)
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = ensure_synthetic(cfg, spec.path or cache_dir / cfg.folder_name())
    test = {"test": folder / "images" / "test",
            "test_annotations": folder / "annotations" / "instances_test.json"} if cfg.test_images else {}
    return DataSpec(path=folder, format="coco", train=folder / "images" / "train", val=folder / "images" / "val",
                    train_annotations=folder / "annotations" / "instances_train.json",
                    val_annotations=folder / "annotations" / "instances_val.json", **test,
                    names=None, source_file=spec.source_file, options=spec.options, selection=spec.selection)


def open_split(spec: DataSpec | DatasetSource | str | Path, split: str,
               cache_dir: Path | None = None) -> DatasetSource:
    """The validated records of one split (synthetic data generated and label cache built as needed).
    An already opened split is returned as it is, so a caller that opened it once need not read it again."""
    if isinstance(spec, DatasetSource):
        return spec
    return open_source(resolve_spec(spec, cache_dir), split, cache_dir)


def loader_kwargs(workers: int) -> dict:
    if workers > 0:
        # Workers are forked from this process: an OpenCV thread pool inherited across fork aborts them at
        # exit ("terminate called without an active exception"); the workers are the parallelism anyway.
        cv2.setNumThreads(0)
    return {"num_workers": workers, "pin_memory": torch.cuda.is_available(), "worker_init_fn": worker_init,
            "persistent_workers": workers > 0, "prefetch_factor": PREFETCH_FACTOR if workers > 0 else None}


def close_loader(loader) -> None:
    """Stop the loader's worker processes now, whatever ends the run. The eval loaders keep their workers between
    passes (persistent_workers) and they ignore SIGTERM (datasets.worker_init): after an error the
    traceback still held them, and multiprocessing's exit handler, which terminates and then joins them, waited
    forever. DataLoader has no public close; its persistent iterator's `_shutdown_workers` is what `del` runs."""
    iterator = getattr(loader, "_iterator", None)
    if iterator is not None and hasattr(iterator, "_shutdown_workers"):
        iterator._shutdown_workers()
        loader._iterator = None


class TrainLoader:
    """One process's training batches as an uninterrupted stream over epochs.

    `epoch(e, start)` yields batches start.. of epoch e (`len(self)` per epoch). When the previous call ran its
    epoch to the end and e follows it, the same DataLoader iterator goes on, so the workers never stop: they
    assemble the first batches of epoch e + 1 while the trainer finishes epoch e (and evaluates). Anything else
    (a first call, a resume in the middle of an epoch, an epoch left early) starts the stream afresh at (e, start).
    `close()` stops the workers (also done at interpreter exit).
    """

    def __init__(self, dataset: TrainDataset, keys: EpochKeyedBatchSampler, workers: int):
        self.dataset = dataset
        self.keys = keys  # the key stream; it calls the DistributedSampler's set_epoch
        # not persistent: the stream itself keeps its workers, and close() must really stop them
        kwargs = {**loader_kwargs(workers), "persistent_workers": False}
        collate = collate_train_device if dataset.on_device else collate_train
        self._loader = DataLoader(dataset, batch_sampler=keys, collate_fn=collate, **kwargs)
        self._stream: list = []  # [iterator] while one runs; a list so the exit hook can empty it
        self._next: tuple[int, int] | None = None  # (epoch, batch) the running iterator yields next
        # a loader iterator still alive at interpreter shutdown can hang the exit: stop its workers first
        weakref.finalize(self, self._stream.clear)

    def __len__(self) -> int:
        return len(self.keys)

    def epoch(self, epoch: int, start: int = 0):
        n = len(self)
        end = self.keys.end_epoch
        if (end is not None and epoch >= end) or not 0 <= start <= n:
            raise ValueError(f"epoch {epoch}, batch {start} is outside this loader's stream "
                             f"({end if end is not None else 'unlimited'} epochs of {n} batches)")
        if not self._stream or self._next != (epoch, start):
            self.close()
            self.keys.start_at(epoch, start)
            self._stream.append(iter(self._loader))
        self._next = None  # until this epoch is run to its end
        stream = self._stream[0]
        for _ in range(start, n):
            yield next(stream)
        self._next = (epoch + 1, 0)

    def close(self) -> None:
        self._stream.clear()
        self._next = None


def attach_image_cache(source, dataset, img_size: int, kind: str, mode: str, cache_dir):
    """The split's image cache (collective), built from the dataset's own decode_resized; None where `mode`
    resolves to no cache (off, or auto on a split too large for memory)."""
    from detect.data.records.image_cache import open_image_cache, resolve_mode

    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    label = f"{Path(str(source.spec.path or 'data')).name}-{source.split}"
    mode = resolve_mode(mode, source.records, img_size, label)
    if mode is None:
        return None
    return open_image_cache(source.records, dataset.decode_resized, img_size, kind, mode, folder, label)


def build_train_loader(spec, img_size: int, batch_size: int, augment: AugmentConfig | None, workers: int,
                       stride: int,
                       rank: int, world_size: int, seed: int, cache_dir=None, split: str = "train",
                       buffer_images: int | None = None, max_batches: int | None = None,
                       epochs: int | None = None, cache: str | None = None,
                       repeat_thresh: float | None = None, on_device: bool = False,
                       resize: str = "letterbox") -> TrainLoader:
    """Per-process batches of `batch_size` at img_size x img_size (`TrainLoader`).

    The shuffle uses `seed` on every rank; each sample's augmentation is seeded by (seed, epoch, index), so it
    does not depend on the worker, the rank or a resume.
    Each worker keeps the `buffer_images` most recently decoded images (default min(8 * batch_size, 512)) for
    mosaic partners.
    `max_batches` caps the batches per epoch; `epochs` ends the stream after that many (workers do not assemble
    batches of an epoch that will never run). `cache` ("ram" | "disk"): decoded images kept between epochs
    (detect.data.records.image_cache); the samples are the same bit for bit. `repeat_thresh` (t): repeat-factor
    sampling (detect.data.sampling.repeat_sampling), images of classes in fewer than a fraction t of the images
    appear more often in an epoch; None: every image once per epoch. `on_device`: batches are
    detect.data.augmentation.device_augment.DeviceBatch (workers plan the samples and send their source pixels; the trainer
    paints them on its device with detect.data.augmentation.device_paint); the boxes are the same.
    """
    if img_size % stride:
        raise ValueError(f"image size {img_size} must be a multiple of the model's stride {stride}")
    source = open_split(spec, split, cache_dir)
    if buffer_images is None:
        buffer_images = min(8 * batch_size, 512)
    dataset = TrainDataset(source, img_size, augment or AugmentConfig(), seed=seed, buffer_images=buffer_images,
                           epochs=epochs, resize=resize)
    dataset.on_device = on_device
    if cache:
        kind = "train" if resize == "letterbox" else f"train-{resize}"
        dataset.image_cache = attach_image_cache(source, dataset, img_size, kind, cache, cache_dir)
        if dataset.image_cache is not None:
            dataset.buffer_images = 0  # every image is a memory read away: no per-worker copies
    per_rank = -(-len(dataset) // world_size)
    if per_rank < batch_size:
        raise ValueError(f"{split} split has {len(dataset)} usable images: {per_rank} per rank with "
                         f"{world_size} process(es), fewer than the batch size {batch_size}; lower the batch size")
    factors = None
    if repeat_thresh is not None:
        factors = RepeatFactors.of(source.records, source.num_classes, repeat_thresh)
        log.info(factors.summary(source.names))
    batch_sampler, sampler = train_batch_sampler(dataset, batch_size, rank, world_size, seed,
                                                 None if factors is None else factors.image)
    keys = EpochKeyedBatchSampler(batch_sampler, sampler, max_batches, epochs)
    log.info(f"train loader: {len(dataset)} images, {len(keys)} batches of {batch_size} per rank, "
             f"{workers} worker(s), augmented on {'the device' if on_device else 'the host'}")
    return TrainLoader(dataset, keys, workers)


def build_eval_loader(spec, split: str, img_size: int, batch_size: int, workers: int, stride: int, rank: int,
                      world_size: int, rect: bool = True, cache_dir=None, cache: str | None = None,
                      resize: str = "letterbox", net_shape: tuple[int, int] | None = None) -> DataLoader:
    """Batches of this rank's share, letterboxed (or stretched onto the network's shape: square, or a
    Darknet-trained non-square `net_shape`, detect.data.augmentation.resize_modes.network_canvas, into which a letterbox fits
    the image too): whole batches dealt round-robin over the whole split."""
    source = open_split(spec, split, cache_dir)
    sizes = [(r.width, r.height) for r in source.records]
    own_shape = resize == "stretch" or net_shape is not None  # every image on the network's shape
    batches, shapes = eval_batches(sizes, batch_size, img_size, stride, rect and not own_shape)
    if own_shape:
        shapes[:] = network_canvas(img_size, stride, net_shape)
    dataset = EvalDataset(source, shapes, img_size, resize=resize)
    if cache:  # the canvases (and the resize mode) are part of what is cached: the key carries them
        kind = "eval-" + hashlib.sha1(np.ascontiguousarray(shapes, dtype=np.int64).tobytes()).hexdigest()[:8]
        kind += "" if resize == "letterbox" else f"-{resize}"
        dataset.image_cache = attach_image_cache(source, dataset, img_size, kind, cache, cache_dir)
    return DataLoader(dataset, batch_sampler=ShardedBatchSampler(batches, rank, world_size),
                      collate_fn=collate_eval, **loader_kwargs(workers))
