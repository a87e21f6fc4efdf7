"""Darknet's obj.data as `--data`: the file read as read_data_cfg reads it, paths resolved from the current
directory then the naming file's folder, labels by replace_image_to_label (else pjreddie's images/ -> labels/),
names and classes checked, and bad input reported and skipped."""

import json
from pathlib import Path

import numpy as np
import pytest

from detect.data.formats.darknet_source import COCO_IDS, darknet_coco_image_id
from detect.data.formats.label_location import label_file, replace_image_to_label
from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, read_class_names
from tests.support.darknet_trees import write_lines, write_obj_data
from tests.support.log_lines import log_lines
from tests.support.val_data import write_tiny_checkpoint
from tests.support.yolo_trees import STEMS, expected_boxes, write_images


@pytest.fixture
def darknet_root(tmp_path, monkeypatch):
    """A Darknet folder (the current directory): data/obj/<stem>.jpg with labels beside them, as AlexeyAB's
    README lays it out, data/train.txt listing them, data/obj.names (3 classes) and data/obj.data."""
    root = tmp_path / "darknet"
    write_images(root / "data" / "obj", labels=root / "data" / "obj")
    write_lines(root / "data" / "train.txt", [f"data/obj/{s}.jpg" for s in STEMS])
    write_lines(root / "data" / "obj.names", ["red", "green", "blue"])
    write_obj_data(root / "data" / "obj.data", classes=3, train="data/train.txt", valid="data/train.txt",
                   names="data/obj.names", backup="backup/")
    monkeypatch.chdir(root)
    return root


def open_split(data, split="train", cache=None):
    return open_source(load_data_spec(data), split, cache or Path.cwd().parent / "cache")


@pytest.mark.parametrize("image, label", [
    ("data/obj/a.jpg", "data/obj/a.txt"),  # AlexeyAB's layout: beside the image
    ("data/obj/images/a.jpg", "data/obj/images/a.txt"),  # /images/ alone is not renamed (commented out in Darknet)
    ("/voc/VOC2007/JPEGImages/000001.jpg", "/voc/VOC2007/labels/000001.txt"),
    ("/coco/images/train2017/000000000009.jpg", "/coco/labels/train2017/000000000009.txt"),
    ("/coco/images/val2014/COCO_val2014_000000000042.JPEG", "/coco/labels/val2014/COCO_val2014_000000000042.txt"),
    ("C:\\voc\\JPEGImages\\x.png", "C:\\voc\\labels\\x.txt"),
    ("/a/JPEGImages/b/JPEGImages/c.bmp", "/a/labels/b/JPEGImages/c.txt"),  # the first occurrence only
    ("/a/x.jpg.png", "/a/x.jpg.txt"),  # only the extension at the end
    (" data/a.tiff\t", "data/a.txt"),  # trim()
    ("data/a.tif", "data/a.tif"),  # an extension Darknet does not know: unchanged ("Failed to infer ...")
    ("data/a.Jpg", "data/a.Jpg"),
])
def test_replace_image_to_label_is_darknets(image, label):
    assert replace_image_to_label(image) == label


def test_label_file_rules(tmp_path):
    assert label_file("data/obj/images/a.jpg", tmp_path, "alexeyab") == tmp_path / "data/obj/images/a.txt"
    assert label_file("data/obj/images/a.jpg", tmp_path, "darknet") == tmp_path / "data/obj/labels/a.txt"
    assert label_file("VOC/JPEGImages/a.jpg", tmp_path, "darknet") == tmp_path / "VOC/labels/a.txt"
    assert label_file("data/a.tif", tmp_path, "alexeyab") == tmp_path / "data/a.txt"  # what the user meant
    assert label_file("/abs/JPEGImages/a.jpg", tmp_path, "alexeyab") == Path("/abs/labels/a.txt")
    assert label_file("VOC/JPEGImages/a.webp", tmp_path, "alexeyab") == tmp_path / "VOC/labels/a.txt"  # as a.jpg's


def test_obj_data_reads_as_darknet_and_its_boxes_are_the_labels(darknet_root):
    with log_lines("detect.data.formats.darknet_data") as info, log_lines("detect.data.formats.darknet_source") as lists:
        source = open_split("data/obj.data")
    assert source.names == ["red", "green", "blue"] and source.category_ids == [0, 1, 2]
    assert [Path(r.path).name for r in source.records] == ["a.jpg", "b.jpg", "c.jpg"]
    for record, stem in zip(source.records, STEMS):
        np.testing.assert_allclose(record.boxes, expected_boxes(stem), atol=1e-4)
    assert [r.classes.tolist() for r in source.records] == [[0], [0, 1], [0, 1, 0]]
    assert not source.report.entries
    cwd = darknet_root
    assert info == [
        f"data/obj.data: Darknet .data: train {cwd}/data/train.txt, valid {cwd}/data/train.txt, names "
        f"{cwd}/data/obj.names (3 classes); relative paths read from the current directory {cwd} (Darknet's rule)",
        "data/obj.data: backup = backup/ is where Darknet saves weights; train.py writes them to its run folder "
        "instead (runs/train/<name>: --project, --name)"]
    assert lists == [
        f"obj train: image paths of {cwd}/data/train.txt read relative to the current directory {cwd} "
        f"(Darknet's rule)",
        "obj train: labels by Darknet's replace_image_to_label (AlexeyAB): /JPEGImages/ and COCO's "
        f"/images/<split>/ -> /labels/, else beside the image, e.g. {cwd}/data/obj/a.txt"]


def test_paths_fall_back_to_the_naming_files_folder(darknet_root, tmp_path, monkeypatch):
    # obj.data and train.txt written relative to their own folders, read from another directory
    write_lines(darknet_root / "data" / "local.txt", [f"obj/{s}.jpg" for s in STEMS])
    write_obj_data(darknet_root / "data" / "local.data", train="local.txt", names="obj.names")
    monkeypatch.chdir(tmp_path)
    with log_lines("detect.data.formats.darknet_data") as info, log_lines("detect.data.formats.darknet_source") as lists:
        source = open_split(darknet_root / "data" / "local.data", cache=tmp_path / "cache")
    assert len(source.records) == 3
    folder = darknet_root / "data"
    assert f"relative paths read from {folder} (the obj.data's folder): obj.names, local.txt are not under the " \
           f"current directory {tmp_path}, where Darknet opens them" in info[1]
    assert lists[0] == (f"local train: image paths of {folder}/local.txt read relative to the list's folder {folder} "
                        f"(they are not under the current directory {tmp_path}, where Darknet opens them)")


def test_a_path_in_neither_place_names_the_file_the_line_and_both_places(darknet_root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # cfg/obj.names is relative to darknet_root, neither here nor in data/
    write_lines(darknet_root / "cfg" / "obj.names", ["red", "green", "blue"])
    data = write_obj_data(darknet_root / "data" / "cfg.data", classes=3, train="data/train.txt",
                          names="cfg/obj.names")
    with pytest.raises(FileNotFoundError) as error:
        load_data_spec(data)
    assert str(error.value) == (
        f"{data}:3: names file 'cfg/obj.names' not found: looked in the current directory, where Darknet opens "
        f"it ({tmp_path}/cfg/obj.names), and in the folder of cfg.data ({darknet_root}/data/cfg/obj.names). "
        f"Correct line 3 of {data}, or run from the folder the path is relative to. It exists under "
        f"{darknet_root}: run from there (the folder Darknet ran from), or write the path relative to "
        f"{darknet_root}/data.")
    write_lines(darknet_root / "data" / "moved.txt", ["nowhere/a.jpg", "nowhere/b.jpg"])
    write_obj_data(darknet_root / "data" / "moved.data", train="moved.txt", names="obj.names")
    with pytest.raises(FileNotFoundError, match=r"moved.txt:1: listed image 'nowhere/a.jpg' not found: looked in "
                                                r"the current directory, where Darknet opens it \(.*/nowhere/a.jpg\), "
                                                r"and in the folder of moved.txt \(.*/data/nowhere/a.jpg\)"):
        open_split(darknet_root / "data" / "moved.data", cache=tmp_path / "cache")


def test_names_file_and_classes_are_checked(darknet_root):
    names = darknet_root / "data" / "obj.names"
    names.write_text("red\ngreen\nblue\n\n  \n")  # blank lines at the end: ignored
    assert load_data_spec("data/obj.data").names == ("red", "green", "blue")
    names.write_text("red\n\nblue\n")
    with pytest.raises(ValueError, match=rf"^{names}:2: line 2 is blank, between class names: Darknet would read it "
                                         r"as class 1 with no name; write that class's name there, or delete the line$"):
        load_data_spec("data/obj.data")
    names.write_text("red\ngreen\n")
    with pytest.raises(ValueError) as error:
        load_data_spec("data/obj.data")
    assert str(error.value) == (f"data/obj.data:1: classes = 3 but {names} lists 2 class name(s); if the names "
                                f"file is complete set classes = 2, else add the missing names to it")
    write_obj_data(darknet_root / "data" / "obj.data", classes="three", train="data/train.txt",
                   names="data/obj.names")
    with pytest.raises(ValueError, match=r"obj.data:1: classes = 'three' is not a whole number; write classes = 2"):
        load_data_spec("data/obj.data")


def test_bad_label_lines_are_reported_with_their_line_and_skipped(darknet_root):
    obj = darknet_root / "data" / "obj"
    (obj / "a.txt").write_text("0 0.25 0.5 0.25 0.5\n7 0.5 0.5 0.1 0.1\n\n2 0.5 0.5 0.1 0.1\n")
    (obj / "b.txt").write_text("0 0.5 0.5 0.2 0.2\n1 0.5 oops 0.2 0.2\n")
    source = open_split("data/obj.data")
    assert [Path(r.path).name for r in source.records] == ["a.jpg", "c.jpg"]
    assert source.records[0].classes.tolist() == [0, 2] and source.dropped_image_ids == [1]
    entries = {(Path(p).name, kind): detail for p, kind, detail in source.report.entries}
    assert entries == {("a.txt", "class_out_of_range"): "1 box(es): class id(s) [7.0] not in 0..2 (line(s) 2)",
                       ("b.txt", "label_syntax"): "line 2: '1 0.5 oops 0.2 0.2' is not numbers (want: class cx cy "
                                                  "w h)"}


def test_missing_images_and_label_files_are_counted(darknet_root):
    write_lines(darknet_root / "data" / "train.txt", ["data/obj/a.jpg", "", "data/obj/gone.jpg", "data/obj/c.jpg"])
    (darknet_root / "data" / "obj" / "c.txt").unlink()
    with log_lines("detect.data.records.cache") as summary:
        source = open_split("data/obj.data")
    assert [Path(r.path).name for r in source.records] == ["a.jpg", "c.jpg"]
    assert len(source.records[1].classes) == 0  # no label file: an image without objects, as in Darknet
    assert dict(source.report.counts) == {"missing": 1, "background": 1}
    entries = {kind: (Path(p).name, detail) for p, kind, detail in source.report.entries}
    assert entries["missing"] == ("gone.jpg", f"listed in {darknet_root}/data/train.txt line 3: file not found")
    assert entries["background"][0] == "c.txt"
    assert summary[0].startswith("obj train: 2 images, 1 boxes; skipped images: 1 missing; dropped boxes: none; "
                                 "converted/fixed: none; info: 1 background")


def test_pjreddie_layout_images_to_labels(tmp_path, monkeypatch):
    root = tmp_path / "dk"
    write_images(root / "data" / "obj" / "images", labels=root / "data" / "obj" / "labels")
    write_lines(root / "data" / "train.txt", [f"{root}/data/obj/images/{s}.jpg" for s in STEMS])  # absolute
    write_lines(root / "data" / "obj.names", ["red", "green", "blue"])
    data = write_obj_data(root / "data" / "obj.data", train="data/train.txt", names="data/obj.names")
    monkeypatch.chdir(root)
    with log_lines("detect.data.formats.darknet_source") as lists:
        source = open_split(data, cache=tmp_path / "cache")
    assert sum(len(r.classes) for r in source.records) == 6
    assert lists == [f"obj train: image paths of {root}/data/train.txt read as absolute paths",
                     "obj train: labels by images/ -> labels/ (pjreddie's Darknet layout: the first images/ or "
                     "JPEGImages/ folder); AlexeyAB's rule finds no label file beside these images, e.g. "
                     f"{root}/data/obj/labels/a.txt"]
    for p in (root / "data" / "obj" / "labels").iterdir():
        p.unlink()
    with pytest.raises(ValueError, match=rf"obj train: 3 image\(s\) listed in {root}/data/train.txt but not one "
                                         rf"label file; for line 1 \({root}/data/obj/images/a.jpg\) Darknet reads "
                                         rf"{root}/data/obj/images/a.txt or {root}/data/obj/labels/a.txt"):
        open_split(data, cache=tmp_path / "cache")


def test_lines_keys_and_content_as_read_data_cfg_reads_them(darknet_root):
    conf = darknet_root / "obj.cfg"  # no .data extension: told by its content
    conf.write_text("# a comment\n; another\n  names=data/obj.names\ntr ain = data/ train.txt\nvalid\n"
                    "train = data/elsewhere.txt\nbatch_size = 4\n")
    with log_lines("detect.data.formats.darknet_data") as lines:
        spec = load_data_spec(conf)
    assert spec.format == "darknet" and spec.train == darknet_root / "data" / "train.txt"  # spaces stripped
    assert spec.val == spec.train and spec.darknet.eval == "voc" and spec.darknet.classes is None
    assert lines[:4] == [
        f"{conf}:5: 'valid' is not `key = value` with a value; skipped (as Darknet skips it)",
        f"{conf}:6: `train` is given again; Darknet reads the first, line 4, and so does this reader: delete one of "
        f"them",
        f"{conf}:7: `batch_size` is no key Darknet's detector reads (classes, train, valid, names, labels, backup, "
        f"eval); ignored (a typo?)",
        f"{conf}: no `valid = ` line: the train list is evaluated, as Darknet's training does; add valid = "
        f"path/to/valid.txt to evaluate images the model does not train on"]
    assert read_class_names(conf) == ["red", "green", "blue"]  # predict --names / --data, export --names
    names = darknet_root / "plain.names"
    names.write_text("cat\ndog\n")
    assert read_class_names(names) == ["cat", "dog"]
    names.write_text("\ufeffcat\r\ndog\r\n")  # saved by Notepad: a BOM, CRLF; read as training reads it
    assert read_class_names(names) == ["cat", "dog"]
    names.write_text("cat\n\ndog\n")
    with pytest.raises(ValueError, match="plain.names:2: line 2 is blank"):
        read_class_names(names)


def test_splits_an_obj_data_has(darknet_root):
    spec = load_data_spec("data/obj.data")
    with pytest.raises(ValueError, match=r"obj.data: a Darknet .data file has no test split \(Darknet reads train= "
                                         r"and valid=\); evaluate its valid list with --split val"):
        spec.images("test")
    write_obj_data(darknet_root / "data" / "val-only.data", valid="data/train.txt", names="data/obj.names")
    spec = load_data_spec("data/val-only.data")
    assert spec.images("val") == darknet_root / "data" / "train.txt" and not spec.has_split("train")
    with pytest.raises(ValueError, match=r"val-only.data: no `train = ` line; add one naming the image list file "
                                         r"of the train split"):
        spec.images("train")
    write_obj_data(darknet_root / "data" / "gone.data", train="data/gone.txt", names="data/obj.names")
    spec = load_data_spec("data/gone.data")  # found missing when the split is opened: val needs no train list
    with pytest.raises(FileNotFoundError, match=r"gone.data:1: train list 'data/gone.txt' not found"):
        spec.images("train")


def test_eval_coco_gives_cocos_ids(darknet_root):
    obj = darknet_root / "data" / "obj"
    for stem, number in zip(STEMS, (42, 9, 1000)):
        (obj / f"{stem}.jpg").rename(obj / f"COCO_val2014_{number:012d}.jpg")
        (obj / f"{stem}.txt").rename(obj / f"COCO_val2014_{number:012d}.txt")
    write_lines(darknet_root / "data" / "val.txt", [f"data/obj/COCO_val2014_{n:012d}.jpg" for n in (42, 9, 1000)])
    write_lines(darknet_root / "data" / "coco.names", [f"c{k}" for k in range(80)])
    write_obj_data(darknet_root / "data" / "coco.data", classes=80, valid="data/val.txt", names="data/coco.names",
                   eval="coco")
    source = open_split("data/coco.data", "val")
    assert source.category_ids == list(COCO_IDS) and source.category_ids[:13] == [*range(1, 12), 13, 14]
    assert [r.image_id for r in source.records] == [42, 9, 1000]
    truth = source.coco_ground_truth()
    assert sorted({a["category_id"] for a in truth.dataset["annotations"]}) == [1, 2]
    assert darknet_coco_image_id("/x/val2014/COCO_val2014_000000000042.jpg") == 42
    assert darknet_coco_image_id("/x/y/000000000139.jpg") == 139


def test_val_and_predict_take_an_obj_data(darknet_root, tmp_path, capsys):
    from detect.predict import main as predict_main
    from detect.val import main as val_main

    weights = write_tiny_checkpoint(tmp_path)  # 3 classes: red, green, blue
    common = ["--weights", str(weights), "--img-size", "64", "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert val_main(["--data", "data/obj.data", "--split", "train", *common, "--workers", "0", "--cache-dir",
                     str(tmp_path / "c"), "--name", "v"]) == 0  # --split train: the obj.data's train= list
    metrics = json.loads((tmp_path / "runs" / "v" / "metrics.json").read_text())
    assert metrics["num_images"] == 3 and sum(c["instances"] for c in metrics["per_class"]) == 6
    write_lines(darknet_root / "data" / "other.names", ["x", "y", "z"])
    write_obj_data(darknet_root / "data" / "other.data", train="data/train.txt", names="data/other.names")
    assert predict_main(["--data", "data/other.data", *common, "--source", "data/obj/a.jpg", "--conf", "0.01",
                         "--name", "p"]) == 0
    found = json.loads((tmp_path / "runs" / "p" / "json" / "a.json").read_text())["detections"]
    assert found and {d["name"] for d in found} <= {"x", "y", "z"}  # the obj.data's names, not the checkpoint's
    write_lines(darknet_root / "data" / "obj.names", ["purple"])  # a class the model lacks (detect.val: by name)
    write_obj_data(darknet_root / "data" / "one.data", train="data/train.txt", names="data/obj.names")
    assert val_main(["--data", "data/one.data", *common, "--workers", "0"]) == 2
    assert "data/one.data's class 0 'purple' is not a class of --weights" in capsys.readouterr().err
    assert predict_main(["--data", "data/one.data", *common, "--source", "data/obj/a.jpg"]) == 2
    assert "1 class names (--data data/one.data) but tiny.pt predicts 3 classes" in capsys.readouterr().err
