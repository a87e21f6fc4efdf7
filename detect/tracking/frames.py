"""The frames of one source tracked in order (`Detector.track`): a video file, a webcam or a stream URL through
detect.streams.reader, or a sequence of images (a folder's, sorted by name, or a list of paths or arrays) read
like one.

`TrackStream` gives (frame, what `convert` makes of its tracked rows) per frame, like `FrameStream` gives
detections, with the source's own tracker (SourceTracks) inside: `class_counts()` at the end.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from detect.data.images import IMAGE_SUFFIXES, BadImage, read_image
from detect.streams.reader import FrameStream, StreamStats, is_stream

from .sources import SourceTracks

log = logging.getLogger(__name__)


def image_files(folder: str | Path) -> list[Path]:
    """The images directly in `folder`, sorted by name (frame order); FileNotFoundError when there are none."""
    folder = Path(folder)
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"{folder}: no images to read as a sequence ({', '.join(IMAGE_SUFFIXES)})")
    return files


def is_image_sequence(source) -> bool:
    """A folder, or a list or tuple of images (paths or arrays): read as frames in order."""
    return isinstance(source, (list, tuple)) or (not is_stream(source) and Path(str(source)).is_dir())


class ImageFrames:
    """`for index, frame in frames:` the images of a folder (sorted) or of a list, in order, as BGR arrays, with
    what a FrameReader has (name, fps, stats, close). An image that cannot be decoded is skipped, named in a
    warning and counted as dropped (as a stream's lost frame: its index is missing from the frames)."""

    def __init__(self, source, fps: float | None = None):
        self.items = list(source) if isinstance(source, (list, tuple)) else image_files(source)
        self.name = f"{len(self.items)} images" if isinstance(source, (list, tuple)) else str(source)
        self.fps, self.stats = fps, StreamStats()

    def __iter__(self):
        for index, item in enumerate(self.items):
            if isinstance(item, np.ndarray):
                frame = item
            else:
                try:
                    frame = read_image(item)
                except BadImage as e:
                    log.warning("skipped frame %d of %s: %s: %s", index, self.name, item, e.detail)
                    self.stats.dropped += 1
                    continue
            self.stats.read += 1
            self.stats.processed += 1
            yield index, frame

    def close(self) -> None:
        pass


class TrackStream(FrameStream):
    """(frame, convert(tracked rows [k, 7])) per frame of `reader`; `detect([frame])` gives a frame's rows [n, 6]
    (a Predictor), which the source's tracker (`tracks`) follows."""

    def __init__(self, reader, detect, tracks: SourceTracks, convert=lambda rows: rows, names=None):
        super().__init__(reader, self._track)
        self.detect, self.tracks, self.convert, self.names = detect, tracks, convert, names

    def _track(self, frame: np.ndarray):
        # the frame's number in its source: frames a live stream dropped (or an unreadable image) are a gap the
        # tracks move through
        return self.convert(self.tracks.update(np.asarray(self.detect([frame])[0]), self.index))

    def class_counts(self) -> dict:
        """{class name (class id without names): distinct tracks of it} so far, each track counted as the class
        it was seen as most."""
        counts = sorted(self.tracks.class_counts().items())
        return {(self.names[k] if self.names else k): n for k, n in counts}
