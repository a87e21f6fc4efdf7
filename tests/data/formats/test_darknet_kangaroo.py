"""Kangaroo (../shared, Pascal VOC) copied into Darknet's layout (data/obj/images + data/obj/labels, train.txt and
valid.txt, obj.names, obj.data) reads box for box as the project's VOC spec reads it, trains with train.py,
evaluates with detect.val to the VOC spec's numbers, and labels detect.predict's detections."""

import json

import numpy as np
import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec
from tests.conftest import ROOT, shared_path
from tests.support.darknet_trees import darknet_copy
from tests.support.training import QUIET_HYP


@pytest.fixture(scope="module")
def kangaroo(tmp_path_factory):
    """(Darknet folder, its obj.data, the VOC spec of the same data, cache folder); the copy lists each split in
    the order the VOC spec reads it, so evaluation batches the same images together."""
    root = shared_path("data", "kangaroo")
    work = tmp_path_factory.mktemp("kangaroo")
    voc = work / "kangaroo.yaml"
    voc.write_text((ROOT / "data" / "kangaroo.yaml").read_text().replace("path: ../shared/data/kangaroo",
                                                                          f"path: {root}"))
    spec = load_data_spec(voc)
    splits = {"train": open_source(spec, "train", work / "cache"), "valid": open_source(spec, "val", work / "cache")}
    darknet = work / "darknet"
    obj_data = darknet_copy(splits, list(spec.names), darknet)
    (work / "hyp.yaml").write_text(QUIET_HYP)
    return darknet, obj_data, voc, work


@pytest.fixture
def in_darknet(kangaroo, monkeypatch):
    """Run from the Darknet folder, as Darknet does: obj.data's paths are relative to it."""
    monkeypatch.chdir(kangaroo[0])
    monkeypatch.setenv("DETECT_CACHE", str(kangaroo[3] / "cache"))
    return kangaroo


def test_obj_data_boxes_are_the_voc_specs(in_darknet):
    _, _, voc, work = in_darknet
    for split in ("train", "val"):
        from_voc = open_source(load_data_spec(voc), split, work / "cache")
        from_darknet = open_source(load_data_spec("data/obj.data"), split, work / "cache")
        assert from_darknet.names == from_voc.names == ["kangaroo"]
        assert len(from_darknet.records) == len(from_voc.records) == {"train": 132, "val": 32}[split]
        for a, b in zip(from_darknet.records, from_voc.records):
            assert (a.path.rsplit("/", 1)[1], a.width, a.height, a.image_id) == \
                   (b.path.rsplit("/", 1)[1], b.width, b.height, b.image_id)
            assert a.classes.tolist() == b.classes.tolist() and not b.difficult.any()
            np.testing.assert_array_equal(a.boxes, b.boxes)
        assert dict(from_darknet.report.counts) == dict(from_voc.report.counts)  # val: 00090.jpg truncated


@pytest.fixture(scope="module")
def trained(kangaroo):
    """train.py on the obj.data: one short epoch of yolo-mini at 64 px (its 4 classes become kangaroo's 1)."""
    from detect.train import main as train_main

    darknet, _, _, work = kangaroo
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(darknet)
        mp.setenv("OMP_NUM_THREADS", "1")
        code = train_main(["--data", "data/obj.data", "--cfg", str(ROOT / "cfg" / "yolo-mini.cfg"), "--hyp",
                           str(work / "hyp.yaml"), "--img-size", "64", "--batch-size", "8", "--nbs", "8", "--epochs",
                           "1", "--max-batches", "3", "--workers", "0", "--device", "cpu", "--no-plots",
                           "--project", str(work / "runs"), "--name", "train", "--cache-dir", str(work / "cache")])
    return code, work / "runs" / "train"


@pytest.mark.slow
def test_train_py_trains_on_the_obj_data(trained):
    import torch

    code, run = trained
    assert code == 0 and (run / "last.pt").is_file()
    checkpoint = torch.load(run / "last.pt", weights_only=True)
    assert checkpoint["names"] == ["kangaroo"]
    assert "classes=1" in checkpoint["cfg_text"].replace(" ", "") and "classes=4" not in checkpoint["cfg_text"]


def _evaluate(data, weights, work, name, *extra):
    from detect.val import parse_args, run

    return run(parse_args(["--data", str(data), "--weights", str(weights), "--device", "cpu", "--workers", "0",
                           "--batch-size", "8", "--project", str(work / "runs"), "--name", name, "--save-json",
                           *extra]))


@pytest.mark.slow
def test_val_on_the_obj_data_gives_the_voc_specs_numbers(in_darknet, trained, shared):
    _, _, voc, work = in_darknet
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    # COCO's yolov3-tiny, every class scored as one (kangaroos are found as animals): numbers well above zero
    coco = ["--cfg", str(cfg), "--img-size", "320", "--single-cls"]
    darknet = _evaluate("data/obj.data", weights, work, "dk", *coco)
    reference = _evaluate(voc, weights, work, "voc", *coco)
    assert darknet.num_images == reference.num_images == 32 and darknet.map50 > 0.2
    np.testing.assert_array_equal(darknet.stats, reference.stats)
    rows = [json.loads((work / "runs" / n / "results.json").read_text()) for n in ("dk", "voc")]
    assert rows[0] == rows[1]
    # the checkpoint train.py wrote from the obj.data: the same on both specs too
    last = trained[1] / "last.pt"
    own = [_evaluate(data, last, work, f"own-{i}", "--img-size", "64") for i, data in enumerate(("data/obj.data",
                                                                                                   voc))]
    np.testing.assert_array_equal(own[0].stats, own[1].stats)


@pytest.mark.slow
def test_predict_labels_the_obj_datas_images(in_darknet, trained, capsys):
    from detect.predict import main as predict_main

    darknet, _, _, work = in_darknet
    images = sorted((darknet / "data" / "obj" / "images").iterdir())[:3]
    assert predict_main(["--data", "data/obj.data", "--weights", str(trained[1] / "last.pt"), "--source",
                         "data/obj/images/0000[1-3].jpg", "--img-size", "64", "--conf", "0.001", "--device", "cpu",
                         "--project", str(work / "runs"), "--name", "predict"]) == 0
    out = work / "runs" / "predict"
    assert sorted(p.name for p in (out / "labels").iterdir()) == [f"{p.stem}.txt" for p in images]
    found = [d for p in images for d in json.loads((out / "json" / f"{p.stem}.json").read_text())["detections"]]
    assert {d["name"] for d in found} <= {"kangaroo"}
    assert "image 3/3" in capsys.readouterr().out
