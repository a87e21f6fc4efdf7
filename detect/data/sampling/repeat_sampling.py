"""Repeat-factor sampling (LVIS, Gupta et al. 2019) for datasets whose classes are imbalanced.

Each image gets a factor r >= 1 from the rarest class it holds; an epoch holds about r copies of it. The
epoch's list depends on (seed, epoch) only, so every rank builds the same one and takes its own shard of it,
as DistributedSampler does: one permutation for all ranks, exact resume by (epoch, batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from torch.utils.data import Sampler

# The stream of the repeat-factor draws, apart from the dataset's per-sample streams ([seed, epoch, index]).
_REPEAT_STREAM = 0x5EED


def box_images_and_classes(records) -> tuple[np.ndarray, np.ndarray]:
    """(image index, class) of every box of `records`: a RecordTable's arrays as they are, else record by record."""
    if hasattr(records, "box_offsets"):
        counts = np.diff(np.asarray(records.box_offsets))
        return np.repeat(np.arange(len(records)), counts), np.asarray(records.classes, dtype=np.int64)
    classes = [np.asarray(r.classes, dtype=np.int64).reshape(-1) for r in records]
    images = [np.full(len(c), i, dtype=np.int64) for i, c in enumerate(classes)]
    return (np.concatenate(images) if images else np.zeros(0, np.int64),
            np.concatenate(classes) if classes else np.zeros(0, np.int64))


@dataclass(frozen=True)
class RepeatFactors:
    """LVIS repeat-factor sampling (Gupta et al. 2019): f_c = the fraction of images holding class c,
    r_c = max(1, sqrt(t / f_c)), and an image's factor is the largest r_c of its classes (1 without boxes)."""

    image: np.ndarray  # float64 [N]
    per_class: np.ndarray  # float64 [K]; 1 for classes no image holds
    fraction: np.ndarray  # float64 [K]: f_c
    threshold: float

    @classmethod
    def of(cls, records, num_classes: int, threshold: float) -> RepeatFactors:
        if not threshold > 0:
            raise ValueError(f"repeat-factor threshold must be positive, got {threshold}")
        n = len(records)
        images, classes = box_images_and_classes(records)
        pairs = np.unique(images * num_classes + classes)  # each class counted once per image
        holding = np.bincount(pairs % num_classes, minlength=num_classes).astype(np.float64)
        fraction = holding / max(n, 1)
        per_class = np.ones(num_classes)
        present = fraction > 0
        per_class[present] = np.maximum(1.0, np.sqrt(threshold / fraction[present]))
        image = np.ones(n)
        np.maximum.at(image, pairs // num_classes, per_class[pairs % num_classes])
        return cls(image, per_class, fraction, float(threshold))

    def summary(self, names=None) -> str:
        """e.g. "repeat-factor sampling: 80 images -> ~131 per epoch, 12 classes below t=0.1 (largest factor
        3.16: toaster, ...)"."""
        rare = np.flatnonzero((self.fraction > 0) & (self.fraction < self.threshold))
        text = (f"repeat-factor sampling: {len(self.image)} images -> ~{self.image.sum():.0f} per epoch, "
                f"{len(rare)} class{'es' if len(rare) != 1 else ''} below t={self.threshold:g}")
        if len(rare):
            top = rare[np.argsort(-self.per_class[rare], kind="stable")][:3]
            label = [str(names[c]) if names is not None else str(c) for c in top]
            text += (" (largest factors: " + ", ".join(f"{lb} {self.per_class[c]:.2f}" for lb, c in zip(label, top))
                     + (", ..." if len(rare) > 3 else "") + ")")
        return text


def stochastic_round(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Whole parts plus exactly k = floor(sum of the fractional parts p) extra ones, image i getting one with
    probability p_i * k / sum(p) (its fraction, scaled down by at most one copy in all): systematic sampling over
    a random order, one uniform u, and image i gets its extra when an integer lies in (u + C_{i-1}, u + C_i]
    (C the running sum of the scaled fractions). A fixed total keeps the batches per epoch fixed; independent
    coins would move it by ~sqrt(N)/2."""
    whole = np.floor(values)
    fraction = values - whole
    extras = math.floor(float(fraction.sum()) + 1e-9)
    if extras == 0:
        return whole.astype(np.int64)
    order = rng.permutation(len(values))
    running = np.cumsum(fraction[order]) * (extras / fraction.sum())
    running[-1] = extras  # exactly `extras` crossings whatever the rounding of the sum
    crossings = np.floor(rng.random() + running)
    extra = np.empty(len(values), dtype=np.int64)
    extra[order] = np.diff(crossings, prepend=0.0).astype(np.int64)
    return whole.astype(np.int64) + extra


def occurrences(indices: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same index (0 for the first copy)."""
    order = np.argsort(indices, kind="stable")
    ranked = indices[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, len(ranked)]))
    out = np.empty(len(indices), dtype=np.int64)
    out[order] = np.arange(len(ranked)) - first
    return out


class RepeatFactorSampler(Sampler):
    """A DistributedSampler whose epoch repeats images by their factors (`RepeatFactors.image`).

    Epoch e's list depends on (seed, e) only, so every rank builds the same one: each image's factor is
    stochastically rounded (`stochastic_round`) to a fixed total L = sum(floor r) + floor(sum frac r) (the
    batches per epoch must not change between epochs; every image keeps at least floor(r) copies), the images are repeated that often and
    shuffled, padded from its start to a multiple of the world size as DistributedSampler
    pads, and rank r takes positions r, r + W, ... Items are (index, draw): draw k is the k-th copy of the
    image in the epoch, so repeated copies are augmented differently (the dataset seeds by it).
    """

    def __init__(self, factors: np.ndarray, rank: int, world_size: int, seed: int = 0):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in 0..{world_size - 1}")
        self.factors = np.asarray(factors, dtype=np.float64)
        if (self.factors < 1).any():
            raise ValueError("repeat factors must be >= 1")
        self.rank, self.world_size, self.seed, self.epoch = rank, world_size, int(seed), 0
        whole = np.floor(self.factors)
        self.epoch_length = int(whole.sum() + math.floor(float((self.factors - whole).sum()) + 1e-9))
        self.num_samples = -(-self.epoch_length // world_size)
        self.total_size = self.num_samples * world_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def epoch_list(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, draws), [total_size] each: the whole epoch across ranks, before sharding."""
        rng = np.random.default_rng([self.seed, int(epoch), _REPEAT_STREAM])
        counts = stochastic_round(self.factors, rng)
        indices = rng.permutation(np.repeat(np.arange(len(self.factors)), counts))
        indices = np.resize(indices, self.total_size)  # pads by repeating from the start
        return indices, occurrences(indices)

    def __iter__(self):
        indices, draws = self.epoch_list(self.epoch)
        shard = slice(self.rank, self.total_size, self.world_size)
        return iter(list(zip(indices[shard].tolist(), draws[shard].tolist())))

    def __len__(self) -> int:
        return self.num_samples
