"""detect.predict on a real coco-tiny image, on a generated video, and its input errors."""

import json

import cv2
import numpy as np
import pytest
import torch

from detect.data.spec import read_class_names as read_names
from detect.predict import main
from tests.test_val import NAMES, write_tiny_checkpoint


def test_predict_coco_tiny_image_finds_people(shared, tmp_path, capsys):
    image = shared("data", "coco-tiny", "val2017", "000000005001.jpg")  # a crowd of people
    args = ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--source", str(image),
            "--names", str(shared("darknet-cfg", "coco.names")), "--device", "cpu",
            "--project", str(tmp_path), "--name", "one"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "image 1/1" in out and "person" in out and " ms)" in out
    run = tmp_path / "one"
    annotated = cv2.imread(str(run / image.name))
    assert annotated.shape == cv2.imread(str(image)).shape
    rows = [line.split() for line in (run / "labels" / f"{image.stem}.txt").read_text().splitlines()]
    assert len(rows) >= 5 and all(len(r) == 6 for r in rows)
    values = np.array(rows, dtype=np.float64)
    assert (values[:, 0] == 0).sum() >= 5  # class 0 = person
    assert ((values[:, 1:5] >= 0) & (values[:, 1:5] <= 1)).all() and (values[:, 5] > 0.25).all()
    record = json.loads((run / "json" / f"{image.stem}.json").read_text())
    assert len(record["detections"]) == len(rows) and record["detections"][0]["name"] == "person"
    h, w = annotated.shape[:2]
    x1, y1, x2, y2 = record["detections"][0]["box_xyxy"]
    assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h


def _write_video(path, frames=4, size=(80, 64)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 5, size)
    assert writer.isOpened()
    for i in range(frames):
        frame = np.full((size[1], size[0], 3), 114, np.uint8)
        cv2.rectangle(frame, (5 + 8 * i, 10), (35 + 8 * i, 40), (0, 0, 255), -1)
        writer.write(frame)
    writer.release()


def test_predict_generated_video(tmp_path, capsys):
    video = tmp_path / "clip.mp4"
    _write_video(video)
    weights = write_tiny_checkpoint(tmp_path)
    args = ["--weights", str(weights), "--source", str(video), "--img", "64", "--conf", "0.01", "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--name", "vid"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert [f"frame {i}:" in out for i in range(4)] == [True] * 4
    run = tmp_path / "runs" / "vid"
    capture = cv2.VideoCapture(str(run / "clip.mp4"))
    count = 0
    while capture.read()[0]:
        count += 1
    assert count == 4 and capture.get(cv2.CAP_PROP_FRAME_WIDTH) == 80
    for i in range(4):
        record = json.loads((run / "json" / f"clip_{i}.json").read_text())
        assert record["width"] == 80 and record["height"] == 64
        lines = (run / "labels" / f"clip_{i}.txt").read_text().splitlines()
        assert len(lines) == len(record["detections"])
        assert all(d["name"] in NAMES for d in record["detections"])


def test_predict_folder_and_glob(tmp_path, capsys):
    folder = tmp_path / "imgs"
    folder.mkdir()
    for i in range(2):
        cv2.imwrite(str(folder / f"p{i}.png"), np.full((40, 60, 3), 60 * i, np.uint8))
    (folder / "notes.txt").write_text("not an image")
    weights = write_tiny_checkpoint(tmp_path)
    base = ["--weights", str(weights), "--img", "64", "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert main(base + ["--source", str(folder), "--name", "dir"]) == 0
    assert sorted(p.name for p in (tmp_path / "runs" / "dir" / "labels").iterdir()) == ["p0.txt", "p1.txt"]
    assert main(base + ["--source", str(folder / "p1.*"), "--name", "glob"]) == 0
    assert [p.name for p in (tmp_path / "runs" / "glob" / "labels").iterdir()] == ["p1.txt"]
    assert "image 2/2" in capsys.readouterr().out


def test_predict_input_errors(tmp_path, capsys):
    weights = write_tiny_checkpoint(tmp_path)
    names = tmp_path / "two.names"
    names.write_text("a\nb\n")
    assert read_names(names) == ["a", "b"]
    image = tmp_path / "x.png"
    cv2.imwrite(str(image), np.zeros((32, 32, 3), np.uint8))
    base = ["--weights", str(weights), "--img", "64", "--device", "cpu", "--project", str(tmp_path / "runs")]
    assert main(base + ["--source", str(image), "--names", str(names)]) == 2
    assert "lists 2 classes but the model predicts 3" in capsys.readouterr().err
    assert main(base + ["--source", str(tmp_path / "nothing*.jpg")]) == 2
    assert "nothing*.jpg" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="missing.names"):
        read_names(tmp_path / "missing.names")


class _RecordingModel:
    """Stands in for a Darknet model: records its input and detects nothing."""

    max_stride = 32

    def __init__(self):
        self.inputs = []

    def __call__(self, x):
        self.inputs.append(x)
        return torch.zeros((x.shape[0], 10, 6))


def test_predict_letterboxes_like_val():
    """The same canvas as detect.val's rect (or --square) evaluation, with the image at long side --img."""
    from detect.data.samplers import eval_batches
    from detect.predict import detect

    image = np.full((300, 500, 3), 200, np.uint8)
    for square, expected in ((False, eval_batches(np.array([[500, 300]]), 1, 200, 32, rect=True)[1][0]),
                             (True, (224, 224))):
        model = _RecordingModel()
        det = detect(model, image, 200, "cpu", 0.25, 0.45, 300, square=square)
        assert det.shape == (0, 6)
        x = model.inputs[0]
        assert tuple(x.shape[2:]) == tuple(expected)
        # the image at long side 200 in the middle, the rest the pad value
        rows = (x[0, 0] * 255).round().eq(200).any(1).nonzero().flatten()
        assert len(rows) == 120 and x.dtype == torch.float32
