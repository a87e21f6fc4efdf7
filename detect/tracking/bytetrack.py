"""ByteTrack on stacked arrays: every track's state is a row, so a frame costs a few dozen NumPy calls whatever
the number of objects (no Python object per track, no loop over boxes).

`tracker.update(boxes, scores, classes)` takes one frame's detections (xyxy pixels) and returns which of them
belong to a confirmed track, its id and its box (`Tracked`). Each source needs its own tracker: the state is one
sequence's. See TrackerConfig for the association rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detect.ops.boxes_np import box_iou

from . import kalman
from .assignment import iou_cost, match, unmatched
from .config import TrackerConfig

NEW, TRACKED, LOST = 0, 1, 2


@dataclass(frozen=True)
class Tracked:
    """The detections of a frame that belong to a confirmed track: their row in the frame's detections and
    their track id, in the order of the rows."""

    index: np.ndarray  # int64 [k]
    ids: np.ndarray  # int64 [k]
    boxes: np.ndarray  # float64 [k, 4] xyxy: the track's filtered box (the Kalman state after this detection)

    def __len__(self) -> int:
        return len(self.ids)


class ByteTracker:
    """One sequence's tracks. `fps` scales how long a lost track is kept (config.buffer frames at 30 fps)."""

    def __init__(self, config: TrackerConfig, fps: float | None = None):
        self.config = config
        self.max_lost = config.lost_frames(fps)
        self.frame = 0
        self.next_id = 1
        self.mean = np.zeros((0, 8))
        self.cov = np.zeros((0, 8, 8))
        self.state = np.zeros(0, np.int8)
        self.ids = np.zeros(0, np.int64)  # 0 until confirmed
        self.first = np.zeros(0, np.int64)  # frame of the first sighting
        self.last = np.zeros(0, np.int64)  # frame of the last matched detection
        self.cls = np.zeros(0, np.int64)  # class of the last matched detection

    def __len__(self) -> int:
        """Tracks alive (tracked, lost or waiting for confirmation)."""
        return len(self.state)

    def _high_mask(self, scores: np.ndarray, classes: np.ndarray) -> np.ndarray:
        high = self.config.high
        if isinstance(high, tuple):
            return scores >= np.asarray(high)[np.clip(classes, 0, len(high) - 1)]
        return scores >= high

    def update(self, boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray | None = None,
               steps: int = 1) -> Tracked:
        """Advance to the next frame given, `steps` source frames on (more than 1 where a stream dropped frames:
        the tracks move and age through them), with its detections: boxes float [n, 4] xyxy, scores [n],
        classes int [n]."""
        c = self.config
        first = self.frame == 0
        steps = max(1, int(steps))
        self.frame += steps
        boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
        scores = np.asarray(scores, np.float64).reshape(-1)
        classes = np.zeros(len(scores), np.int64) if classes is None else np.asarray(classes, np.int64)
        usable = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1]) & (scores >= c.low)
        is_high = usable & self._high_mask(scores, classes)
        high = np.flatnonzero(is_high)
        low = np.flatnonzero(usable & ~is_high) if c.second_stage else np.empty(0, np.int64)

        if len(self.state):
            self.mean[self.state == LOST, 6:] = 0  # an unseen track keeps moving but stops growing
            for _ in range(min(steps, self.max_lost + 1)):  # past the buffer every lost track ends anyway
                self.mean, self.cov = kalman.predict(self.mean, self.cov)
        predicted = kalman.cxcywh_to_xyxy(self.mean[:, :4])
        track_rows, det_rows = [], []

        # 1: high-score detections against tracked and lost tracks
        pool = np.flatnonzero(self.state != NEW)
        rows, cols = match(self._cost(pool, predicted, boxes, scores, classes, high), c.match)
        track_rows.append(pool[rows])
        det_rows.append(high[cols])
        left_tracks, left_high = pool[unmatched(len(pool), rows)], high[unmatched(len(high), cols)]

        # 2: low-score detections against the tracks tracked until now and still unmatched
        still = left_tracks[self.state[left_tracks] == TRACKED]
        rows, cols = match(iou_cost(predicted[still], boxes[low]), c.low_match)
        track_rows.append(still[rows])
        det_rows.append(low[cols])
        self.state[still[unmatched(len(still), rows)]] = LOST

        # 3: tracks seen once, against the high-score detections left: a second sighting confirms them
        waiting = np.flatnonzero(self.state == NEW)
        rows, cols = match(self._cost(waiting, predicted, boxes, scores, classes, left_high), c.unconfirmed_match)
        track_rows.append(waiting[rows])
        det_rows.append(left_high[cols])
        unconfirmed_gone = waiting[unmatched(len(waiting), rows)]
        fresh = left_high[unmatched(len(left_high), cols)]

        tracks, dets = np.concatenate(track_rows), np.concatenate(det_rows)
        self._correct(tracks, boxes[dets], classes[dets])
        drop = self._ended(unconfirmed_gone)
        alive = ~drop[tracks]
        tracks, dets = (np.cumsum(~drop) - 1)[tracks[alive]], dets[alive]  # their rows once the ended are gone
        self._keep(~drop)
        born = fresh[scores[fresh] >= c.new_track]
        self._start(boxes[born], classes[born], at_once=first)
        tracks = np.concatenate([tracks, np.arange(len(self.state) - len(born), len(self.state))])
        dets = np.concatenate([dets, born])
        shown = self.ids[tracks] > 0  # confirmed: seen twice, or on the first frame
        order = np.argsort(dets[shown], kind="stable")
        rows = tracks[shown][order]
        return Tracked(dets[shown][order], self.ids[rows], kalman.cxcywh_to_xyxy(self.mean[rows, :4]))

    def _cost(self, tracks, predicted, boxes, scores, classes, dets) -> np.ndarray:
        """The cost of pairing `tracks` with high-score detections `dets`: 1 - IoU (x score), the IoU scaled by
        class_penalty where the detection's class is not the track's."""
        c = self.config
        iou = 1 - iou_cost(predicted[tracks], boxes[dets], scores[dets] if c.fuse_score else None)
        if c.class_penalty != 1:
            iou = iou * np.where(self.cls[tracks][:, None] == classes[dets][None, :], 1.0, c.class_penalty)
        return 1 - iou

    def _correct(self, rows: np.ndarray, boxes: np.ndarray, classes: np.ndarray) -> None:
        """Matched tracks: Kalman update; tracked again; a track seen twice is confirmed and numbered."""
        if not len(rows):
            return
        self.mean[rows], self.cov[rows] = kalman.update(self.mean[rows], self.cov[rows], kalman.xyxy_to_cxcywh(boxes))
        confirming = rows[self.ids[rows] == 0]
        self.ids[confirming] = np.arange(self.next_id, self.next_id + len(confirming))
        self.next_id += len(confirming)
        self.state[rows] = TRACKED
        self.last[rows] = self.frame
        self.cls[rows] = classes

    def _start(self, boxes: np.ndarray, classes: np.ndarray, at_once: bool = False) -> None:
        """New tracks; on the first frame (`at_once`) they are confirmed at once (nothing earlier could confirm
        them)."""
        if not len(boxes):
            return
        mean, cov = kalman.initiate(kalman.xyxy_to_cxcywh(boxes))
        n = len(boxes)
        ids = np.zeros(n, np.int64)
        state = np.full(n, NEW, np.int8)
        if at_once:
            ids = np.arange(self.next_id, self.next_id + n)
            self.next_id += n
            state[:] = TRACKED
        self.mean, self.cov = np.concatenate([self.mean, mean]), np.concatenate([self.cov, cov])
        self.state = np.concatenate([self.state, state])
        self.ids = np.concatenate([self.ids, ids])
        self.first = np.concatenate([self.first, np.full(n, self.frame)])
        self.last = np.concatenate([self.last, np.full(n, self.frame)])
        self.cls = np.concatenate([self.cls, classes])

    def _ended(self, unconfirmed_gone: np.ndarray) -> np.ndarray:
        """Which tracks end this frame: the unconfirmed ones not seen again, the lost ones past the buffer, and of
        a lost and a tracked track that overlap (one object found again under a new track) the younger."""
        drop = np.zeros(len(self.state), bool)
        drop[unconfirmed_gone] = True
        drop |= (self.state == LOST) & (self.frame - self.last > self.max_lost)
        tracked = np.flatnonzero((self.state == TRACKED) & ~drop & (self.ids > 0))
        lost = np.flatnonzero((self.state == LOST) & ~drop)
        if len(tracked) and len(lost):
            boxes = kalman.cxcywh_to_xyxy(self.mean[:, :4])
            pairs = np.argwhere(box_iou(boxes[tracked], boxes[lost]) > self.config.duplicate_iou)
            a, b = tracked[pairs[:, 0]], lost[pairs[:, 1]]
            younger_a = (self.last[a] - self.first[a]) <= (self.last[b] - self.first[b])  # seen for fewer frames
            drop[np.where(younger_a, a, b)] = True
        return drop

    def _keep(self, keep: np.ndarray) -> None:
        if not keep.all():
            self.mean, self.cov, self.state = self.mean[keep], self.cov[keep], self.state[keep]
            self.ids, self.first, self.last = self.ids[keep], self.first[keep], self.last[keep]
            self.cls = self.cls[keep]
