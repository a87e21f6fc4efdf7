"""The frames of a source, numbered, with one rule for a frame that has no image: the frame loop of
`detect.predict --track` (videos, streams, folders of images), `Detector.track` (frames.TrackStream) and
`detect.val --track` (MOTChallenge sequences) all go through `read_frames`.

`read_frames` yields `Frame(number, image, source)`: `number` is the frame's number in its source (a video's or a
stream's frame index, an image's place in its folder or list, a MOTChallenge frame number), `image` the BGR frame
or None where there is none to see: an image that cannot be decoded (one warning names it) or a MOTChallenge
frame of seqLength without an image file. Either is counted as dropped.

The rule (`track_frame`): a frame without an image never reaches the tracker. It is a gap, as the frames a live
stream dropped are: the next frame's number tells the tracker how many frames went by, and the tracks move and
age through them. A scored frame in the gap has its ground truth missed (detect.tracking.evaluate).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from detect.data.records.images import BadImage, read_image
from detect.streams.reader import StreamStats

from .mot import Sequence

log = logging.getLogger(__name__)


class Frame(NamedTuple):
    number: int  # the frame's number in its source
    image: np.ndarray | None  # BGR; None: a gap (unreadable, or no image of this number)
    source: str  # the source's name: a file, a folder, a stream, a sequence


def read_frames(items: Iterable[tuple[int, object, str]], stats: StreamStats | None = None) -> Iterator[Frame]:
    """(number, image, source) -> Frame per item, in order. `image`: a BGR array (as is), a path (read here; one
    that cannot be decoded is named in a warning), a BadImage (decoding failed where the caller read it, which
    said so) or None (no image of this number). `stats` counts the frames read (and handed on) and dropped."""
    for number, item, source in items:
        image = item
        if isinstance(item, (str, Path)):
            try:
                image = read_image(item)
            except BadImage as e:
                log.warning("frame %d of %s, %s: %s; a gap the tracks age through", number, source, item, e.detail)
                image = None
        elif isinstance(item, BadImage):
            image = None
        if stats is not None:
            if image is None:
                stats.dropped += 1
            else:
                stats.read += 1
                stats.processed += 1
        yield Frame(number, image, source)


def sequence_items(seq: Sequence) -> Iterator[tuple[int, Path | None, str]]:
    """The (number, image path or None, name) of a MOTChallenge sequence for read_frames: frames 1..seqLength
    (None where no image has the number). Without a seqLength the numbers of the files may be anything
    (timestamps): the frames are its images, numbered by their place 1, 2, ... as a folder's images are
    (`seq.frames[number - 1]` holds the file's own number)."""
    if seq.length:
        paths = dict(seq.frames)
        return ((number, paths.get(number), seq.name) for number in range(1, seq.length + 1))
    return ((place, path, seq.name) for place, (_, path) in enumerate(seq.frames, 1))


def in_batches(frames: Iterable[Frame], size: int) -> Iterator[list[Frame]]:
    """Consecutive frames, `size` at a time (the last batch may be shorter)."""
    batch = []
    for frame in frames:
        batch.append(frame)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def detect_batch(detect, frames: list[Frame]) -> list[np.ndarray | None]:
    """The rows [n, 6] `detect` (a Predictor) finds in each frame with an image, in one call; None for a gap."""
    images = [f.image for f in frames if f.image is not None]
    found = iter(detect(images) if images else [])
    return [None if f.image is None else np.asarray(next(found)).reshape(-1, 6) for f in frames]


def track_frame(tracks, frame: Frame, rows) -> np.ndarray | None:
    """The frame's tracked rows [k, 7] from `tracks` (a SourceTracks), told the frame's number; None for a frame
    without an image, which the tracker never sees (the next frame's number spans the gap)."""
    if frame.image is None:
        return None
    return tracks.update(rows, frame.number)
