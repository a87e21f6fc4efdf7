"""Repeat-factor sampling: LVIS factors, one epoch list for every rank, fixed epoch length, exact resume, and
repeated copies augmented apart."""

import numpy as np
import pytest
import torch

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.loader import build_train_loader
from detect.data.records.record_table import RecordTable
from detect.data.records.records import ImageRecord
from detect.data.sampling.repeat_sampling import (
    RepeatFactors,
    RepeatFactorSampler,
    occurrences,
    stochastic_round,
)


def _records(class_lists):
    return [ImageRecord(f"{i}.jpg", 100, 100, np.tile(np.float32([[10, 10, 50, 50]]), (len(c), 1)),
                        np.asarray(c, dtype=np.int64), i) for i, c in enumerate(class_lists)]


# 10 images, 3 classes: class 0 in every image, class 1 in 4 of them (twice in one), class 2 in one, one image empty
CLASSES = [[0], [0, 1], [0, 1, 1], [0, 1], [0, 1], [0], [0, 2], [0], [0], []]


@pytest.mark.parametrize("table", [False, True])
def test_factors_follow_lvis_from_images_holding_each_class(table):
    records = _records(CLASSES)
    f = RepeatFactors.of(RecordTable.from_records(records) if table else records, 4, 0.3)
    assert f.fraction.tolist() == pytest.approx([0.9, 0.4, 0.1, 0.0])  # a class counted once per image
    assert f.per_class.tolist() == pytest.approx([1.0, 1.0, np.sqrt(3.0), 1.0])  # class 3 holds no image: 1
    want = np.ones(10)
    want[6] = np.sqrt(3.0)  # the image with class 2 takes its rarest class's factor
    assert f.image.tolist() == pytest.approx(want.tolist())
    f = RepeatFactors.of(records, 4, 0.64)
    assert f.image[[0, 1, 6, 9]].tolist() == pytest.approx([1.0, np.sqrt(0.64 / 0.4), np.sqrt(6.4), 1.0])
    summary = f.summary(["a", "b", "c", "d"])
    assert "10 images -> ~13 per epoch" in summary and "2 classes below t=0.64" in summary
    assert summary.index("c 2.53") < summary.index("b 1.26")  # largest first
    with pytest.raises(ValueError, match="positive"):
        RepeatFactors.of(records, 4, 0.0)


@pytest.mark.parametrize("values", [[1.0, 1.25, 2.5, 1.75, 3.1, 1.0, 1.4], [1.0] * 30 + [1.5, 2.2, 3.7]])
def test_stochastic_rounding_keeps_the_total_and_each_share(values):
    values = np.array(values)
    rng = np.random.default_rng(0)
    draws = np.stack([stochastic_round(values, rng) for _ in range(4000)])
    assert (draws >= np.floor(values)).all() and (draws <= np.ceil(values)).all()
    fraction = values - np.floor(values)
    extras = np.floor(fraction.sum())  # 2.0 of 2.0 and 1 of 1.4
    assert set(draws.sum(1).tolist()) == {np.floor(values).sum() + extras}  # one total, every epoch
    assert draws.mean(0) == pytest.approx(np.floor(values) + fraction * extras / fraction.sum(), abs=0.03)


def test_occurrences_number_the_copies_in_order():
    assert occurrences(np.array([3, 1, 3, 3, 0, 1])).tolist() == [0, 0, 1, 2, 0, 1]


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_rank_takes_its_shard_of_one_epoch_list(world_size):
    factors = np.array([1.0] * 20 + [3.0, 2.5, 4.0])
    samplers = [RepeatFactorSampler(factors, r, world_size, seed=7) for r in range(world_size)]
    lengths = set()
    for epoch in range(4):
        for s in samplers:
            s.set_epoch(epoch)
        shards = [list(s) for s in samplers]
        assert len({len(p) for p in shards}) == 1 and len(shards[0]) == len(samplers[0])
        indices, draws = samplers[0].epoch_list(epoch)
        for r, part in enumerate(shards):  # rank r: positions r, r + W, ... of the one list
            assert part == list(zip(indices[r::world_size].tolist(), draws[r::world_size].tolist()))
        lengths.add(samplers[0].epoch_length)
        first = indices[:samplers[0].epoch_length]
        assert set(range(20)) <= set(first.tolist())  # factor-1 images keep their one copy
        assert np.bincount(first, minlength=23).tolist() == [1] * 20 + [3, 2, 4]  # 2.5 rounds to 2: L fixes it
    assert lengths == {20 + 3 + 2 + 4}  # floor parts 29 + floor(0.5) = 29, every epoch
    a, b = (RepeatFactorSampler(factors, 0, 1, seed=7) for _ in range(2))
    a.set_epoch(1), b.set_epoch(2)
    assert list(a) != list(b)


def test_rare_images_come_that_many_times_on_average():
    factors = np.array([1.0] * 30 + [1.5, 2.2, 3.7])
    sampler = RepeatFactorSampler(factors, 0, 1, seed=0)
    counts = np.zeros(len(factors))
    for epoch in range(600):
        indices, _ = sampler.epoch_list(epoch)
        counts += np.bincount(indices[:sampler.epoch_length], minlength=len(factors))
    assert (counts / 600)[30:].tolist() == pytest.approx([1 + 0.5 / 1.4, 2 + 0.2 / 1.4, 3 + 0.7 / 1.4], abs=0.06)
    assert (counts / 600)[:30].tolist() == pytest.approx([1.0] * 30, abs=0.02)


def test_sampler_refuses_bad_input():
    with pytest.raises(ValueError, match=">= 1"):
        RepeatFactorSampler(np.array([1.0, 0.5]), 0, 1)
    with pytest.raises(ValueError, match="rank 2"):
        RepeatFactorSampler(np.ones(4), 2, 2)


def _keys(loader, epoch, start=0):
    loader.keys.start_at(epoch, start)
    return [b for b, _ in zip(iter(loader.keys), range(len(loader) - start))]


def test_train_loader_repeats_rare_images_resumes_exactly_and_augments_copies_apart(small_synthetic):
    spec, cache_dir = small_synthetic
    args = (spec, 64, 4, AugmentConfig(mosaic=0.0), 0, 32)
    plain = build_train_loader(*args, 0, 1, seed=0, cache_dir=cache_dir)
    loader = build_train_loader(*args, 0, 1, seed=0, cache_dir=cache_dir, repeat_thresh=1.0)
    assert len(loader) > len(plain)  # every class is in fewer than all images: the epoch grows
    full = _keys(loader, 2)
    assert _keys(loader, 2, 3) == full[3:]  # a resumed epoch continues with the same keys
    flat = [key for batch in full for key in batch]
    repeats = [key for key in flat if len(key) == 4]
    assert repeats and all(key[3] >= 1 for key in repeats)
    # a second copy of an image is augmented on its own stream; its first copy as without repeats
    dataset = loader.dataset
    epoch, index, members, draw = repeats[0]
    first, _, _ = dataset[(epoch, index, members)]
    again, _, _ = dataset[(epoch, index, members)]
    other, _, _ = dataset[(epoch, index, members, draw)]
    assert torch.equal(first, again) and not torch.equal(first, other)
    ranks = [build_train_loader(*args, r, 2, seed=0, cache_dir=cache_dir, repeat_thresh=1.0) for r in range(2)]
    shards = [[key[1] for batch in _keys(r, 2) for key in batch] for r in ranks]
    assert sorted(shards[0] + shards[1]) == sorted(key[1] for key in flat[:len(shards[0]) * 2])
