"""Frames of one source read on a thread, for detect.predict and `Detector.stream`.

A source is what OpenCV's VideoCapture opens: a webcam index (`0`), a URL (rtsp://, rtmp://, http(s):// video or
MJPEG, ... through the FFmpeg backend, with open and read timeouts), or a video file. A reader thread decodes
the frames while the model works on the previous one:

- live sources (a webcam, a URL that does not name a video file) deliver frames at their own pace, so the newest
  frame wins: a frame still waiting when the next one arrives is dropped and counted, and the model never works
  through a backlog (its results stay current);
- a video file (or an http(s) URL ending in a video suffix) has every frame processed: the thread decodes at most
  `queue_size` frames ahead and waits for the model.

A live stream that stops (the read fails: the connection closed, or no frame within the read timeout) is
reopened up to `retries` times, `retry_wait_s` apart, each try logged; a frame read resets the count. When no
try brings it back, it ends. `stats` counts frames read, processed (handed to the consumer), dropped and the
reconnection tries; after `close()`, read == processed + dropped (frames still waiting then count as dropped).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import cv2

log = logging.getLogger(__name__)

VIDEO_SUFFIXES = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg")
URL_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "http", "https", "udp", "tcp", "srt")
DEFAULT_RETRIES = 5
DEFAULT_RETRY_WAIT_S = 2.0
DEFAULT_TIMEOUT_S = 10.0  # FFmpeg's open and read timeouts for a URL: a stalled stream counts as stopped
FILE_QUEUE = 4  # frames of a file decoded ahead of the model
DEFAULT_FPS = 25.0  # when the source does not say


class StreamError(ValueError):
    """A source OpenCV cannot open."""


@dataclass
class StreamStats:
    read: int = 0  # frames decoded from the source
    processed: int = 0  # frames handed to the consumer (the model)
    dropped: int = 0  # frames replaced by a newer one before the consumer took them, or left at close()
    reconnects: int = 0  # reconnection tries after the stream stopped

    def line(self) -> str:
        return (f"frames read {self.read}, processed {self.processed}, dropped {self.dropped}, "
                f"reconnects {self.reconnects}")


def is_webcam(source) -> bool:
    """A camera index: an int, or a string of digits that names no file."""
    return isinstance(source, int) or (str(source).isdigit() and not Path(str(source)).exists())


def is_stream(source) -> bool:
    """Whether `source` is opened as a stream (a webcam index or a URL), not looked up as a path."""
    return is_webcam(source) or urlsplit(str(source)).scheme.lower() in URL_SCHEMES


def is_live(source) -> bool:
    """Whether frames come at the source's own pace (the newest wins): a webcam, or a URL other than an http(s)
    URL of a video file (which is read as fast as the model goes, every frame)."""
    if is_webcam(source):
        return True
    parts = urlsplit(str(source))
    if parts.scheme.lower() not in URL_SCHEMES:
        return False
    return not (parts.scheme.lower() in ("http", "https")
                and PurePosixPath(parts.path).suffix.lower() in VIDEO_SUFFIXES)


def describe(source) -> str:
    """The source for messages: `webcam 0`, a URL without its password, or the path."""
    if is_webcam(source):
        return f"webcam {int(source)}"
    if not is_stream(source):
        return str(source)
    parts = urlsplit(str(source))
    if parts.password is not None:
        parts = parts._replace(netloc=f"{parts.username}:***@{parts.netloc.rpartition('@')[2]}")
    return parts.geturl()


def source_stem(source) -> str:
    """A file name for a stream's outputs: webcam<N>, else the last path stem of the URL (else its host), with
    characters other than letters, digits, '.', '_' and '-' replaced by '_'."""
    if is_webcam(source):
        return f"webcam{int(source)}"
    parts = urlsplit(str(source))
    return re.sub(r"[^\w.-]+", "_", PurePosixPath(parts.path).stem or parts.hostname or "stream")


def open_capture(source, timeout_s: float = DEFAULT_TIMEOUT_S) -> cv2.VideoCapture:
    """A VideoCapture of `source` (check isOpened()): URLs through FFmpeg with open and read timeouts."""
    if is_webcam(source):
        return cv2.VideoCapture(int(source))
    if is_stream(source):
        ms = int(timeout_s * 1000)
        return cv2.VideoCapture(str(source), cv2.CAP_FFMPEG,
                                [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms])
    return cv2.VideoCapture(str(source))


class FrameReader:
    """`for index, frame in reader:` BGR frames of one source, read on a thread (module docstring); `index` is
    the frame's number in the source (dropped frames leave gaps). `stats`, `fps`, `name`; `close()` stops the
    thread and releases the source (also as a context manager)."""

    def __init__(self, source, live: bool, retries: int = DEFAULT_RETRIES,
                 retry_wait_s: float = DEFAULT_RETRY_WAIT_S, timeout_s: float = DEFAULT_TIMEOUT_S,
                 queue_size: int = FILE_QUEUE):
        if retries < 0 or retry_wait_s < 0 or timeout_s <= 0 or queue_size < 1:
            raise ValueError(f"retries and retry_wait_s must be 0 or more, timeout_s and queue_size positive; got "
                             f"{retries}, {retry_wait_s}, {timeout_s} and {queue_size}")
        self.source, self.live, self.name = source, live, describe(source)
        self.retries, self.retry_wait_s, self.timeout_s = retries, retry_wait_s, timeout_s
        self.stats = StreamStats()
        self._capacity = 1 if live else queue_size
        self._frames: deque = deque()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._ended, self._error = False, None
        capture = open_capture(source, timeout_s)
        if not capture.isOpened():
            capture.release()
            raise StreamError(f"{self.name}: OpenCV cannot open this " + ("stream" if is_stream(source) else
                                                                          "video"))
        fps = capture.get(cv2.CAP_PROP_FPS)
        self.fps = fps if math.isfinite(fps) and 0 < fps <= 1000 else DEFAULT_FPS
        self._thread = threading.Thread(target=self._read_all, args=(capture,), daemon=True,
                                        name=f"frames {self.name}")
        self._thread.start()

    def _read_all(self, capture: cv2.VideoCapture) -> None:
        failures = 0
        try:
            while not self._stop.is_set():
                ok, frame = capture.read()
                if ok:
                    failures = 0
                    self._publish(frame)
                elif not self.live or self._stop.is_set():
                    break
                elif failures == self.retries:
                    log.warning("%s: the stream did not come back after %d reconnection tries %.1f s apart; it "
                                "ends (%s)", self.name, self.retries, self.retry_wait_s, self.stats.line())
                    break
                else:
                    failures += 1
                    capture = self._reconnect(capture, failures)
        except Exception as e:  # an OpenCV error: raised in the consumer's thread
            self._error = e
        finally:
            capture.release()
            with self._cond:
                self._ended = True
                self._cond.notify_all()

    def _reconnect(self, capture: cv2.VideoCapture, attempt: int) -> cv2.VideoCapture:
        capture.release()
        self.stats.reconnects += 1
        log.warning("%s: the stream stopped after %d frames; reconnecting in %.1f s (try %d of %d)", self.name,
                    self.stats.read, self.retry_wait_s, attempt, self.retries)
        if self._stop.wait(self.retry_wait_s):
            return capture
        capture = open_capture(self.source, self.timeout_s)
        if capture.isOpened():
            log.info("%s: reopened (try %d of %d)", self.name, attempt, self.retries)
        return capture  # one that did not open fails its first read: the next try

    def _publish(self, frame) -> None:
        with self._cond:
            if self.live and self._frames:  # the consumer is still busy: the newest frame wins
                self._frames.clear()
                self.stats.dropped += 1
            while len(self._frames) >= self._capacity and not self._stop.is_set():
                self._cond.wait(0.1)
            if self._stop.is_set():  # after close(): neither read nor dropped
                return
            self._frames.append((self.stats.read, frame))
            self.stats.read += 1
            self._cond.notify_all()

    def __iter__(self):
        while True:
            with self._cond:
                while not self._frames and not self._ended:
                    self._cond.wait(0.1)
                if not self._frames:
                    break
                index, frame = self._frames.popleft()
                self.stats.processed += 1
                self._cond.notify_all()
            yield index, frame
        if self._error is not None:
            raise StreamError(f"{self.name}: reading failed: {self._error}") from self._error

    def close(self) -> None:
        """Stop reading; frames still waiting count as dropped. Returns at once when the thread is blocked in a
        read (it ends within the read timeout and releases the source itself)."""
        with self._cond:
            self._stop.set()
            self.stats.dropped += len(self._frames)
            self._frames.clear()
            self._cond.notify_all()
        self._thread.join(timeout=1.0)

    def __enter__(self) -> FrameReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class FrameStream:
    """(frame, process(frame)) per frame of a FrameReader (`Detector.stream`: process is the detector); `index` is
    the source's number of the last frame given (dropped frames leave gaps), `stats` the reader's counts. Closing
    (the `with` block's end, the loop's end, or `close()`) stops the reader thread."""

    def __init__(self, reader: FrameReader, process):
        self.reader, self.process, self.index = reader, process, -1

    @property
    def stats(self) -> StreamStats:
        return self.reader.stats

    def __iter__(self):
        try:
            for self.index, frame in self.reader:
                yield frame, self.process(frame)
        finally:
            self.reader.close()

    def close(self) -> None:
        self.reader.close()

    def __enter__(self) -> FrameStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_stream(source, *, live: bool | None = None, retries: int = DEFAULT_RETRIES,
                retry_wait_s: float = DEFAULT_RETRY_WAIT_S, timeout_s: float = DEFAULT_TIMEOUT_S) -> FrameReader:
    """A started FrameReader of `source`; `live` None: `is_live(source)`. StreamError when it cannot be opened."""
    return FrameReader(source, is_live(source) if live is None else live, retries, retry_wait_s, timeout_s)
