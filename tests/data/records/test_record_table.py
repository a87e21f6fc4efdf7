"""RecordTable: a split's records as flat arrays (no object per image for loader workers to copy on write)."""

import gc

import numpy as np
import pytest

from detect.data.loader import open_split
from detect.data.records.record_table import RecordTable
from detect.data.records.records import ImageRecord
from tests.conftest import ROOT


def make_records():
    return [ImageRecord("/data/ä/1.jpg", 64, 48, np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32),
                        np.array([0, 2]), 7, np.array([False, True])),
            ImageRecord("/data/2.png", 32, 16, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), 9),
            ImageRecord("/data/3.jpg", 10, 20, np.array([[0, 0, 5, 5]], np.float32), np.array([1]), 11)]


def test_a_table_gives_back_every_record_field_for_field():
    records = make_records()
    table = RecordTable.from_records(records)
    assert len(table) == 3 and table[-1].image_id == 11
    for a, b in zip(records, table):
        assert (a.path, a.width, a.height, a.image_id) == (b.path, b.width, b.height, b.image_id)
        assert np.array_equal(a.boxes, b.boxes) and np.array_equal(a.classes, b.classes)
        assert np.array_equal(a.difficult, b.difficult)
    assert [r.image_id for r in table[1:]] == [9, 11]
    with pytest.raises(IndexError):
        table[3]
    with pytest.raises(ValueError):  # read-only: a sample cannot change the split by accident
        table[0].boxes[0, 0] = 99


def test_a_split_from_the_label_cache_is_a_table_of_a_few_arrays(tmp_path):
    spec = tmp_path / "syn.yaml"
    spec.write_text((ROOT / "data" / "synthetic.yaml").read_text() + f"\npath: {tmp_path / 'gen'}\n"
                    "train_images: 40\nval_images: 8\n")
    for _ in range(2):  # built, then loaded from the cache
        source = open_split(spec, "train", tmp_path / "cache")
        assert isinstance(source.records, RecordTable) and len(source.records) == 40
        # what stays alive per split is nine arrays, not an object per image
        assert sum(type(o) is ImageRecord for o in gc.get_objects()) < 5
        table = source.records  # paths, offsets, sizes, ids; per box 4 float32 + an int64 class + a flag
        per_box = 16 + 8 + 1
        assert table.nbytes == table.paths.nbytes + 8 * 41 * 2 + 8 * 40 * 3 + len(table.classes) * per_box
