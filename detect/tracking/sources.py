"""One tracker per source: frames of several sources (videos, streams, folders of images) may reach the model in
one batch, and each frame's detections must go to its own source's tracks, in that source's frame order.

`TrackerBank(config)` keeps a `SourceTracks` per source key; `bank.update(key, rows)` tracks one frame of that
source. A SourceTracks also keeps what the outputs need beyond the ids: the recent centres of each track (its
trail) and the class each track was seen as most (score-weighted), from which the distinct tracks per class
are counted at the end.
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque

import numpy as np

from .bytetrack import ByteTracker
from .config import TrackerConfig

TRAIL_FRAMES = 30  # how far back a drawn trail reaches


class SourceTracks:
    """The tracks of one source. `update(rows)`: rows [n, 6] (x1, y1, x2, y2, score, class) of its next frame ->
    rows [k, 7] of the detections on a confirmed track: the track's box (Kalman-filtered: steadier than the
    detection's, and closer to the object), the detection's score and class, and the track id."""

    def __init__(self, config: TrackerConfig, fps: float | None = None, trail_frames: int = TRAIL_FRAMES):
        self.tracker = ByteTracker(config, fps)
        self.trail_frames = trail_frames
        self.frames = 0
        self.trails: dict[int, deque] = {}  # id -> (frame, cx, cy) of its last trail_frames frames
        self._votes: dict[int, Counter] = defaultdict(Counter)  # id -> class -> summed score
        self._index: int | None = None  # the source's number of the last frame tracked, when given

    def update(self, rows, index: int | None = None) -> np.ndarray:
        """`index`: the frame's number in its source, where frames may be skipped (a live stream's dropped ones, an
        image that could not be read): the tracks move and age through the gap."""
        rows = np.asarray(rows, np.float64).reshape(-1, 6)
        self.frames += 1
        steps = 1 if index is None or self._index is None else index - self._index
        self._index = index
        found = self.tracker.update(rows[:, :4], rows[:, 4], rows[:, 5].astype(np.int64), steps)
        out = np.concatenate([found.boxes, rows[found.index, 4:6], found.ids[:, None].astype(np.float64)], axis=1)
        for x1, y1, x2, y2, score, k, i in out.tolist():
            self._votes[int(i)][int(k)] += score
            self.trails.setdefault(int(i), deque()).append((self.frames, (x1 + x2) / 2, (y1 + y2) / 2))
        oldest = self.frames - self.trail_frames
        for i in list(self.trails):
            trail = self.trails[i]
            while trail and trail[0][0] <= oldest:
                trail.popleft()
            if not trail:
                del self.trails[i]
        return out

    def track_classes(self) -> dict[int, int]:
        """{track id: the class it was seen as most, by summed score} over every track so far."""
        return {i: votes.most_common(1)[0][0] for i, votes in self._votes.items()}

    def class_counts(self) -> Counter:
        """{class id: distinct tracks of that class}."""
        return Counter(self.track_classes().values())


class TrackerBank:
    """A SourceTracks per source key (any hashable: a file's output name, a stream, a folder), made on the
    key's first frame with that source's frame rate."""

    def __init__(self, config: TrackerConfig, trail_frames: int = TRAIL_FRAMES):
        self.config = config
        self.trail_frames = trail_frames
        self.sources: dict = {}

    def __getitem__(self, key) -> SourceTracks:
        return self.sources[key]

    def __contains__(self, key) -> bool:
        return key in self.sources

    def source(self, key, fps: float | None = None) -> SourceTracks:
        """The tracks of source `key`, made on its first frame with the source's frame rate."""
        if key not in self.sources:
            self.sources[key] = SourceTracks(self.config, fps, self.trail_frames)
        return self.sources[key]

    def update(self, key, rows, fps: float | None = None, index: int | None = None) -> np.ndarray:
        """Track the next frame of source `key` (rows [n, 6]; `index` its number in the source, SourceTracks.update);
        returns its tracked rows [k, 7]."""
        return self.source(key, fps).update(rows, index)

    def summary(self, names: list[str]) -> dict:
        """Distinct tracks per class name, per source and over all: the figures predict prints and writes."""
        total = Counter()
        per_source = []
        for key, tracks in self.sources.items():
            counts = tracks.class_counts()
            total += counts
            per_source.append({"source": str(key), "frames": tracks.frames, "tracks": sum(counts.values()),
                               "per_class": _named(counts, names)})
        return {"tracker": self.config.name, "tracks": sum(total.values()), "per_class": _named(total, names),
                "sources": per_source}


def _named(counts: Counter, names: list[str]) -> dict[str, int]:
    return {(names[k] if 0 <= k < len(names) else str(k)): n for k, n in sorted(counts.items())}


def summary_line(counts: dict[str, int]) -> str:
    """`3 person, 1 car` (distinct tracks), or `no tracks`."""
    return ", ".join(f"{n} {name}" for name, n in counts.items()) or "no tracks"
