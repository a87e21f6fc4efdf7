"""YOLO labels are found where Darknet, ultralytics and labelImg put them (one rule per split, said in one info
line); a split with images and no label file at all is refused unless the spec allows it (`background_only`)."""

from pathlib import Path

import numpy as np
import pytest

from detect.data.formats.label_location import rule_path
from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict
from tests.support.log_lines import log_lines
from tests.support.yolo_trees import (
    ROWS,
    STEMS,
    expected_boxes,
    rows_of,
    write_images,
)


def yolo_spec(root: Path, train: str, **keys):
    return spec_from_dict({"format": "yolo", "path": str(root), "train": train, "val": train,
                           "names": ["cat", "dog"], **keys}, str(root / "layouts.yaml"))


def open_logged(spec, split, cache):
    with log_lines("detect.data.formats.label_layouts") as lines:
        source = open_source(spec, split, cache)
    return source, lines


# (image folder under the root, label folder under the root, the words of the info line)
LAYOUTS = {
    "labelImg in images/": ("images", "images", "beside the images (labelImg/Darknet layout)"),
    "labelImg flat": ("flat", "flat", "beside the images (labelImg/Darknet layout)"),
    "Darknet VOC": ("VOC2007/JPEGImages", "VOC2007/labels", "Darknet layout: the first images/ or JPEGImages/"),
    "ultralytics": ("images/train", "labels/train", "images/ -> labels/ (Darknet and ultralytics layout)"),
    "ultralytics nested": ("images/ds/images/train", "images/ds/labels/train",
                           "ultralytics layout: the last images/ folder"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_gives_the_same_boxes_and_names_itself(tmp_path, layout):
    images, labels, words = LAYOUTS[layout]
    root = tmp_path / "ds"
    write_images(root / images, root / labels)
    (root / labels / "classes.txt").write_text("cat\ndog\n")  # labelImg's class list: neither image nor label
    source, lines = open_logged(yolo_spec(root, images), "train", tmp_path / "cache")
    assert [Path(r.path).name for r in source.records] == ["a.jpg", "b.jpg", "c.jpg"]
    assert [len(r.classes) for r in source.records] == [1, 2, 3]
    for record, stem in zip(source.records, STEMS):
        np.testing.assert_allclose(record.boxes, expected_boxes(stem), atol=1e-4)
        assert record.classes.tolist() == [int(row[0]) for row in rows_of(stem)]
    assert not {k: v for k, v in source.report.counts.items() if v}  # no .txt counted as an unsupported image
    assert len(lines) == 1 and words in lines[0] and lines[0].endswith(f"e.g. {root / labels / 'a.txt'}")


def test_the_rules_in_order():
    image = Path("/d/images/set/images/train/x.jpg")
    assert rule_path(image, "darknet") == Path("/d/labels/set/images/train/x.txt")  # the first images/ folder
    assert rule_path(image, "ultralytics") == Path("/d/images/set/labels/train/x.txt")  # the last one
    assert rule_path(image, "beside") == Path("/d/images/set/images/train/x.txt")
    voc = Path("/v/VOC2007/JPEGImages/x.png")
    assert rule_path(voc, "darknet") == Path("/v/VOC2007/labels/x.txt") and rule_path(voc, "ultralytics") is None
    assert rule_path(Path("/d/myimages/x.jpg"), "darknet") is None  # whole folder names only


def test_the_first_rule_with_label_files_decides_for_the_split(tmp_path):
    """Labels under both Darknet's and ultralytics' folders: Darknet's are read, for every image, even one that
    has a label file only under the other rule."""
    root = tmp_path / "images" / "ds"
    write_images(root / "images" / "train", root / "labels" / "train")  # ultralytics' folder: 1, 2, 3 boxes
    darknet = tmp_path / "labels" / "ds" / "images" / "train"
    darknet.mkdir(parents=True)
    (darknet / "a.txt").write_text(ROWS[2] + "\n")
    source, lines = open_logged(yolo_spec(root, "images/train"), "train", tmp_path / "cache")
    assert [len(r.classes) for r in source.records] == [1, 0, 0]
    np.testing.assert_allclose(source.records[0].boxes, [[40, 40, 56, 56]])  # ROWS[2]: Darknet's file
    assert "Darknet layout" in lines[0]


def test_a_change_of_rule_rebuilds_the_cache(tmp_path):
    root = tmp_path / "ds"
    write_images(root / "images", root / "images")  # beside
    spec, cache = yolo_spec(root, "images"), tmp_path / "cache"
    assert [len(r.classes) for r in open_source(spec, "train", cache).records] == [1, 2, 3]
    (root / "labels").mkdir()
    for stem in STEMS:  # Darknet's images/ -> labels/ now finds files: it comes first
        (root / "labels" / f"{stem}.txt").write_text(ROWS[1] + "\n")
    source, lines = open_logged(spec, "train", cache)
    assert [r.classes.tolist() for r in source.records] == [[1], [1], [1]]
    assert "images/ -> labels/" in lines[0]


def test_a_split_without_any_label_file_is_refused_naming_the_folders(tmp_path):
    root = tmp_path / "ds"
    write_images(root / "train" / "images", root / "train" / "labels")
    write_images(root / "valid" / "images")  # a Roboflow export without valid/labels
    spec = spec_from_dict({"format": "yolo", "path": str(root), "train": "train/images", "val": "valid/images",
                           "names": ["cat", "dog"]}, str(root / "data.yaml"))
    with pytest.raises(ValueError) as e:
        open_source(spec, "val", tmp_path / "cache")
    message = str(e.value)
    assert message.startswith(f"data val: 3 file(s) in {root / 'valid' / 'images'} but not one label file")
    assert f"in {root / 'valid' / 'labels'}, {root / 'valid' / 'images'} (Darknet's" in message
    assert f"add `background_only: [val]` to {root / 'data.yaml'}" in message
    assert not (tmp_path / "cache").exists()  # refused before any cache is built
    (root / "valid" / "images" / "a.xml").write_text("<annotation/>")  # labelImg's Pascal VOC mode
    with pytest.raises(ValueError, match=r"holds an object. The split holds 1 .xml file\(s\): Pascal VOC annotations "
                                         r"are read by `format: voc`"):
        open_source(spec, "val", tmp_path / "cache")
    assert [len(r.classes) for r in open_source(spec, "train", tmp_path / "cache").records] == [1, 2, 3]


def test_background_only_allows_a_split_without_labels(tmp_path):
    root = tmp_path / "ds"
    write_images(root / "images" / "train", root / "labels" / "train")
    write_images(root / "images" / "empty")
    spec = yolo_spec(root, "images/train", test="images/empty", background_only=["test"])
    assert spec.background_only == ("test",)
    source, lines = open_logged(spec, "test", tmp_path / "cache")
    assert len(source.records) == 3 and sum(len(r.classes) for r in source.records) == 0
    assert lines == ["layouts test: labels none: every image is background (`background_only` in the spec)"]
    assert yolo_spec(root, "images/train", background_only=True).background_only == ("train", "val", "test")
    with pytest.raises(ValueError, match=r"layouts.yaml: `background_only` must be true or a list of the splits "
                                         r"\(train, val, test\) that may have no label file at all, got 'tset'"):
        yolo_spec(root, "images/train", background_only="tset")
