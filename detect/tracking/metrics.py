"""HOTA, MOTA and IDF1 of tracking results against MOT ground truth, computed by TrackEval (the MOTChallenge
reference code, from PyPI's `trackeval`), fed here directly instead of through its folder layouts.

The protocol is MOTChallenge's, class-agnostic: a ground-truth box with conf 0 is an ignore region, and a
tracked box matched to one (Hungarian on IoU >= 0.5, as TrackEval matches distractors) is removed before
scoring; boxes are compared by IoU; ids are relabelled per sequence. Sequences combine as TrackEval combines
them (counts summed, HOTA from the summed association figures).
"""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass

import numpy as np

from detect.ops.boxes_np import box_iou

from .assignment import INSTALL_HINT
from .mot import MotRows

IGNORE_MATCH_IOU = 0.5


@dataclass(frozen=True)
class TrackingScores:
    """The summary figures (fractions, not percentages) and counts of one sequence or a combination."""

    hota: float  # mean over IoU thresholds 0.05 .. 0.95 of sqrt(DetA x AssA)
    deta: float
    assa: float
    mota: float  # 1 - (FN + FP + IDSW) / ground-truth boxes
    motp: float
    idf1: float  # 2 IDTP / (2 IDTP + IDFP + IDFN), ids matched once over the whole sequence
    id_switches: int
    false_positives: int
    false_negatives: int
    gt_boxes: int
    gt_ids: int
    tracked_boxes: int
    tracked_ids: int

    def as_dict(self) -> dict:
        return asdict(self)


def _metrics():
    try:
        module = importlib.import_module("trackeval.metrics")
    except ImportError as e:
        raise ValueError(f"tracking metrics need TrackEval ({e}); install the track extra: {INSTALL_HINT}") from None
    quiet = {"PRINT_CONFIG": False}
    return module.HOTA(), module.CLEAR(dict(quiet)), module.Identity(dict(quiet)), module.Count()


def _relabel(ids_per_frame: list[np.ndarray]) -> tuple[list[np.ndarray], int]:
    """Ids renumbered 0..n-1 over the sequence (TrackEval indexes arrays by id), and n."""
    every = np.unique(np.concatenate(ids_per_frame)) if ids_per_frame else np.zeros(0, np.int64)
    return [np.searchsorted(every, ids) for ids in ids_per_frame], len(every)


def sequence_data(truth: MotRows, tracks: MotRows, frames: list[int]) -> dict:
    """TrackEval's per-sequence input: per frame the ids of both sides and their IoU, ignore regions applied."""
    solver = importlib.import_module("scipy.optimize").linear_sum_assignment
    gt_ids, tracker_ids, similarity = [], [], []
    for frame in frames:
        gt, found = truth.at(frame), tracks.at(frame)
        iou = box_iou(gt.boxes, found.boxes)
        ignored = gt.conf == 0
        if ignored.any() and len(found):
            candidates = np.where(iou >= IGNORE_MATCH_IOU - 1e-9, iou, 0.0)
            rows, cols = solver(-candidates)
            hit = candidates[rows, cols] > 0
            drop = cols[hit & ignored[rows]]
            keep = np.ones(len(found), bool)
            keep[drop] = False
            found, iou = MotRows(found.frames[keep], found.ids[keep], found.boxes[keep], found.conf[keep]), iou[:, keep]
        gt_ids.append(gt.ids[~ignored])
        tracker_ids.append(found.ids)
        similarity.append(iou[~ignored])
    gt_ids, num_gt_ids = _relabel(gt_ids)
    tracker_ids, num_tracker_ids = _relabel(tracker_ids)
    return {"gt_ids": gt_ids, "tracker_ids": tracker_ids, "similarity_scores": similarity,
            "num_gt_ids": num_gt_ids, "num_tracker_ids": num_tracker_ids, "num_timesteps": len(frames),
            "num_gt_dets": int(sum(len(i) for i in gt_ids)), "num_tracker_dets": int(sum(len(i) for i in tracker_ids))}


def evaluate_sequence(truth: MotRows, tracks: MotRows, frames: list[int] | None = None) -> dict:
    """TrackEval's raw results of one sequence ({metric name: its fields}); `frames` defaults to every frame
    either side has."""
    if frames is None:
        frames = sorted(set(truth.frames.tolist()) | set(tracks.frames.tolist()))
    data = sequence_data(truth, tracks, frames)
    return {type(m).__name__: m.eval_sequence(data) for m in _metrics()}


def combine(results: list[dict]) -> dict:
    """Sequences' raw results combined as TrackEval combines them."""
    return {type(m).__name__: m.combine_sequences({str(i): r[type(m).__name__] for i, r in enumerate(results)})
            for m in _metrics()}


def scores(raw: dict) -> TrackingScores:
    """The summary of raw results (one sequence's or combined)."""
    hota, clear, identity, count = raw["HOTA"], raw["CLEAR"], raw["Identity"], raw["Count"]
    return TrackingScores(
        hota=float(np.mean(hota["HOTA"])), deta=float(np.mean(hota["DetA"])), assa=float(np.mean(hota["AssA"])),
        mota=float(clear["MOTA"]), motp=float(clear["MOTP"]), idf1=float(identity["IDF1"]),
        id_switches=int(clear["IDSW"]), false_positives=int(clear["CLR_FP"]), false_negatives=int(clear["CLR_FN"]),
        gt_boxes=int(count["GT_Dets"]), gt_ids=int(count["GT_IDs"]), tracked_boxes=int(count["Dets"]),
        tracked_ids=int(count["IDs"]))
