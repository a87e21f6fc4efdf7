"""Live sources end to end: detect.predict and Detector.stream on an MJPEG stream served on 127.0.0.1 by the test
(tests/mjpeg_server.py), a stream that ends (reconnection, then the counts), and Ctrl-C in a real process."""

import json
import re
import signal
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from detect.api import Detector
from detect.predict import main
from tests.support.mjpeg_server import MjpegServer, coco_frames
from tests.support.signals import sigint_as_in_a_terminal
from tests.support.val_data import NAMES, write_tiny_checkpoint

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
COUNTS = re.compile(r"^stream (\S+): frames read (\d+), processed (\d+), dropped (\d+), reconnects (\d+)(.*)$", re.M)


@pytest.fixture(scope="module")
def frames():
    from tests.conftest import shared_path

    return coco_frames(shared_path("data", "coco-tiny", "val2017"))


def _counts(out: str):
    (match,) = COUNTS.findall(out)
    return (*(int(v) for v in match[1:5]), match[5])


def _video_frames(path) -> tuple[int, int]:
    capture = cv2.VideoCapture(str(path))
    count = 0
    while capture.read()[0]:
        count += 1
    return count, int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))


def _frame_outputs(run, stem: str) -> list[int]:
    """Frame numbers with both a txt and a json (whose record is complete), sorted; asserts no strays."""
    labels = {int(p.stem.rpartition("_")[2]) for p in (run / "labels").glob(f"{stem}_*.txt")}
    records = {int(p.stem.rpartition("_")[2]) for p in (run / "json").glob(f"{stem}_*.json")}
    assert labels == records and not list(run.rglob("*.tmp"))
    for n in records:
        assert json.loads((run / "json" / f"{stem}_{n}.json").read_text())["source"].endswith(f"#{n}")
    return sorted(records)


def _predict_args(weights, url, project, *extra):
    return ["--weights", str(weights), "--source", url, "--img", "64", "--conf", "0.01", "--device", "cpu",
            "--project", str(project), "--name", "live", *extra]


def test_predict_reads_a_live_stream_until_it_stops_for_good(tmp_path, frames, capsys):
    weights = write_tiny_checkpoint(tmp_path)
    with MjpegServer(frames, fps=30, total=20) as server:
        assert main(_predict_args(weights, server.url, tmp_path / "runs", "--retries", "1", "--retry-wait",
                                  "0.2")) == 0
    out = capsys.readouterr().out
    read, processed, dropped, reconnects, note = _counts(out)
    assert read == 20 and processed + dropped == read and processed >= 1 and reconnects == 1 and note == ""
    run = tmp_path / "runs" / "live"
    numbers = _frame_outputs(run, "stream")
    assert len(numbers) == processed and set(numbers) <= set(range(20))  # dropped frames leave gaps
    assert all(f"stream {server.url} frame {n}:" in out for n in numbers)
    record = json.loads((run / "json" / f"stream_{numbers[0]}.json").read_text())
    assert record["width"] == 320 and record["height"] == 240 and record["source"] == f"{server.url}#{numbers[0]}"
    assert all(d["name"] in NAMES for d in record["detections"])
    assert _video_frames(run / "stream.mp4") == (processed, 320)


def test_detector_stream_yields_each_frame_with_its_detections(tmp_path, frames):
    detector = Detector.load(write_tiny_checkpoint(tmp_path), device="cpu", conf=0.01)
    with MjpegServer(frames, fps=30, total=12) as server, detector.stream(server.url, retries=0) as stream:
        seen = [(stream.index, frame, found) for frame, found in stream]
    stats = stream.stats
    assert stats.read == 12 and stats.processed == len(seen) and stats.processed + stats.dropped == 12
    assert [i for i, _, _ in seen] == sorted({i for i, _, _ in seen}) and stats.reconnects == 0
    index, frame, found = seen[-1]
    assert frame.shape == (240, 320, 3) and found.names == NAMES
    again = detector(frame)  # what a frame gets is what the same image gets from the detector
    np.testing.assert_array_equal(found.class_ids, again.class_ids)
    np.testing.assert_allclose(found.boxes, again.boxes, atol=1e-4)


def test_ctrl_c_ends_a_live_run_with_every_output_whole(tmp_path, frames):
    weights = write_tiny_checkpoint(tmp_path)
    run = tmp_path / "runs" / "live"
    with MjpegServer(frames, fps=30) as server:  # endless
        process = subprocess.Popen([sys.executable, "-m", "detect.predict",
                                    *_predict_args(weights, server.url, tmp_path / "runs")],
                                   cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                       preexec_fn=sigint_as_in_a_terminal)
        try:
            deadline = time.monotonic() + 240
            while len(list((run / "json").glob("*.json"))) < 3:
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "predict wrote no frames in time"
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=120)
        finally:
            process.kill()
    assert process.returncode == 130, err
    assert f"interrupted (Ctrl-C): what was written so far is in {run}" in out and "Traceback" not in err
    read, processed, dropped, _, note = _counts(out)
    assert processed + dropped == read
    written = len(_frame_outputs(run, "stream"))
    assert written >= 3 and note == ("" if written == processed else
                                     f" ({processed - written} interrupted before its outputs were written)")
    assert _video_frames(run / "stream.mp4") == (written, 320)  # released: the mp4 plays to its last frame
