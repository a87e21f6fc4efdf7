"""The pseudo-labelling round trip: detect.predict writes YOLO labels next to a dataset's images, train.py reads
them as a YOLO dataset (a confidence column from --save-conf is ignored and counted)."""

import shutil

import yaml

from detect.data.formats.spec import load_data_spec
from detect.data.loader import open_split
from detect.predict import main as predict_main
from detect.train import main as train_main


def test_predict_labels_train_a_yolo_dataset(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    images = tmp_path / "ds" / "images"
    images.mkdir(parents=True)
    for path in sorted(shared("data", "coco-tiny", "val2017").glob("*.jpg"))[:6]:
        shutil.copy(path, images)
    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    assert predict_main(["--cfg", str(cfg), "--weights", str(weights), "--source", str(images), "--img-size", "320",
                         "--device", "cpu", "--save-txt", "--save-conf", "--project", str(tmp_path / "runs"),
                         "--name", "pl"]) == 0
    shutil.copytree(tmp_path / "runs" / "pl" / "labels", tmp_path / "ds" / "labels")
    lines = sum(len(p.read_text().splitlines()) for p in (tmp_path / "ds" / "labels").glob("*.txt"))
    assert lines >= 6 and all(len(line.split()) == 6 for p in (tmp_path / "ds" / "labels").glob("*.txt")
                              for line in p.read_text().splitlines())
    names = [n for n in shared("darknet-cfg", "coco.names").read_text().splitlines() if n]
    spec = tmp_path / "ds" / "data.yaml"
    spec.write_text(yaml.safe_dump({"path": str(tmp_path / "ds"), "format": "yolo", "train": "images",
                                    "val": "images", "names": names}))
    source = open_split(load_data_spec(spec), "train", tmp_path / "cache")
    assert sum(len(r.classes) for r in source.records) == lines  # every predicted box is a training box
    assert source.report.counts["confidence_column"] == lines
    assert set(source.report.counts) <= {"confidence_column", "clipped"}  # nothing dropped (a box may overshoot)
    assert f"info: {lines} confidence_column" in source.report.summary("pl", len(source.records), lines)
    assert train_main(["--data", str(spec), "--img-size", "128", "--batch-size", "3", "--epochs", "1",
                       "--max-batches", "2", "--workers", "0", "--device", "cpu", "--no-plots",
                       "--project", str(tmp_path / "runs"), "--name", "t"]) == 0
    assert (tmp_path / "runs" / "t" / "last.pt").is_file()
