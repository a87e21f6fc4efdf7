"""Images that disappear during a run (a network mount going away): reported per file, and the epoch goes on."""

import shutil
from pathlib import Path

import numpy as np
import pytest

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.datasets import MAX_UNREADABLE_IN_A_ROW, EvalDataset, TrainDataset
from detect.data.formats.spec import spec_from_dict
from detect.data.loader import build_eval_loader, build_train_loader, open_split
from tests.support.log_lines import log_lines


@pytest.fixture
def tiny_split(tmp_path):
    """(spec, cache dir, train source) of 8 + 4 small generated images, in a folder the test may damage."""
    spec = spec_from_dict({"format": "synthetic", "path": str(tmp_path / "gen"), "seed": 2, "train_images": 8,
                           "val_images": 4, "image_sizes": [64], "min_side": 10, "max_side": 28}, "vanishing.yaml")
    return spec, tmp_path / "cache", open_split(spec, "train", tmp_path / "cache")


def test_a_vanished_training_image_is_reported_and_replaced(tiny_split):
    spec, cache, source = tiny_split
    gone = source.records[3].path
    loader = build_train_loader(spec, 64, 4, AugmentConfig(mosaic=0.0), workers=1, stride=32, rank=0, world_size=1,
                                seed=0, cache_dir=cache, epochs=1)
    shutil.move(gone, gone + ".away")
    paths = []
    for images, targets, batch_paths in loader.epoch(0):  # in a loader worker, as in training
        assert images.shape == (4, 3, 64, 64) and targets.shape[1] == 6
        paths += batch_paths
    loader.close()
    assert len(paths) == 8 and gone not in paths  # the epoch ran to its end, another sample in its place
    assert paths.count(source.records[4].path) == 2  # the next index's sample stood in
    dataset = TrainDataset(source, 64, AugmentConfig(mosaic=0.0))
    with log_lines("detect.data.datasets") as lines:
        dataset[3], dataset[3]
    assert len(lines) == 1 and gone in lines[0] and "its sample is replaced" in lines[0]  # once per file


def test_a_vanished_eval_image_is_evaluated_blank_and_counted_once(tiny_split):
    spec, cache, _ = tiny_split
    val = open_split(spec, "val", cache)
    gone = val.records[1].path
    shutil.move(gone, gone + ".away")
    loader = build_eval_loader(val, "val", 64, 2, 0, 32, 0, 1)
    with log_lines("detect.data.datasets") as lines:
        metas = [m for _, _, batch_metas in loader for m in batch_metas]
    assert sorted(m["image_id"] for m in metas) == sorted(r.image_id for r in val.records)  # every image once
    assert len(lines) == 1 and gone in lines[0] and "blank image" in lines[0]
    shapes = np.array([[64, 64]] * len(val.records))
    image = EvalDataset(val, shapes, 64)[1][0]
    assert image.shape == (3, 64, 64) and int(image.float().std()) == 0  # one grey canvas


def test_a_data_folder_gone_entirely_stops_with_a_message(tiny_split):
    _, _, source = tiny_split
    shutil.rmtree(Path(source.records[0].path).parent)  # the mount went away
    dataset = TrainDataset(source, 64, AugmentConfig(mosaic=0.0))
    with pytest.raises(OSError, match=f"{MAX_UNREADABLE_IN_A_ROW} images in a row cannot be read .* mount gone away"):
        dataset[(0, 0)]
