"""The label cache: reused while nothing changed, rebuilt when a label changes or the file is damaged,
and built once by rank 0 while rank 1 waits and reads it."""


import numpy as np
import pytest

from detect.data.formats import yolo_labels
from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict
from tests.support.corpus import jpeg_bytes
from tests.support.distributed import run_distributed
from tests.support.log_lines import log_lines


def make_yolo(root, n=4):
    images, labels = root / "images" / "train", root / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    for i in range(n):
        (images / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))
        (labels / f"{i}.txt").write_text(f"{i % 2} 0.5 0.5 0.25 0.5\n")
    return spec_from_dict({"format": "yolo", "path": str(root), "train": "images/train", "val": "images/train",
                           "names": ["a", "b"]}, str(root / "tiny.yaml"))


@pytest.fixture
def count_scans(monkeypatch):
    calls = []
    real = yolo_labels.scan

    def counting(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(yolo_labels, "scan", counting)
    return calls


def test_cache_is_reused_then_invalidated_by_a_label_change(tmp_path, count_scans):
    spec, cache = make_yolo(tmp_path / "ds"), tmp_path / "cache"
    first = open_source(spec, "train", cache)
    again = open_source(spec, "train", cache)
    assert len(count_scans) == 1  # the second open read the cache
    assert [r.classes.tolist() for r in again.records] == [r.classes.tolist() for r in first.records]
    (tmp_path / "ds" / "labels" / "train" / "2.txt").write_text("1 0.25 0.25 0.5 0.5\n")  # same size, new content
    with log_lines("detect.data.records.cache") as lines:
        changed = open_source(spec, "train", cache)
    assert len(count_scans) == 2
    assert sum("stale" in line for line in lines) == 1  # one warning line
    rec = changed.records[2]
    assert rec.classes.tolist() == [1]
    np.testing.assert_allclose(rec.boxes, [[0, 0, 32, 24]])


def test_damaged_or_foreign_cache_is_rebuilt(tmp_path, count_scans):
    spec, cache = make_yolo(tmp_path / "ds"), tmp_path / "cache"
    open_source(spec, "train", cache)
    cache_file = next((cache / "labels").glob("*.npz"))
    cache_file.write_bytes(cache_file.read_bytes()[:100])  # a half-written file from a killed build
    assert len(open_source(spec, "train", cache).records) == 4
    cache_file.write_text("not a cache")
    assert len(open_source(spec, "train", cache).records) == 4
    assert len(count_scans) == 3
    assert not list((cache / "labels").glob("*.tmp"))  # atomic writes leave no temp files


def test_a_new_image_invalidates_the_cache(tmp_path, count_scans):
    spec, cache = make_yolo(tmp_path / "ds"), tmp_path / "cache"
    assert len(open_source(spec, "train", cache).records) == 4
    (tmp_path / "ds" / "images" / "train" / "9.jpg").write_bytes(jpeg_bytes(seed=9))
    assert len(open_source(spec, "train", cache).records) == 5


def _open_in_ranks(rank, world_size, root, cache):
    calls = []
    real = yolo_labels.scan
    yolo_labels.scan = lambda *a: calls.append(1) or real(*a)
    spec = spec_from_dict({"format": "yolo", "path": root, "train": "images/train", "val": "images/train",
                           "names": ["a", "b"]}, f"{root}/tiny.yaml")
    source = open_source(spec, "train", cache)
    return len(calls), [r.classes.tolist() for r in source.records]


@pytest.mark.slow
def test_rank0_builds_the_cache_and_rank1_reads_it(tmp_path):
    make_yolo(tmp_path / "ds")
    (built0, labels0), (built1, labels1) = run_distributed(_open_in_ranks, 2,
                                                           (str(tmp_path / "ds"), str(tmp_path / "cache")))
    assert (built0, built1) == (1, 0)
    assert labels0 == labels1 == [[0], [1], [0], [1]]
