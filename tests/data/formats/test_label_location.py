"""The label rule table: two images of one stem (`x.jpg`, `x.png`) never share one label file in any reader
(YOLO folder, Darknet list, VOC xml); both are skipped and named with the label file."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from detect.data.formats.label_location import label_file, label_path, rule_path, shared_labels
from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, spec_from_dict
from tests.support.darknet_trees import write_lines, write_obj_data
from tests.support.log_lines import log_lines


def write_pair(folder: Path, label_folder: Path | None, ext_label: str = ".txt") -> None:
    """a.jpg (one box), x.jpg and x.png (one label file between them), 64x64."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, grey in (("a.jpg", 40), ("x.jpg", 90), ("x.png", 140)):
        cv2.imwrite(str(folder / name), np.full((64, 64, 3), grey, np.uint8))
    if label_folder is not None:
        label_folder.mkdir(parents=True, exist_ok=True)
        (label_folder / "a.txt").write_text("0 0.5 0.5 0.25 0.25\n")
        (label_folder / "x.txt").write_text("0 0.25 0.25 0.25 0.25\n")


def test_every_rule_maps_x_jpg_and_x_png_to_one_file():
    for rule in ("alexeyab", "darknet", "ultralytics", "beside"):
        jpg, png = label_path(Path("/d/images/x.jpg"), rule), label_path(Path("/d/images/x.png"), rule)
        assert jpg == png
    assert rule_path(Path("/d/images/x.jpg"), "darknet") == Path("/d/labels/x.txt")
    assert label_file("data/obj/x.png", Path("/r"), "alexeyab") == Path("/r/data/obj/x.txt")
    images = [Path("/d/a.jpg"), Path("/d/x.jpg"), Path("/d/x.png")]
    assert shared_labels(images, [label_path(p, "beside") for p in images]) == {
        Path("/d/x.txt"): [Path("/d/x.jpg"), Path("/d/x.png")]}


@pytest.mark.parametrize("layout", ["ultralytics", "beside"])
def test_a_yolo_folder_skips_both_images_of_one_stem_and_names_them(tmp_path, layout):
    root = tmp_path / "ds"
    images = root / "images" / "val"
    write_pair(images, root / "labels" / "val" if layout == "ultralytics" else images)
    spec = spec_from_dict({"format": "yolo", "path": str(root), "train": "images/val", "val": "images/val",
                           "names": ["thing"]}, str(root / "ds.yaml"))
    with log_lines("detect.data.formats.label_location") as lines:
        source = open_source(spec, "val", tmp_path / "cache")
    assert [Path(r.path).name for r in source.records] == ["a.jpg"]  # before: x.jpg and x.png with x.txt's box
    assert source.report.counts["shared_label"] == 2
    label = (root / "labels" / "val" if layout == "ultralytics" else images) / "x.txt"
    assert lines == [f"2 images share a label file with another image of the same name and are skipped, e.g. "
                     f"{images / 'x.jpg'} and {images / 'x.png'} both map to {label}; shared: {label}. Give each "
                     f"image its own stem"]
    (entry,) = [e for e in source.report.entries if e[1] == "shared_label"]
    assert entry[0] == str(label) and entry[2].startswith(f"x.jpg and x.png (in {images}) would both read this "
                                                          f"label file; 2 images skipped")


def test_a_darknet_list_skips_both_images_of_one_stem(tmp_path, monkeypatch):
    root = tmp_path / "darknet"
    write_pair(root / "data" / "obj", root / "data" / "obj")
    write_lines(root / "data" / "train.txt", ["data/obj/a.jpg", "data/obj/x.jpg", "data/obj/x.png"])
    write_lines(root / "data" / "obj.names", ["thing"])
    write_obj_data(root / "data" / "obj.data", train="data/train.txt", valid="data/train.txt",
                   names="data/obj.names")
    monkeypatch.chdir(root)
    source = open_source(load_data_spec("data/obj.data"), "val", tmp_path / "cache")
    assert [Path(r.path).name for r in source.records] == ["a.jpg"]
    assert source.report.counts["shared_label"] == 2 and not source.dropped_image_ids


def test_a_voc_folder_skips_both_images_of_one_xml(tmp_path):
    root = tmp_path / "voc"
    write_pair(root / "images", None)
    (root / "annotations").mkdir()
    for stem in ("a", "x"):
        (root / "annotations" / f"{stem}.xml").write_text(
            "<annotation><size><width>64</width><height>64</height></size><object><name>thing</name><bndbox>"
            "<xmin>10</xmin><ymin>10</ymin><xmax>30</xmax><ymax>30</ymax></bndbox></object></annotation>")
    write_lines(root / "all.txt", ["a", "x"])
    spec = spec_from_dict({"format": "voc", "path": str(root), "train": "all.txt", "val": "all.txt"},
                          str(root / "voc.yaml"))
    source = open_source(spec, "val", tmp_path / "cache")
    assert [Path(r.path).name for r in source.records] == ["a.jpg"]  # before: x.jpg alone, x.png silently unread
    assert source.report.counts["shared_label"] == 2
