"""detect.streams.reader against an MJPEG stream served on 127.0.0.1 by the test (tests/mjpeg_server.py) and a
generated video file. No verdict depends on timing: where frames are dropped, the test waits until the reader has
read more frames before taking the next one, and asserts relations between the counts."""

import socket
import time

import cv2
import numpy as np
import pytest

from detect.streams.reader import (
    FrameReader,
    StreamError,
    describe,
    is_live,
    is_stream,
    open_stream,
    source_stem,
)
from tests.support.log_lines import log_lines
from tests.support.mjpeg_server import MjpegServer, coco_frames, stamp, stamp_of

WAIT_S = 60  # the longest a condition is waited for on a busy machine; a passing run waits far less


@pytest.fixture(scope="module")
def frames():
    from tests.conftest import shared_path

    return coco_frames(shared_path("data", "coco-tiny", "val2017"))


def _wait_until(condition) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the stream did not get there in time"
        time.sleep(0.01)


def test_what_counts_as_a_stream_and_how_it_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert is_stream("0") and is_live("0") and is_stream(1) and source_stem("0") == "webcam0"
    assert is_stream("rtsp://cam/live") and is_live("rtsp://cam/live")
    assert is_live("http://h:8080/video.mjpg") and not is_live("https://h/clips/a.mp4")  # a file over http
    assert is_stream("https://h/clips/a.mp4") and not is_stream("clips/a.mp4") and not is_live("clips/a.mp4")
    (tmp_path / "7").write_bytes(b"")
    assert not is_stream("7")  # a file named like a camera index is a file
    assert source_stem("http://127.0.0.1:5000/live/stream.mjpg") == "stream"
    assert source_stem("rtsp://user:pw@cam.local:554/") == "cam.local"
    assert describe("rtsp://user:secret@cam.local:554/h264") == "rtsp://user:***@cam.local:554/h264"


def test_stamps_survive_jpeg(frames):
    for number in (0, 1, 5, 1234, 4095):
        data = cv2.imencode(".jpg", stamp(frames[0], number), [cv2.IMWRITE_JPEG_QUALITY, 90])[1]
        assert stamp_of(cv2.imdecode(data, cv2.IMREAD_COLOR)) == number


def test_a_video_file_gives_every_frame_in_order(tmp_path, frames):
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (320, 240))
    for number in range(12):
        writer.write(stamp(frames[number % len(frames)], number))
    writer.release()
    with open_stream(path) as reader:
        assert not reader.live and reader.fps == 10
        got = []
        for index, frame in reader:
            time.sleep(0.02)  # a slow model: the thread decodes ahead but never drops a file's frame
            got.append((index, stamp_of(frame)))
    assert got == [(n, n) for n in range(12)]
    assert (reader.stats.read, reader.stats.processed, reader.stats.dropped, reader.stats.reconnects) == (12, 12, 0, 0)


def test_live_stream_newest_frame_wins_and_counts_add_up(frames):
    with MjpegServer(frames, fps=60) as server, open_stream(server.url) as reader:
        assert reader.live
        delivered = []
        for index, frame in reader:
            delivered.append((index, stamp_of(frame)))
            if len(delivered) == 5:
                break
            read_when_taken = reader.stats.read
            _wait_until(lambda: reader.stats.read >= read_when_taken + 3)  # a model busy for 3 frames
        reader.close()
    indices = [i for i, _ in delivered]
    assert [n for _, n in delivered] == indices  # each frame is the one the server numbered so
    assert all(b - a >= 3 for a, b in zip(indices, indices[1:]))  # what came meanwhile was dropped, not queued
    stats = reader.stats
    assert stats.processed == 5 and stats.processed + stats.dropped == stats.read
    assert stats.dropped >= 2 * 4 and stats.reconnects == 0


def test_dropped_stream_reconnects_then_gives_up_with_counts(frames):
    # 3 connections of 5 frames, then the server stops listening
    with MjpegServer(frames, fps=60, per_connection=5, total=15) as server, log_lines("detect.streams.reader") as lines:
        reader = FrameReader(server.url, live=True, retries=2, retry_wait_s=0.2)
        numbers = [stamp_of(frame) for _, frame in reader]
        reader.close()
    stats = reader.stats
    assert stats.read == 15 and stats.processed + stats.dropped == 15 and stats.processed == len(numbers)
    assert numbers == sorted(numbers) and server.connections >= 3
    # two drops came back (a frame read resets the count), the third did not in 2 tries: 4 tries in all
    assert stats.reconnects == 4
    tries = [line for line in lines if "reconnecting in 0.2 s" in line]
    assert [line.split("(try ")[1] for line in tries] == ["1 of 2)", "1 of 2)", "1 of 2)", "2 of 2)"]
    assert tries[0].startswith(f"{server.url}: the stream stopped after 5 frames")
    assert lines[-1] == (f"{server.url}: the stream did not come back after 2 reconnection tries 0.2 s apart; it "
                         f"ends (frames read 15, processed {stats.processed}, dropped {stats.dropped}, reconnects 4)")


def test_a_source_that_cannot_be_opened_is_one_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StreamError, match=rf"^http://127.0.0.1:{port}/x.mjpg: OpenCV cannot open this stream$"):
        open_stream(f"http://127.0.0.1:{port}/x.mjpg", timeout_s=5)
    with pytest.raises(StreamError, match="cannot open this video"):
        open_stream("no/such/clip.mp4")


def test_close_counts_waiting_frames_as_dropped(tmp_path):
    path = tmp_path / "long.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for _ in range(40):
        writer.write(np.zeros((48, 64, 3), np.uint8))
    writer.release()
    reader = open_stream(path)
    next(iter(reader))
    _wait_until(lambda: reader.stats.read >= 5)  # the thread decoded ahead (up to its queue of 4)
    reader.close()
    stats = reader.stats
    assert stats.processed == 1 and stats.read < 40 and stats.read == stats.processed + stats.dropped
