"""The trackers by name (`--track bytetrack|sort`, `Detector.track(tracker=...)`) and their settings."""

from __future__ import annotations

from dataclasses import dataclass, replace

DEFAULT_TRACKER = "bytetrack"
LOW_SCORE = 0.1  # detections below this are never used, and the detector runs down to it when tracking
REFERENCE_FPS = 30.0  # `buffer` counts frames at this rate; other rates scale it (ByteTrack's convention)


@dataclass(frozen=True)
class TrackerConfig:
    """ByteTrack's association (Zhang et al. 2022): high-score detections first, against every track, on IoU x
    score; then the low-score ones, on IoU alone, against the tracks still unmatched (an occluded object's
    faint box keeps its track alive); then tracks born last frame, which are confirmed by a second sighting.

    `high` is a threshold for all classes or one per class id: a detection at or above it is high; one in
    [`low`, high) is low and only extends tracks (when `second_stage`). A detection that matches nothing starts a
    track when its score reaches `new_track`. Costs are 1 - IoU (x score when `fuse_score`), matched up to the
    limits `match`, `low_match` and `unconfirmed_match`. A track unseen for more than `buffer` frames (at
    REFERENCE_FPS) ends. A track seen but not yet confirmed has no id; ids count from 1 in the order tracks are
    confirmed, per tracker."""

    name: str = DEFAULT_TRACKER
    high: float | tuple[float, ...] = 0.25
    low: float = LOW_SCORE
    new_track: float = 0.25
    match: float = 0.8
    low_match: float = 0.5
    unconfirmed_match: float = 0.7
    fuse_score: bool = True
    second_stage: bool = True
    buffer: int = 30
    # a high-score detection of another class than the track's counts at this share of its overlap: objects of
    # two classes that cross keep their ids, and a detector's passing class flip still continues the track
    class_penalty: float = 0.5
    duplicate_iou: float = 0.85  # a lost track this close to a tracked one is the same object: the younger goes

    def __post_init__(self):
        highs = self.high if isinstance(self.high, tuple) else (self.high,)
        if not 0 <= self.low <= min(highs) or max(highs) > 1:  # a class at 1 is never high: never tracked
            raise ValueError(f"tracker thresholds must satisfy 0 <= low <= high <= 1, got low {self.low} and high "
                             f"{self.high}")
        if self.buffer < 0:
            raise ValueError(f"tracker buffer must be 0 or more frames, got {self.buffer}")

    def lost_frames(self, fps: float | None) -> int:
        """Frames a lost track is kept at `fps` (None: REFERENCE_FPS): ByteTrack's int(fps / 30 x buffer), at least
        one frame unless `buffer` is 0 (a track ends at its first miss)."""
        if self.buffer == 0:
            return 0
        return max(1, int(self.buffer * (fps or REFERENCE_FPS) / REFERENCE_FPS))

    def with_high(self, high: float | tuple[float, ...]) -> TrackerConfig:
        """This tracker with the detection thresholds of a model (one for all, or one per class): a detection
        kept at the model's threshold is high, and a new track needs at least the lowest of them."""
        lowest = min(high) if isinstance(high, tuple) else high
        return replace(self, high=high, new_track=max(lowest, self.low), low=min(self.low, lowest))


TRACKERS = {
    "bytetrack": TrackerConfig(),
    # SORT's association within the same code: one stage, high-score detections only, IoU alone (ByteTrack's
    # limits and buffer, not SORT's own max_age 1 / min_hits 3 / IoU 0.3)
    "sort": TrackerConfig(name="sort", second_stage=False, fuse_score=False),
}


def tracker_config(name: str) -> TrackerConfig:
    """The settings of the tracker called `name`; ValueError listing the names there are."""
    if name not in TRACKERS:
        raise ValueError(f"unknown tracker {name!r}; choose one of {', '.join(TRACKERS)}")
    return TRACKERS[name]
