"""Exports of annotation tools given to --data as they were unzipped, each in the exact layout the tool writes:
CVAT "YOLO 1.1" (obj.data, obj.names, train.txt of `data/obj_train_data/x.jpg`), Label Studio's YOLO export
(classes.txt, images/, labels/) and Roboflow's Pascal VOC export (train/, valid/, each .jpg beside its .xml)."""

from pathlib import Path

import cv2
import numpy as np
import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec
from tests.support.log_lines import log_lines

SIZE = 64


def write_image(path: Path, grey: int = 80) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert cv2.imwrite(str(path), np.full((SIZE, SIZE, 3), grey, np.uint8))


def write_voc_xml(path: Path, objects) -> None:
    """Roboflow's VOC xml: <size>, and per object <name> and a 0-based-looking <bndbox> (read as VOC's)."""
    boxes = "".join(f"<object><name>{name}</name><pose>Unspecified</pose><truncated>0</truncated><difficult>0"
                    f"</difficult><occluded>0</occluded><bndbox><xmin>{x1}</xmin><xmax>{x2}</xmax><ymin>{y1}</ymin>"
                    f"<ymax>{y2}</ymax></bndbox></object>" for name, x1, y1, x2, y2 in objects)
    path.write_text(f"<annotation><folder></folder><filename>{path.stem}.jpg</filename><path>{path.stem}.jpg</path>"
                    f"<source><database>roboflow.com</database></source><size><width>{SIZE}</width><height>{SIZE}"
                    f"</height><depth>3</depth></size><segmented>0</segmented>{boxes}</annotation>")


@pytest.fixture
def cvat_export(tmp_path):
    """CVAT's YOLO 1.1 zip unzipped into tmp/task_7-yolo: paths in obj.data and train.txt start with data/."""
    root = tmp_path / "task_7-yolo"
    for stem, rows in (("frame_000000", ["0 0.5 0.5 0.25 0.25"]), ("frame_000001", ["1 0.25 0.25 0.2 0.2",
                                                                                    "0 0.75 0.75 0.2 0.2"])):
        write_image(root / "obj_train_data" / f"{stem}.jpg")
        (root / "obj_train_data" / f"{stem}.txt").write_text("\n".join(rows) + "\n")
    (root / "obj.names").write_text("car\nperson\n")
    (root / "obj.data").write_text("classes = 2\ntrain = data/train.txt\nnames = data/obj.names\nbackup = backup/\n")
    (root / "train.txt").write_text("data/obj_train_data/frame_000000.jpg\ndata/obj_train_data/frame_000001.jpg\n")
    return root


@pytest.mark.parametrize("given", ["obj.data", "folder"])
def test_a_cvat_yolo_export_reads_where_it_was_unzipped(cvat_export, tmp_path, monkeypatch, given):
    monkeypatch.chdir(tmp_path)  # not Darknet's folder: before, `data/obj.names` was found nowhere
    spec = load_data_spec(cvat_export / "obj.data" if given == "obj.data" else cvat_export)
    assert spec.format == "darknet" and spec.names == ("car", "person")
    with log_lines("detect.data.formats.darknet_source") as lines:
        source = open_source(spec, "val", tmp_path / "cache")  # no valid=: the train list, as Darknet
    assert [Path(r.path).name for r in source.records] == ["frame_000000.jpg", "frame_000001.jpg"]
    assert [r.classes.tolist() for r in source.records] == [[0], [1, 0]]
    np.testing.assert_allclose(source.records[1].boxes, [[9.6, 9.6, 22.4, 22.4], [41.6, 41.6, 54.4, 54.4]],
                               atol=1e-4)
    assert "their leading data/ read as that folder" in lines[0]


def test_a_label_studio_yolo_export_folder(tmp_path):
    root = tmp_path / "project-3-at-2026"
    for stem, grey in (("1a2b3c-cat", 50), ("4d5e6f-dog", 90)):
        write_image(root / "images" / f"{stem}.jpg", grey)
    (root / "labels").mkdir()
    (root / "labels" / "1a2b3c-cat.txt").write_text("0 0.5 0.5 0.5 0.5\n")
    (root / "labels" / "4d5e6f-dog.txt").write_text("1 0.5 0.25 0.25 0.5\n")
    (root / "classes.txt").write_text("cat\ndog\n")
    (root / "notes.json").write_text('{"categories": [{"id": 0, "name": "cat"}, {"id": 1, "name": "dog"}]}')
    with log_lines("detect.data.formats.export_folders") as lines:
        spec = load_data_spec(root)
    assert (spec.format, spec.names, spec.train, spec.val) == ("yolo", ("cat", "dog"), root / "images",
                                                               root / "images")
    assert lines[0].startswith(f"{root}: a Label Studio YOLO export has one set of images, used as both the train "
                               f"and the val split")
    source = open_source(spec, "val", tmp_path / "cache")
    assert [r.classes.tolist() for r in source.records] == [[0], [1]]
    np.testing.assert_allclose(source.records[1].boxes, [[24, 0, 40, 32]], atol=1e-4)


@pytest.fixture
def roboflow_voc(tmp_path):
    root = tmp_path / "Kangaroos.v1i.voc"
    for split, stems in (("train", ("00001_jpg.rf.a1", "00002_jpg.rf.b2")), ("valid", ("00003_jpg.rf.c3",))):
        (root / split).mkdir(parents=True)
        for i, stem in enumerate(stems):
            write_image(root / split / f"{stem}.jpg", 40 + 30 * i)
            write_voc_xml(root / split / f"{stem}.xml", [("kangaroo", 10, 12, 40, 50)])
    (root / "README.roboflow.txt").write_text("Kangaroos - v1\n")
    return root


def test_a_roboflow_voc_export_folder_and_its_split_folders(roboflow_voc, tmp_path):
    spec = load_data_spec(roboflow_voc)
    assert spec.format == "voc" and (spec.voc.train, spec.voc.val) == (("train",), ("valid",))
    train, val = (open_source(spec, s, tmp_path / "cache") for s in ("train", "val"))
    assert [Path(r.path).name for r in train.records] == ["00001_jpg.rf.a1.jpg", "00002_jpg.rf.b2.jpg"]
    assert [Path(r.path).name for r in val.records] == ["00003_jpg.rf.c3.jpg"]
    assert val.names == ["kangaroo"]
    np.testing.assert_allclose(val.records[0].boxes, [[9, 11, 40, 50]])  # VOC's 1-based inclusive pixels
    one = load_data_spec(roboflow_voc / "valid")  # a split folder alone: both splits
    assert [Path(r.path).name for r in open_source(one, "val", tmp_path / "cache").records] == [
        "00003_jpg.rf.c3.jpg"]


def test_a_yaml_spec_of_a_roboflow_voc_split_folder_is_voc(roboflow_voc, tmp_path):
    (roboflow_voc / "kangaroo.yaml").write_text("train: train\nval: valid\n")  # no `format`: told by the files
    spec = load_data_spec(roboflow_voc / "kangaroo.yaml")
    assert spec.format == "voc"
    assert len(open_source(spec, "train", tmp_path / "cache").records) == 2


def test_a_folder_that_is_no_export_says_what_one_holds(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"--data .*/empty: a folder, but not one of the exports read as they "
                                         r"lie: a Darknet .data file \(CVAT YOLO 1.1's obj.data\)"):
        load_data_spec(tmp_path / "empty")
