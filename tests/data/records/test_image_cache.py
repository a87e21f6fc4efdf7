"""--cache ram|disk (detect.data.records.image_cache): the same samples bit for bit, a rebuild when a file changes, a
refusal that names both sizes, unreadable images reported as without a cache, one shared copy for ram."""

import logging
import os
import time

import numpy as np
import pytest
import torch

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.loader import build_eval_loader, build_train_loader, open_split
from detect.data.records import image_cache
from tests.conftest import ROOT
from tests.support.distributed import run_distributed
from tests.support.log_lines import log_lines


@pytest.fixture
def spec(tmp_path):
    """The built-in synthetic set, small, generated into tmp_path."""
    path = tmp_path / "syn.yaml"
    path.write_text((ROOT / "data" / "synthetic.yaml").read_text() + f"\npath: {tmp_path / 'gen'}\n"
                    "train_images: 24\nval_images: 8\n")
    return path


def batches(loader, epoch=0):
    return [(images.clone(), targets.clone()) for images, targets, _ in loader.epoch(epoch)]


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for (ia, ta), (ib, tb) in zip(a, b):
        assert torch.equal(ia, ib) and torch.equal(ta, tb)


AUGMENTATIONS = {  # every path a sample takes from the cached pixels (which it may read, never write)
    "mosaic": AugmentConfig(mosaic=1.0, degrees=5.0),
    "whole-image": AugmentConfig(mosaic=0.0, translate=0.0, scale=0.0, fliplr=0.5, flipud=0.5),
    "extras": AugmentConfig(mosaic=1.0, mosaic9=0.5, mixup=0.5, flipud=0.5, perspective=0.0005),
}


@pytest.mark.parametrize("mode,augmentation", [("disk", "mosaic"), ("ram", "mosaic"), ("ram", "whole-image"),
                                                ("ram", "extras")])
def test_training_samples_are_bit_identical_with_the_cache(spec, tmp_path, mode, augmentation, monkeypatch):
    monkeypatch.setattr(image_cache, "SHARED_MEMORY", tmp_path / "shm")  # a private stand-in for /dev/shm
    augment = AUGMENTATIONS[augmentation]
    plain = build_train_loader(spec, 64, 4, augment, 0, 32, 0, 1, 0, cache_dir=tmp_path / "cache")
    cached = build_train_loader(spec, 64, 4, augment, 0, 32, 0, 1, 0, cache_dir=tmp_path / "cache", cache=mode)
    try:
        assert cached.dataset.image_cache is not None and cached.dataset.image_cache.ok.all()
        for epoch in (0, 1):
            assert_same_batches(batches(plain, epoch), batches(cached, epoch))
    finally:
        plain.close()
        cached.close()
    files = sorted(p.name for p in (tmp_path / ("shm" if mode == "ram" else "cache/images")).iterdir())
    # ram: unlinked once mapped (the memory is the system's again when the run ends); disk: kept for next time
    assert files == [] if mode == "ram" else len(files) == 2


def test_evaluation_samples_are_bit_identical_with_the_cache(spec, tmp_path):
    plain = build_eval_loader(spec, "val", 64, 3, 0, 32, 0, 1, cache_dir=tmp_path / "cache")
    cached = build_eval_loader(spec, "val", 64, 3, 0, 32, 0, 1, cache_dir=tmp_path / "cache", cache="disk")
    for (ia, ta, ma), (ib, tb, mb) in zip(plain, cached, strict=True):
        assert torch.equal(ia, ib) and torch.equal(ta, tb) and ma == mb


def test_a_changed_file_rebuilds_the_disk_cache(spec, tmp_path):
    source = open_split(spec, "train", tmp_path / "cache")
    before = image_cache.image_cache_key(source.records, 64, "train")
    path = source.records[3].path
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert image_cache.image_cache_key(source.records, 64, "train") != before


def test_too_little_room_is_refused_with_both_sizes(spec, tmp_path, monkeypatch):
    monkeypatch.setattr(image_cache, "free_bytes", lambda mode, folder: 1000)
    with pytest.raises(ValueError, match=r"^--cache ram: the decoded images of .*-train \(24 images\) need "
                                         r"0\.00 GiB, free memory \(MemAvailable\) is 0\.00 GiB; use --cache disk"):
        build_train_loader(spec, 64, 4, AugmentConfig(), 0, 32, 0, 1, 0, cache_dir=tmp_path / "cache",
                           cache="ram")
    assert image_cache.estimate_bytes(open_split(spec, "train", tmp_path / "cache").records, 64) > 24 * 64 * 40 * 3


def test_an_image_that_cannot_be_cached_is_read_and_reported_as_without_a_cache(spec, tmp_path):
    source = open_split(spec, "train", tmp_path / "cache")
    broken = source.records[5].path
    stat = os.stat(broken)  # broken after the label cache was built: same size and time, so it is not rebuilt
    with open(broken, "wb") as f:
        f.write(b"\0" * stat.st_size)
    os.utime(broken, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with log_lines("detect.data.records.image_cache") as lines:
        loader = build_train_loader(spec, 64, 4, AugmentConfig(mosaic=0.0), 0, 32, 0, 1, 0,
                                    cache_dir=tmp_path / "cache", cache="disk")
    assert any("1 image(s) could not be decoded" in line and str(broken) in line for line in lines)
    assert not loader.dataset.image_cache.ok[5] and loader.dataset.image_cache.ok.sum() == 23
    with log_lines("detect.data.datasets") as lines:
        sample = loader.dataset[(0, 5)]  # the unreadable image's sample is replaced, as without a cache
    loader.close()
    assert sample[2] == source.records[6].path and any(str(broken) in line for line in lines)


def _shared(rank, world, spec, tmp_path, shm):
    image_cache.SHARED_MEMORY = shm
    logging.getLogger("detect.data.records.image_cache").setLevel(logging.INFO)
    with log_lines("detect.data.records.image_cache") as lines:
        loader = build_train_loader(spec, 64, 4, AugmentConfig(), 0, 32, rank, world, 0,
                                    cache_dir=tmp_path / "cache", cache="ram")
    cache = loader.dataset.image_cache
    # the mapping this process holds is of that one file (unlinked by now: "(deleted)")
    maps = [line for line in open("/proc/self/maps").read().splitlines() if cache.data_path.name in line]
    first = np.asarray(cache.get(0)[0]).sum()
    loader.close()
    return str(cache.data_path), bool(maps), int(first), sum("decoding" in line for line in lines)


def test_ranks_of_a_node_share_one_ram_copy(spec, tmp_path):
    open_split(spec, "train", tmp_path / "cache")  # generated once here
    outputs = run_distributed(_shared, 2, args=(spec, tmp_path, tmp_path / "shm"))
    assert outputs[0][0] == outputs[1][0] and outputs[0][2] == outputs[1][2]
    assert [o[1] for o in outputs] == [True, True] and [o[3] for o in outputs] == [1, 0]  # rank 0 decoded
    assert list((tmp_path / "shm").iterdir()) == []  # built once by rank 0, mapped by both, then unlinked


def test_auto_keeps_a_split_in_ram_only_when_it_fits_a_quarter_of_free_memory(spec, tmp_path, monkeypatch):
    source = open_split(spec, "train", cache_dir=tmp_path / "cache")
    needed = image_cache.estimate_bytes(source.records, 64)
    monkeypatch.setattr(image_cache, "free_bytes", lambda mode, folder: 4 * needed)  # exactly a quarter
    with log_lines("detect.data.records.image_cache") as lines:
        assert image_cache.resolve_mode("auto", source.records, 64, "syn-train") == "ram"
    assert any("image cache auto: ram (syn-train, 24 images" in m for m in lines), lines
    monkeypatch.setattr(image_cache, "free_bytes", lambda mode, folder: 4 * needed - 1)
    assert image_cache.resolve_mode("auto", source.records, 64, "syn-train") is None
    assert image_cache.resolve_mode("off", source.records, 64, "x") is None
    assert image_cache.resolve_mode(None, source.records, 64, "x") is None
    assert image_cache.resolve_mode("disk", source.records, 64, "x") == "disk"
    with pytest.raises(ValueError, match="--cache must be one of auto, ram, disk, off, got 'tmpfs'"):
        image_cache.resolve_mode("tmpfs", source.records, 64, "x")
    # a loader asked for auto on a split too large for memory reads the files as without a cache
    loader = build_train_loader(source, 64, 4, AugmentConfig(), 0, 32, 0, 1, 0, cache_dir=tmp_path / "cache",
                                cache="auto")
    assert loader.dataset.image_cache is None and loader.dataset.buffer_images > 0
