"""Detector.track: one tracker per call over a list of frames, a folder of images (in name order) or a video; on a
stand-in detector (exact ids) and with yolov3-tiny on a pan along a coco-tiny street."""

import cv2
import numpy as np
import pytest

from detect.api import Detections, Detector
from tests.support.tracking import RowsPredictor, panned_street, write_frames


def _moving_rows(frames: int) -> list[np.ndarray]:
    """A car (class 2) driving right and a person (class 0) walking down, one frame each."""
    return [np.array([[10 + 5 * f, 40, 50 + 5 * f, 70, 0.9, 2], [100, 10 + 3 * f, 120, 60 + 3 * f, 0.8, 0]])
            for f in range(frames)]


def test_track_a_list_of_frames_on_a_stand_in_detector():
    names = ["person", "bicycle", "car"]
    predictor = RowsPredictor(_moving_rows(6), conf=0.3)
    detector = Detector(predictor, names)
    frames = [np.zeros((120, 160, 3), np.uint8)] * 6
    with detector.track(frames) as stream:
        found = [det for _, det in stream]
    assert all(isinstance(d, Detections) for d in found) and [d.track_ids.tolist() for d in found] == [[1, 2]] * 6
    last = found[-1]
    assert last.labels == ["car", "person"] and last.class_ids.tolist() == [2, 0]
    np.testing.assert_allclose(last.boxes[0], [35, 40, 75, 70], atol=1.5)  # the filtered box, by the detection
    assert last.to_dicts()[1]["track_id"] == 2 and "track_id" not in Detections.from_rows(
        np.zeros((1, 6)), names).to_dicts()[0]
    assert stream.class_counts() == {"person": 1, "car": 1}
    assert predictor.settings.conf == 0.3  # the detector's own settings are untouched ...
    assert stream.detect.settings.conf == 0.1  # ... and the tracking copy keeps boxes down to the low score


def test_track_reads_a_folder_in_name_order(tmp_path):
    order = [3, 0, 4, 1, 2]  # written out of order; frame i is grey level 10 * i
    for i in order:
        cv2.imwrite(str(tmp_path / f"{i:04d}.png"), np.full((60, 80, 3), 10 * i, np.uint8))
    (tmp_path / "notes.txt").write_text("not a frame")
    (tmp_path / "0005.png").write_bytes(b"half a png")  # cannot be decoded: skipped with a warning
    rows = _moving_rows(5)

    class ByContent(RowsPredictor):
        def __call__(self, images):
            return [rows[int(round(image[0, 0, 0] / 10))] for image in images]

    with Detector(ByContent(rows), ["person", "bicycle", "car"]).track(tmp_path, fps=10) as stream:
        seen = [(int(frame[0, 0, 0]), det.track_ids.tolist()) for frame, det in stream]
    assert seen == [(0, [1, 2]), (10, [1, 2]), (20, [1, 2]), (30, [1, 2]), (40, [1, 2])]
    assert stream.stats.dropped == 1
    assert stream.tracks.tracker.max_lost == 10  # 30 frames at 30 fps = 10 frames at 10 fps
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no images to read as a sequence"):
        Detector(ByContent(rows), ["a"]).track(tmp_path / "empty")


@pytest.mark.slow
def test_track_vehicles_along_a_street_with_yolov3_tiny(shared, tmp_path):
    names = [n for n in shared("darknet-cfg", "coco.names").read_text().split("\n") if n]
    detector = Detector.load(shared("weights", "yolov3-tiny.weights"), shared("darknet-cfg", "yolov3-tiny.cfg"),
                             names=names, device="cpu", img_size=320)
    seq = panned_street(shared)
    write_frames(seq, tmp_path / "street")
    with detector.track(tmp_path / "street") as stream:
        found = [det for _, det in stream]
    assert len(found) == 12 and stream.stats.processed == 12
    # the largest car is found in every frame, under one id throughout
    biggest = [d.track_ids[np.argmax(np.prod(d.boxes[:, 2:] - d.boxes[:, :2], axis=1))] for d in found]
    assert len(set(biggest)) == 1
    counts = stream.class_counts()
    assert counts.get("car", 0) >= 2 and sum(counts.values()) <= 10
    assert detector(seq.frames[0]).track_ids is None  # plain calls stay plain


def test_track_takes_frames_as_one_array_and_refuses_a_rate_of_zero():
    rows = _moving_rows(3)
    frames = np.zeros((3, 60, 80, 3), np.uint8)  # [N, H, W, 3], as a call takes a batch
    with Detector(RowsPredictor(rows), ["person", "bicycle", "car"]).track(frames) as stream:
        assert [det.track_ids.tolist() for _, det in stream] == [[1, 2]] * 3
    with pytest.raises(ValueError, match="fps must be a positive frame rate, got 0"):
        Detector(RowsPredictor(rows), ["a"]).track(frames, fps=0)


def test_a_video_opencv_cannot_write_is_one_warning_not_lost_silently(tmp_path):
    from detect.predict.outputs import NoVideo, open_writer
    from tests.support.log_lines import log_lines

    (tmp_path / "clip.mp4").mkdir()  # a folder where the video should go: OpenCV cannot open it
    with log_lines("detect.predict.outputs") as lines:
        writer, size = open_writer(tmp_path / "clip.mp4", 10, np.zeros((60, 80, 3), np.uint8))
    assert isinstance(writer, NoVideo) and size == (80, 60) and "cannot write an mp4v video" in lines[0]
