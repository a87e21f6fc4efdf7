"""`python -m detect.predict` on a real coco-tiny image and on a short generated video."""

import json

import cv2
import numpy as np
import torch

from detect.boxes import box_iou
from detect.predict import main

BUS_IMAGE = "000000359937.jpg"


def _args(shared, source, tmp_path, *extra):
    return ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")),
            "--weights", str(shared("weights", "yolov3-tiny.weights")),
            "--names", str(shared("darknet-cfg", "coco.names")), "--source", str(source),
            "--device", "cpu", "--project", str(tmp_path / "runs"), *extra]


def _annotated_buses(shared) -> torch.Tensor:
    data = json.loads(shared("data", "coco-tiny", "annotations", "instances_val2017.json").read_text())
    image_id = next(im["id"] for im in data["images"] if im["file_name"] == BUS_IMAGE)
    bus = next(c["id"] for c in data["categories"] if c["name"] == "bus")
    boxes = [a["bbox"] for a in data["annotations"] if a["image_id"] == image_id and a["category_id"] == bus]
    return torch.tensor([[x, y, x + w, y + h] for x, y, w, h in boxes])


def test_predict_finds_the_bus_in_a_real_image(shared, tmp_path, capsys):
    image = shared("data", "coco-tiny", "val2017", BUS_IMAGE)
    assert main(_args(shared, image, tmp_path)) == 0
    assert "bus" in capsys.readouterr().out
    run = tmp_path / "runs" / "exp"
    record = json.loads((run / "json" / "000000359937.json").read_text())
    buses = torch.tensor([d["box_xyxy"] for d in record["detections"] if d["name"] == "bus"])
    assert len(buses) >= 1
    assert box_iou(buses, _annotated_buses(shared)).max() > 0.5
    rows = np.loadtxt(run / "labels" / "000000359937.txt", ndmin=2)  # class cx cy w h conf, normalised
    assert rows.shape == (len(record["detections"]), 6)
    assert ((rows[:, 1:5] >= 0) & (rows[:, 1:5] <= 1)).all() and (rows[:, 5] >= 0.25).all()
    drawn = cv2.imread(str(run / BUS_IMAGE))
    assert drawn.shape == (record["height"], record["width"], 3)


def test_predict_on_a_generated_video(shared, tmp_path, capsys):
    frame = cv2.imread(str(shared("data", "coco-tiny", "val2017", BUS_IMAGE)))
    frame = cv2.resize(frame, (320, 240))
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (320, 240))
    assert writer.isOpened()
    for shift in range(4):
        writer.write(np.roll(frame, 8 * shift, axis=1))
    writer.release()
    assert main(_args(shared, video, tmp_path, "--img", "320")) == 0
    out = capsys.readouterr().out
    assert out.count("frame ") == 4 and "bus" in out
    run = tmp_path / "runs" / "exp"
    capture = cv2.VideoCapture(str(run / "clip.mp4"))
    frames = 0
    while capture.read()[0]:
        frames += 1
    capture.release()
    assert frames == 4
    for k in range(4):
        names = [d["name"] for d in json.loads((run / "json" / f"clip_{k}.json").read_text())["detections"]]
        assert "bus" in names


def test_predict_reports_a_missing_source(shared, tmp_path, capsys):
    assert main(_args(shared, tmp_path / "nothing.jpg", tmp_path)) == 2
    assert "nothing.jpg" in capsys.readouterr().err


def test_predict_rejects_names_of_another_class_count(shared, tmp_path, capsys):
    names = tmp_path / "three.names"
    names.write_text("a\nb\nc\n")
    args = _args(shared, shared("data", "coco-tiny", "val2017", BUS_IMAGE), tmp_path)
    args[args.index("--names") + 1] = str(names)
    assert main(args) == 2
    assert "3 classes" in capsys.readouterr().err
