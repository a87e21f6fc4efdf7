"""detect.predict --track with yolov3-tiny on a pan along a coco-tiny street: a video made with cv2.VideoWriter
(--save-mot, ids in labels and json, tracks.json), the same frames as a live MJPEG stream, two folders sharing
batches (each its own tracker), and the flag errors."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from detect.data.formats.yolo_labels import parse_label_text
from detect.predict import main
from tests.support.mjpeg_server import MjpegServer
from tests.support.tracking import panned_street, write_frames, write_video

MOT_LINE = re.compile(r"^(\d+),(\d+),(-?\d+\.\d\d),(-?\d+\.\d\d),(\d+\.\d\d),(\d+\.\d\d),(0\.\d{4}),-1,-1,-1$")


def _model(shared) -> list[str]:
    return ["--cfg", str(shared("darknet-cfg", "yolov3-tiny.cfg")), "--weights",
            str(shared("weights", "yolov3-tiny.weights")), "--names", str(shared("darknet-cfg", "coco.names")),
            "--img", "320", "--device", "cpu"]


@pytest.mark.slow
def test_track_a_video_with_mot_output(shared, tmp_path, capsys):
    video = write_video(panned_street(shared), tmp_path / "street.mp4")
    assert main(_model(shared) + ["--source", str(video), "--track", "--save-mot", "--save-conf",
                                  "--project", str(tmp_path / "runs"), "--name", "v"]) == 0
    run = tmp_path / "runs" / "v"
    lines = (run / "mot" / "street.txt").read_text().splitlines()
    parsed = [MOT_LINE.match(line) for line in lines]
    assert lines and all(parsed), lines[:3]
    frames = [int(m.group(1)) for m in parsed]
    assert min(frames) == 1 and max(frames) <= 12 and frames == sorted(frames)  # 1-based, in order
    # frame 1's boxes are the video's frame 0 outputs: the same boxes, scores and ids in json and labels
    first = [m for m in parsed if m.group(1) == "1"]
    record = json.loads((run / "json" / "street_0.json").read_text())["detections"]
    assert [d["track_id"] for d in record] == [int(m.group(2)) for m in first]
    x1, y1 = record[0]["box_xyxy"][:2]
    assert abs(x1 - float(first[0].group(3))) < 0.02 and abs(y1 - float(first[0].group(4))) < 0.02
    labels = np.loadtxt(run / "labels" / "street_0.txt", ndmin=2)
    assert labels.shape[1] == 7 and labels[:, 6].tolist() == [d["track_id"] for d in record]  # conf, then id
    # train.py reads those lines back as the same boxes (not as triangles)
    for path in sorted((run / "labels").glob("*.txt")):
        written = np.loadtxt(path, ndmin=2)
        classes, cxcywh = parse_label_text(path.read_text())
        assert classes.tolist() == written[:, 0].tolist() and np.allclose(cxcywh, written[:, 1:5]), path.name
    summary = json.loads((run / "tracks.json").read_text())
    ids = {int(m.group(2)) for m in parsed}
    assert summary["tracker"] == "bytetrack" and summary["tracks"] == len(ids) == max(ids)  # ids 1..n
    assert summary["per_class"].get("car", 0) >= 2 and summary["sources"][0]["frames"] == 12
    out = capsys.readouterr().out
    assert "tracks street: " in out and f"({len(ids)} tracks over 12 frames)" in out


@pytest.mark.slow
def test_track_a_live_stream(shared, tmp_path, capsys):
    seq = panned_street(shared)
    with MjpegServer(seq.frames, fps=10, total=12) as server:
        assert main(_model(shared) + ["--source", server.url, "--retries", "0", "--track", "--save-mot",
                                      "--project", str(tmp_path / "runs"), "--name", "live"]) == 0
    out = capsys.readouterr().out
    run = tmp_path / "runs" / "live"
    lines = (run / "mot" / "stream.txt").read_text().splitlines()
    assert lines and all(MOT_LINE.match(line) for line in lines)
    written = sorted(int(p.stem.rpartition("_")[2]) for p in (run / "json").glob("stream_*.json"))
    # MOT frames are the stream's frame numbers + 1 (a dropped frame leaves a gap in both)
    assert {int(line.split(",")[0]) for line in lines} <= {n + 1 for n in written}
    assert "tracks stream: " in out and json.loads((run / "tracks.json").read_text())["tracks"] >= 2


@pytest.mark.slow
def test_two_folders_in_shared_batches_keep_their_own_tracks(shared, tmp_path):
    seq = panned_street(shared, length=5)
    for folder in ("a", "b"):  # the same five frames twice: batches of 4 hold a's last frame and b's first three
        write_frames(seq, tmp_path / "src" / folder)
    assert main(_model(shared) + ["--source", str(tmp_path / "src"), "--recursive", "--batch", "4", "--track",
                                  "--save-mot", "--project", str(tmp_path / "runs"), "--name", "two"]) == 0
    run = tmp_path / "runs" / "two"
    a, b = ((run / "mot" / f"{k}.txt").read_text() for k in "ab")
    assert a and a == b  # b's tracker starts fresh: the same frames give the same ids and boxes
    record = json.loads((run / "json" / "b" / "0000.json").read_text())["detections"]
    assert sorted(d["track_id"] for d in record) == list(range(1, len(record) + 1))
    summary = json.loads((run / "tracks.json").read_text())
    assert [s["source"] for s in summary["sources"]] == ["a", "b"]
    assert summary["sources"][0]["per_class"] == summary["sources"][1]["per_class"]


def test_track_flag_errors(tmp_path, capsys):
    for flags, message in ((["--save-mot"], "--save-mot writes tracks: add --track"),
                           (["--track", "deepsort"], "invalid choice: 'deepsort'")):
        with pytest.raises(SystemExit) as stop:
            main(["--weights", "x.pt", "--source", str(tmp_path), *flags])
        assert stop.value.code == 2 and message in capsys.readouterr().err


def test_drawn_frames_show_the_trails_of_this_frames_tracks_only():
    from collections import deque

    from detect.predict.tracks import draw_tracks, track_colour

    image = np.zeros((120, 200, 3), np.uint8)
    trails = {1: deque([(1, 20.0, 60.0), (2, 40.0, 60.0)]), 2: deque([(1, 150.0, 100.0), (2, 170.0, 100.0)])}
    rows = np.array([[30.0, 40.0, 50.0, 80.0, 0.9, 0.0, 1.0]])  # track 2 was missed in this frame
    out = draw_tracks(image, rows, ["thing"], trails)
    assert (out == track_colour(1)).all(-1).any()
    assert not (np.abs(out[90:110, 140:180].astype(int) - track_colour(2)).sum(-1) < 30).any()


def test_an_unreadable_image_is_a_gap_and_sources_of_one_name_stay_apart(tmp_path, capsys):
    from detect.data.records.images import BadImage
    from detect.predict.inputs import Input
    from detect.predict.tracks import Tracking
    from detect.tracking.config import TrackerConfig

    tracking = Tracking(TrackerConfig(), tmp_path, ["thing"], "data", save_mot=True)
    image = np.zeros((64, 64, 3), np.uint8)
    box = np.array([[10.0, 10.0, 30.0, 30.0, 0.9, 0.0]])
    unreadable = BadImage("undecodable", "not an image")
    items = [(Input(Path(f"data/{name}.jpg"), f"{name}.jpg", name), unreadable if name in ("000003", "000005")
              else image) for name in ("000001", "000002", "000003", "000004", "000005")]
    for (item, _), frame in zip(items, tracking.frames(items)):
        if frame.image is not None:  # predict skips an unreadable image; its tracker never sees it
            tracking.image(item, frame, box)[2]()
    frames = [int(line.split(",")[0]) for line in (tmp_path / "mot" / "data.txt").read_text().splitlines()]
    assert frames == [1, 2, 4]  # not 1, 2, 3
    # a video data/data.mp4 beside the images of data/: its own tracker and its own MOT file
    assert tracking.video_key("data") == "data-2" and tracking.video_key("data") == "data-2"
    tracking.frame(tracking.video_key("data"), box, image, index=0)
    tracking.frame(tracking.video_key("data"), box, image, index=3)  # a stream's frames 1 and 2 were dropped
    assert tracking.bank["data"].frames == 3 and tracking.bank["data"].tracker.frame == 4
    sources = tracking.finish()["sources"]
    assert [(s["source"], s["frames"], s["dropped"]) for s in sources] == [("data", 3, 2), ("data-2", 2, 2)]
    out = capsys.readouterr().out
    assert "tracks data: 1 thing (1 tracks over 3 frames, 2 dropped)" in out
    assert json.loads((tmp_path / "tracks.json").read_text())["sources"][0]["dropped"] == 2
    # the images a glob names are one sequence, "images"
    glob_tracking = Tracking(TrackerConfig(), tmp_path, ["thing"], "data/*.jpg")
    item = Input(Path("data/a.jpg"), "a.jpg", "a")
    glob_tracking.image(item, next(glob_tracking.frames([(item, image)])), box)
    assert "images" in glob_tracking.bank


@pytest.mark.parametrize("kind", ["folder", "video"])
def test_ctrl_c_ends_a_tracking_run_with_its_tracks_written(tmp_path, kind):
    """SIGINT once a few frames are written (a real process): the tracks so far are printed and in tracks.json,
    the MOT file and the frames' outputs are whole, the video plays, exit 130 with one line and no traceback."""
    import signal
    import subprocess
    import sys
    import time

    import cv2

    from tests.support.signals import sigint_as_in_a_terminal
    from tests.support.val_data import write_tiny_checkpoint

    frames = []  # far more frames than are processed before the signal, however busy the machine
    for i in range(1000):
        frame = np.full((48, 64, 3), 40, np.uint8)
        cv2.rectangle(frame, (i % 40, 10), (i % 40 + 20, 30), (0, 200, 0), -1)
        frames.append(frame)
    if kind == "folder":
        source = tmp_path / "clip"
        source.mkdir()
        for i, frame in enumerate(frames):
            cv2.imwrite(str(source / f"{i:05d}.png"), frame)
    else:
        source = tmp_path / "clip.mp4"
        writer = cv2.VideoWriter(str(source), cv2.VideoWriter_fourcc(*"mp4v"), 25, (64, 48))
        for frame in frames:
            writer.write(frame)
        writer.release()
    run = tmp_path / "runs" / "t"
    root = Path(__file__).resolve().parents[2]
    with open(tmp_path / "out.txt", "w") as out, open(tmp_path / "err.txt", "w") as err:  # no pipe to fill up
        process = subprocess.Popen([sys.executable, "-m", "detect.predict", "--weights",
                                    str(write_tiny_checkpoint(tmp_path)), "--source", str(source), "--img", "64",
                                    "--conf", "0.01", "--device", "cpu", "--track", "--save-mot", "--project",
                                    str(tmp_path / "runs"), "--name", "t"], cwd=root, stdout=out, stderr=err,
                                   preexec_fn=sigint_as_in_a_terminal)
        try:
            deadline = time.monotonic() + 240
            while len(list((run / "json").glob("*.json"))) < 3:  # a few frames written: mid-run
                assert process.poll() is None, (tmp_path / "err.txt").read_text()
                assert time.monotonic() < deadline, "predict wrote no frames in time"
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            process.wait(timeout=120)
        finally:
            process.kill()
    stdout, stderr = (tmp_path / "out.txt").read_text(), (tmp_path / "err.txt").read_text()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert stdout.splitlines()[-1] == f"interrupted (Ctrl-C): what was written so far is in {run}"
    written = len(list((run / "json").glob("*.json")))
    assert 3 <= written < 1000 and not list(run.rglob("*.tmp"))
    summary = json.loads((run / "tracks.json").read_text())
    (source_summary,) = summary["sources"]
    assert source_summary["source"] == "clip" and source_summary["frames"] in (written, written + 1)
    assert "tracks clip: " in stdout and f"tracks over {source_summary['frames']} frames" in stdout
    lines = (run / "mot" / "clip.txt").read_text().splitlines()
    assert lines and all(MOT_LINE.match(line) for line in lines)
    assert max(int(line.split(",")[0]) for line in lines) <= written  # frames from 1
    if kind == "video":  # released: the mp4 plays to its last written frame
        capture = cv2.VideoCapture(str(run / "clip.mp4"))
        count = 0
        while capture.read()[0]:
            count += 1
        assert count == written
        assert re.search(rf"video 1/1 {re.escape(str(source))}: frames read \d+, processed \d+", stdout)
