"""The frames of one source tracked in order (`Detector.track`): a video file, a webcam or a stream URL through
detect.streams.reader, or a sequence of images (a folder's, sorted by name, or a list of paths or arrays) read
like one, frame by frame through frame_source.read_frames (numbered in the source; an unreadable image is a gap).

`TrackStream` gives (frame, what `convert` makes of its tracked rows) per frame, like `FrameStream` gives
detections, with the source's own tracker (SourceTracks) inside: `class_counts()` at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from detect.data.records.images import IMAGE_SUFFIXES
from detect.streams.reader import FrameStream, StreamStats, is_stream

from .frame_source import Frame, read_frames, track_frame
from .sources import SourceTracks


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
    """The images of a folder (sorted) or of a list (paths or arrays), in order, as the frames of one source, with
    what a FrameReader has (name, fps, stats, close). `items()`: (place, path or array, name) per image, for
    frame_source.read_frames; iterating gives (place, BGR frame) of the readable ones (an image that cannot be
    decoded is named in a warning, counted as dropped, and its place is missing from the frames)."""

    def __init__(self, source, fps: float | None = None):
        self.images = list(source) if isinstance(source, (list, tuple)) else image_files(source)
        self.name = f"{len(self.images)} images" if isinstance(source, (list, tuple)) else str(source)
        self.fps, self.stats = fps, StreamStats()

    def items(self):
        return ((place, item, self.name) for place, item in enumerate(self.images))

    def __iter__(self):
        return ((f.number, f.image) for f in read_frames(self.items(), self.stats) if f.image is not None)

    def close(self) -> None:
        pass


def source_frames(reader) -> Iterator[Frame]:
    """The frames of an ImageFrames or a FrameReader through frame_source.read_frames, numbered in the source (a
    live stream's dropped frames, an unreadable image: gaps)."""
    if isinstance(reader, ImageFrames):
        return read_frames(reader.items(), reader.stats)
    return read_frames((index, image, reader.name) for index, image in reader)  # the reader counts its own


class TrackStream(FrameStream):
    """(frame, convert(tracked rows [k, 7])) per frame of `reader` (an ImageFrames or a FrameReader) that has an
    image; `detect([frame])` gives a frame's rows [n, 6] (a Predictor), which the source's tracker (`tracks`)
    follows, told each frame's number (frame_source.track_frame: a frame without an image is a gap)."""

    def __init__(self, reader, detect, tracks: SourceTracks, convert=lambda rows: rows, names=None):
        super().__init__(reader, None)
        self.detect, self.tracks, self.convert, self.names = detect, tracks, convert, names

    def __iter__(self):
        try:
            for frame in source_frames(self.reader):
                rows = track_frame(self.tracks, frame, None if frame.image is None else
                                   np.asarray(self.detect([frame.image])[0]))
                if rows is not None:
                    self.index = frame.number
                    yield frame.image, self.convert(rows)
        finally:
            self.reader.close()

    def class_counts(self) -> dict:
        """{class name (class id without names): distinct tracks of it} so far, each track counted as the class
        it was seen as most."""
        counts = sorted(self.tracks.class_counts().items())
        return {(self.names[k] if self.names else k): n for k, n in counts}
