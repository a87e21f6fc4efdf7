"""Sampling under DDP.

Training: `BatchSampler(DistributedSampler(...), batch_size, drop_last=True)`: one shared shuffle seed, a new
order each epoch through `set_epoch`, every index once per epoch across ranks (DistributedSampler repeats a
few to even out the shards when the size is not divisible by the world size). With repeat-factor sampling
(detect.data.sampling.repeat_sampling) the epoch's list repeats the images of rare classes; it is
sharded the same way.

Evaluation: batches are formed over the whole split (rect: images of the same canvas together) before
any sharding, and whole batches are dealt to ranks round-robin. Every image lands on exactly one rank, a
rank may get no batch at all, and an image's letterbox shape never depends on the world size.
"""

from __future__ import annotations

import numpy as np
from torch.utils.data import BatchSampler, DistributedSampler, Sampler

from detect.data.augmentation.geometry import rect_shape, round_up
from detect.data.sampling.repeat_sampling import RepeatFactorSampler


def train_batch_sampler(dataset, batch_size: int, rank: int, world_size: int, seed: int,
                        repeat_factors: np.ndarray | None = None) -> tuple[BatchSampler, Sampler]:
    """Whole batches of this rank's shard; `repeat_factors` (one per image) switch to repeat-factor sampling."""
    if repeat_factors is None:
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed,
                                     drop_last=False)
    else:
        sampler = RepeatFactorSampler(repeat_factors, rank, world_size, seed)
    return BatchSampler(sampler, batch_size, drop_last=True), sampler


def _sample_key(epoch: int, item, members: tuple) -> tuple:
    """The dataset key of one sampled item: an index, or (index, draw) from RepeatFactorSampler. Draw 0 keeps the
    3-tuple, so the first copy of an image is augmented as without repeats; later copies get draws of their own."""
    if isinstance(item, tuple):
        index, draw = item
        return (epoch, index, members) if draw == 0 else (epoch, index, members, draw)
    return epoch, item, members


class EpochKeyedBatchSampler(Sampler):
    """The training batches as (epoch, index, batch) keys, epoch after epoch without a break.

    The dataset seeds each sample's augmentation from (seed, epoch, index), so a sample is augmented the same
    whichever worker or rank draws it and whether or not the run was resumed: exact resume with any number of
    loader workers, no generator state to save. Mosaic partners come from the sample's own batch, which the
    worker decodes anyway, so a sample costs one image decode, not four, on datasets larger than the buffer.

    Iteration starts at batch `start_batch` of `start_epoch`, calls the DistributedSampler's `set_epoch` at
    every epoch, takes the first `batches_per_epoch` batches of each and ends after `end_epoch` (never when
    None). One uninterrupted stream keeps the loader workers busy across epoch boundaries: a loader restarted
    every epoch drains its queue and leaves workers idle while the last batches of an epoch are assembled.
    """

    def __init__(self, batch_sampler: BatchSampler, sampler: DistributedSampler | RepeatFactorSampler,
                 batches_per_epoch: int | None = None, end_epoch: int | None = None):
        self.batch_sampler = batch_sampler
        self.sampler = sampler
        full = len(batch_sampler)
        self.batches_per_epoch = full if batches_per_epoch is None else max(0, min(int(batches_per_epoch), full))
        self.end_epoch = end_epoch
        self.start_epoch, self.start_batch = 0, 0

    def start_at(self, epoch: int, batch: int = 0) -> None:
        self.start_epoch, self.start_batch = int(epoch), int(batch)

    def __iter__(self):
        epoch, skip = self.start_epoch, self.start_batch
        while self.end_epoch is None or epoch < self.end_epoch:
            self.sampler.set_epoch(epoch)
            for k, batch in enumerate(self.batch_sampler):
                if k >= self.batches_per_epoch:
                    break
                if k >= skip:
                    members = tuple(item[0] if isinstance(item, tuple) else item for item in batch)
                    yield [_sample_key(epoch, item, members) for item in batch]
            epoch, skip = epoch + 1, 0

    def __len__(self) -> int:
        """Batches per epoch (the stream itself runs on)."""
        return self.batches_per_epoch


def eval_batches(sizes: np.ndarray, batch_size: int, img_size: int, stride: int,
                 rect: bool) -> tuple[list[list[int]], np.ndarray]:
    """Batches of indices over the whole split and the (h, w) input shape of every image.

    `sizes` is [N, 2] (width, height). rect: every image gets its own canvas (`rect_shape`), and batches are
    formed among images of the same canvas (in order of aspect ratio h/w), so an image's input never depends on
    its neighbours: metrics are the same for any batch size and world size. Not rect: every image at a square
    img_size (rounded up to the stride).
    """
    sizes = np.asarray(sizes, dtype=np.float64).reshape(-1, 2)
    n = len(sizes)
    if not rect:
        square = round_up(img_size, stride)
        batches = [list(range(i, min(i + batch_size, n))) for i in range(0, n, batch_size)]
        return batches, np.full((n, 2), square, dtype=np.int64)
    shapes = np.array([rect_shape(w, h, img_size, stride) for w, h in sizes], dtype=np.int64).reshape(n, 2)
    order = np.argsort(sizes[:, 1] / sizes[:, 0], kind="stable")
    groups: dict[tuple[int, int], list[int]] = {}
    for i in order.tolist():
        groups.setdefault(tuple(shapes[i]), []).append(i)
    batches = [members[s:s + batch_size] for members in groups.values() for s in range(0, len(members), batch_size)]
    return batches, shapes


class ShardedBatchSampler(Sampler):
    """Whole batches dealt round-robin: rank r gets batches r, r + W, r + 2W, ... (possibly none)."""

    def __init__(self, batches: list[list[int]], rank: int, world_size: int):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.batches = batches[rank::world_size]

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)
