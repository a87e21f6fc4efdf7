"""Data yaml files as Roboflow and ultralytics write them are read as they come: no `format`, no `path` (the yaml's
folder), `../train/images`, `nc` beside `names` as a list or a {0: name} dict."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec
from tests.support.log_lines import log_lines
from tests.support.yolo_trees import STEMS, expected_boxes, write_images


def write_yaml(path: Path, keys: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(keys, sort_keys=False))
    return path


def roboflow_export(root: Path) -> Path:
    """A Roboflow YOLO export: data.yaml beside train/, valid/, test/ (images/ and labels/ in each)."""
    for split in ("train", "valid", "test"):
        write_images(root / split / "images", root / split / "labels")
    return write_yaml(root / "data.yaml", {
        "train": "../train/images", "val": "../valid/images", "test": "../test/images", "nc": 2,
        "names": ["cat", "dog"],
        "roboflow": {"workspace": "w", "project": "p", "version": 1, "license": "CC BY 4.0", "url": "https://x"}})


def assert_boxes(source) -> None:
    assert [Path(r.path).name for r in source.records] == [f"{s}.jpg" for s in STEMS]
    assert [len(r.classes) for r in source.records] == [1, 2, 3]
    for record, stem in zip(source.records, STEMS):
        np.testing.assert_allclose(record.boxes, expected_boxes(stem), atol=1e-4)


def test_a_roboflow_yolo_export_is_read_as_it_comes(tmp_path, monkeypatch):
    data = roboflow_export(tmp_path / "export")
    monkeypatch.chdir(tmp_path.parent)  # paths are the yaml's, not the current directory's
    with log_lines("detect.data.formats.foreign_yaml") as lines:
        spec = load_data_spec(data)
    assert spec.format == "yolo" and spec.names == ("cat", "dog") and spec.path == (tmp_path / "export").resolve()
    assert spec.images("train") == spec.path / "train" / "images" and spec.images("val") == spec.path / "valid" / "images"
    assert spec.images("test") == spec.path / "test" / "images"
    assert lines[0] == (f"{data}: format yolo (no `format` key: train / val name image folders or lists, and no COCO "
                        f"json is given; add `format:` to choose another)")
    assert lines[1] == (f"{data}: train = '../train/images': {spec.path / '../train/images'} does not exist; using "
                        f"{spec.path / 'train/images'} (Roboflow's ../ paths, read as ultralytics reads them)")
    assert len(lines) == 4  # one for each split
    for split in ("train", "val", "test"):
        assert_boxes(open_source(spec, split, tmp_path / "cache"))


def test_a_roboflow_export_without_valid_labels_is_refused(tmp_path):
    data = roboflow_export(tmp_path / "export")
    for label in (tmp_path / "export" / "valid" / "labels").iterdir():
        label.unlink()
    (tmp_path / "export" / "valid" / "labels").rmdir()
    spec = load_data_spec(data)
    valid = spec.path / "valid"
    with pytest.raises(ValueError, match=f"data val: 3 file.s. in {valid / 'images'} but not one label file. Looked "
                                         f"for <image name>.txt in {valid / 'labels'}, {valid / 'images'} "):
        open_source(spec, "val", tmp_path / "cache")
    background = write_yaml(data, {**yaml.safe_load(data.read_text()), "background_only": ["val"]})
    source = open_source(load_data_spec(background), "val", tmp_path / "cache")
    assert len(source.records) == 3 and sum(len(r.classes) for r in source.records) == 0


def test_an_ultralytics_yaml_with_path_and_a_names_dict(tmp_path, monkeypatch):
    write_images(tmp_path / "sets" / "coco8" / "images" / "train", tmp_path / "sets" / "coco8" / "labels" / "train")
    write_images(tmp_path / "sets" / "coco8" / "images" / "val", tmp_path / "sets" / "coco8" / "labels" / "val")
    data = write_yaml(tmp_path / "sets" / "coco8.yaml", {"path": "coco8", "train": "images/train",
                                                         "val": "images/val", "names": {0: "person", 1: "car"}})
    monkeypatch.chdir(tmp_path)  # `path` is relative to the yaml's folder, not to this one
    spec = load_data_spec(data)
    assert (spec.format, spec.names, spec.path) == ("yolo", ("person", "car"), tmp_path / "sets" / "coco8")
    assert_boxes(open_source(spec, "val", tmp_path / "cache"))


def test_nc_must_agree_with_names(tmp_path):
    data = write_yaml(tmp_path / "data.yaml", {"train": "t", "val": "v", "nc": 3, "names": {0: "a", 1: "b"}})
    with pytest.raises(ValueError, match=rf"^{data}: `nc` is 3 but `names` lists 2 classes; make them agree"):
        load_data_spec(data)
    write_yaml(data, {"train": "t", "val": "v", "nc": "two", "names": ["a", "b"]})
    with pytest.raises(ValueError, match=rf"{data}: `nc` must be a whole number of classes \(1 or more\), got 'two'"):
        load_data_spec(data)
    write_yaml(data, {"train": "t", "val": "v", "nc": 2, "names": ["a", "b"]})
    assert load_data_spec(data).names == ("a", "b")


def test_the_format_is_told_from_the_keys_and_files(tmp_path):
    (tmp_path / "VOC2007" / "ImageSets" / "Main").mkdir(parents=True)
    (tmp_path / "VOC2007" / "ImageSets" / "Main" / "trainval.txt").write_text("x\n")
    cases = {
        "coco": {"train": "train", "val": "valid", "train_annotations": "train/_annotations.coco.json",
                 "val_annotations": "valid/_annotations.coco.json"},
        "voc": {"images": "images", "annotations": "images", "val_fraction": 0.2},
        "yolo": {"train": "train.txt", "val": "val.txt", "names": ["a"]},
    }
    for fmt, keys in cases.items():
        assert load_data_spec(write_yaml(tmp_path / f"{fmt}.yaml", keys)).format == fmt
    devkit = write_yaml(tmp_path / "devkit.yaml", {"train": "VOC2007/trainval", "val": "VOC2007/trainval"})
    with log_lines("detect.data.formats.foreign_yaml") as lines:
        assert load_data_spec(devkit).format == "voc"
    assert "format voc (no `format` key: VOC2007/trainval is a VOCdevkit split" in lines[0]
    nothing = write_yaml(tmp_path / "nothing.yaml", {"names": ["a"]})
    with pytest.raises(ValueError, match=rf"{nothing}: no `format` key, and no `train` / `val` to tell it from; add "
                                         r"`format: yolo` \(or coco, voc, synthetic\)"):
        load_data_spec(nothing)
    listed = write_yaml(tmp_path / "listed.yaml", {"train": ["a/images", "b/images"], "val": "v", "names": ["a"]})
    with pytest.raises(ValueError, match=rf"{listed}: `train` lists 2 entries; give one image folder, or one .txt"):
        load_data_spec(listed)


def test_a_missing_split_names_keys_that_exist(tmp_path):
    data = write_yaml(tmp_path / "data.yaml", {"train": "../train/images", "val": "../valid/images", "names": ["a"]})
    spec = load_data_spec(data)
    with pytest.raises(FileNotFoundError) as e:
        spec.images("val")
    assert str(e.value) == (f"{data}: val = {tmp_path / '../valid/images'} does not exist; correct `val` or `path` in "
                            f"{data} (`val` is relative to `path`, {tmp_path})")
