from detect.data.augmentation.augment_config import AugmentConfig

"""Sampling under DDP: training indices once per epoch across ranks in a new order each epoch; every
evaluation image on exactly one rank with the same letterbox whatever the world size."""

import numpy as np
import pytest
import torch

from detect.data.loader import build_eval_loader, build_train_loader
from detect.data.sampling.samplers import ShardedBatchSampler, eval_batches, train_batch_sampler


def epoch_indices(n, batch_size, world_size, epoch, seed=0):
    per_rank = []
    for rank in range(world_size):
        batches, sampler = train_batch_sampler(range(n), batch_size, rank, world_size, seed)
        sampler.set_epoch(epoch)
        per_rank.append([i for b in batches for i in b])
    return per_rank


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_training_index_once_per_epoch_and_new_order_each_epoch(world_size):
    n, batch = 4 * 5 * world_size, 4  # divisible: no padding, no dropped batch
    orders = []
    for epoch in range(3):
        per_rank = epoch_indices(n, batch, world_size, epoch)
        flat = [i for r in per_rank for i in r]
        assert sorted(flat) == list(range(n))
        orders.append(flat)
    assert orders[0] != orders[1] != orders[2]
    assert epoch_indices(n, batch, world_size, 1) == epoch_indices(n, batch, world_size, 1)  # set_epoch decides


def test_training_shards_of_an_uneven_dataset_cover_it_and_only_pad():
    n, world = 23, 3  # 24 slots: DistributedSampler repeats one index, BatchSampler keeps whole batches
    per_rank = epoch_indices(n, 1, world, 0)
    flat = [i for r in per_rank for i in r]
    assert len(flat) == 24 and set(flat) == set(range(n))
    assert all(len(r) == 8 for r in per_rank)


@pytest.mark.parametrize("n", [1, 7, 17, 31])
@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("rect", [True, False])
def test_every_eval_image_exactly_once_with_world_independent_shapes(n, world_size, rect):
    rng = np.random.default_rng(n)
    sizes = np.stack([rng.integers(100, 700, n), rng.integers(100, 700, n)], 1)
    batches, shapes = eval_batches(sizes, 4, 320, 32, rect)
    seen = [i for r in range(world_size) for b in ShardedBatchSampler(batches, r, world_size) for i in b]
    assert sorted(seen) == list(range(n))
    assert (shapes % 32 == 0).all()
    for b in batches:  # one shape per batch
        assert len({tuple(shapes[i]) for i in b}) == 1
    if not rect:
        assert (shapes == 320).all()
        return
    # every image at long side 320 with at least half a stride of border on each axis, and less than 1.5 strides
    scale = 320 / sizes.max(1)
    border = shapes - np.stack([sizes[:, 1] * scale, sizes[:, 0] * scale], 1)
    assert (border >= 16).all() and (border < 48).all()


def test_rect_shapes_are_per_image_and_batch_size_does_not_change_them():
    rng = np.random.default_rng(0)
    sizes = np.stack([rng.integers(100, 700, 50), rng.integers(100, 700, 50)], 1)
    _, shapes_1 = eval_batches(sizes, 1, 416, 32, rect=True)
    for batch_size in (2, 7, 50):
        batches, shapes = eval_batches(sizes, batch_size, 416, 32, rect=True)
        assert (shapes == shapes_1).all()
        assert all(len(b) <= batch_size for b in batches)
        # batches fill up: only the last batch of each canvas may be short
        assert len(batches) == sum(-(-c // batch_size) for c in np.unique(shapes, axis=0, return_counts=True)[1])


def test_rect_shapes_are_tight():
    sizes = np.array([[640, 426], [640, 480], [480, 640], [500, 500]])
    batches, shapes = eval_batches(sizes, 1, 416, 32, rect=True)
    # 426 * 0.65 = 276.9 + 16 -> 320; 416 + 16 -> 448; 480 * 0.65 = 312 + 16 -> 352
    assert shapes.tolist() == [[320, 448], [352, 448], [448, 352], [448, 448]]


def _collect(loader):
    out = {}
    for images, targets, metas in loader:
        for k, meta in enumerate(metas):
            assert meta["image_id"] not in out
            out[meta["image_id"]] = (tuple(images[k].shape), meta["ratio"], meta["pad"],
                                     targets[targets[:, 0] == k, 1:].numpy().round(5).tolist())
    return out


def test_eval_loader_sharding_on_real_files(small_synthetic):
    spec, cache_dir = small_synthetic
    single = _collect(build_eval_loader(spec, "val", 96, 4, 0, 32, 0, 1, cache_dir=cache_dir))
    assert len(single) == 17
    for world in (2, 3):
        merged = {}
        for rank in range(world):
            part = _collect(build_eval_loader(spec, "val", 96, 4, 0, 32, rank, world, cache_dir=cache_dir))
            assert not set(part) & set(merged)
            merged.update(part)
        assert merged == single  # same images, same shapes, same letterbox and targets


def test_train_loader_batches(small_synthetic):
    spec, cache_dir = small_synthetic
    loader = build_train_loader(spec, 64, 5, AugmentConfig(), 0, 32, 0, 1, seed=0, cache_dir=cache_dir)
    batches = list(loader.epoch(0))
    assert len(batches) == 23 // 5
    images, targets, paths = batches[0]
    assert images.shape == (5, 3, 64, 64) and images.dtype.is_floating_point is False and len(paths) == 5
    assert targets.shape[1] == 6 and targets[:, 0].max() <= 4 and set(targets[:, 1].long().tolist()) <= {0, 1, 2, 3}
    assert (targets[:, 2:] >= 0).all() and (targets[:, 2:] <= 1).all()
    with pytest.raises(ValueError, match="batch size"):
        build_train_loader(spec, 64, 24, AugmentConfig(), 0, 32, 0, 1, seed=0, cache_dir=cache_dir)
    with pytest.raises(ValueError, match="multiple of the model's stride"):
        build_train_loader(spec, 70, 4, AugmentConfig(), 0, 32, 0, 1, seed=0, cache_dir=cache_dir)


def _epoch_keys(loader, epoch, start=0):
    """(epoch, index) keys of the batches start.. of `epoch`, straight from the key stream."""
    loader.keys.start_at(epoch, start)
    batches = [b for b, _ in zip(iter(loader.keys), range(len(loader) - start))]
    return [[key[:2] for key in batch] for batch in batches]


@pytest.mark.parametrize("workers", [0, 2])
def test_train_stream_runs_on_across_epochs_and_restarts_where_asked(small_synthetic, workers):
    """Consecutive epochs come from one running stream (same batches as fresh starts), a mid-epoch start
    gives the rest of that epoch, and an epoch left early is followed by a fresh start, all with the same
    per-sample content."""
    spec, cache_dir = small_synthetic
    loader = build_train_loader(spec, 64, 5, AugmentConfig(mosaic=1.0), workers, 32, 0, 1, seed=0, cache_dir=cache_dir)
    try:
        paths = [[p for _, _, ps in loader.epoch(e) for p in ps] for e in range(3)]
        assert all(len(p) == 20 for p in paths) and paths[0] != paths[1] != paths[2]  # set_epoch each epoch
        stream = loader._stream[0]
        first_of_3 = next(loader.epoch(3))
        assert loader._stream[0] is stream  # no restart between consecutive epochs
        # epoch 3 was left after one batch: asking for batch 2 of it restarts the stream there
        rest = list(loader.epoch(3, 2))
        assert loader._stream[0] is not stream and len(rest) == 2
        fresh = build_train_loader(spec, 64, 5, AugmentConfig(mosaic=1.0), 0, 32, 0, 1, seed=0, cache_dir=cache_dir)
        reference = list(fresh.epoch(3))
        for got, want in zip([first_of_3] + rest, reference[:1] + reference[2:]):
            assert got[2] == want[2] and torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    finally:
        loader.close()


def test_train_stream_caps_batches_and_ends_after_the_last_epoch(small_synthetic):
    spec, cache_dir = small_synthetic
    loader = build_train_loader(spec, 64, 5, AugmentConfig(), 0, 32, 0, 1, seed=0, cache_dir=cache_dir, max_batches=2, epochs=2)
    assert len(loader) == 2
    assert [len(list(loader.epoch(e))) for e in range(2)] == [2, 2]
    loader.keys.start_at(0)
    assert len(list(iter(loader.keys))) == 4  # the stream itself ends after epoch 2
    with pytest.raises(ValueError, match="outside this loader's stream"):
        next(loader.epoch(2))
    full = _epoch_keys(loader, 1)
    assert _epoch_keys(loader, 1, 1) == full[1:] and {key[0] for batch in full for key in batch} == {1}


def test_mosaic_partners_come_from_the_batch_so_each_image_is_decoded_once(small_synthetic, monkeypatch):
    """With a buffer of one batch (far smaller than the dataset), an epoch decodes each image once: mosaic
    partners are drawn from the sample's own batch, which the worker decodes anyway."""
    from detect.data import datasets

    spec, cache_dir = small_synthetic
    decoded = []
    real_load = datasets.load_image_for_size
    monkeypatch.setattr(datasets, "load_image_for_size",
                        lambda path, *size: decoded.append(path) or real_load(path, *size))
    loader = build_train_loader(spec, 64, 5, AugmentConfig(mosaic=1.0), 0, 32, 0, 1, seed=0, cache_dir=cache_dir,
                                buffer_images=5)
    paths = [p for _, _, batch_paths in loader.epoch(3) for p in batch_paths]
    assert len(paths) == 20  # 23 images, 4 batches of 5
    assert len(decoded) == len(set(decoded)) == 20 and set(decoded) == set(paths)
    # the same keys give the same sample (exact resume does not depend on the worker's history)
    key = next(iter(loader.keys))[0]
    first, again = loader.dataset[key], loader.dataset[key]
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])


def test_close_mosaic_trains_the_last_epochs_on_whole_images(small_synthetic, monkeypatch):
    from detect.data import datasets

    spec, cache_dir = small_synthetic
    sources_per_sample = []
    real = datasets.plan_geometry

    def counting(rng, images, *args):
        sources_per_sample.append(len(images))  # 4 for a mosaic, 1 for a whole image
        return real(rng, images, *args)

    monkeypatch.setattr(datasets, "plan_geometry", counting)
    augment = AugmentConfig(mosaic=1.0, close_mosaic=0.25)
    assert augment.mosaic_epochs(4) == 3 and augment.mosaic_epochs(None) is None
    loader = build_train_loader(spec, 64, 5, augment, 0, 32, 0, 1, seed=0, cache_dir=cache_dir, epochs=4)
    try:
        per_epoch = []
        for e in range(4):
            sources_per_sample.clear()
            list(loader.epoch(e))
            per_epoch.append(set(sources_per_sample))
    finally:
        loader.close()
    assert per_epoch == [{4}, {4}, {4}, {1}]
