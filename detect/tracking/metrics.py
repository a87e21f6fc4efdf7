"""HOTA, MOTA and IDF1 of tracking results against MOT ground truth, computed by TrackEval (the MOTChallenge
reference code, from PyPI's `trackeval`), fed here directly instead of through its folder layouts, after the
ground truth's rules (`Protocol`):
- MOTChallenge's MOT16/17 and MOT20 sequences (named MOT17-02-..., as their seqinfo.ini says): TrackEval's own
  preprocessing. Only pedestrians (class 1) with conf 1 are scored; a tracked box matched (Hungarian on IoU >= 0.5,
  over every ground-truth box of the frame) to a distractor (person on vehicle 2, static person 7, distractor 8,
  reflection 12; and non-motorised vehicle 6 in MOT20) is removed; any other tracked box that matches nothing
  scored is a false positive, also on an unscored car. The tracker is fed the model's person class only.
- Any other sequence (your own, every class tracked): class-agnostic; a ground-truth box with conf 0 is an ignore
  region, which removes the tracked box matched to it the same way, and every other box is scored.
Boxes are compared by IoU; ids are relabelled per sequence. Sequences combine as TrackEval combines them (counts
summed, HOTA from the summed association figures).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import asdict, dataclass

import numpy as np

from detect.ops.boxes_np import box_iou

from .assignment import INSTALL_HINT
from .mot import MotRows

IGNORE_MATCH_IOU = 0.5


@dataclass(frozen=True)
class Protocol:
    """Which ground-truth boxes are scored, and which absorb the tracked box they match (module docstring)."""

    name: str
    scored_class: int | None  # the only class scored (MOTChallenge: 1, pedestrian); None: every class
    distractors: tuple[int, ...] | None  # classes that absorb a matched tracked box; None: the conf-0 boxes do

    def rules(self, gt: MotRows) -> tuple[np.ndarray, np.ndarray]:
        """(scored, absorbing) masks over the ground-truth rows of a frame."""
        if self.distractors is None:
            return gt.conf != 0, gt.conf == 0
        classes = gt.classes if gt.classes is not None else np.full(len(gt), -1)
        return (gt.conf != 0) & (classes == self.scored_class), np.isin(classes, self.distractors)


CLASS_AGNOSTIC = Protocol("class-agnostic, conf-0 boxes ignored", None, None)
MOT17 = Protocol("MOTChallenge MOT16/17: pedestrians, distractors removed", 1, (2, 7, 8, 12))
MOT20 = Protocol("MOTChallenge MOT20: pedestrians, distractors removed", 1, (2, 6, 7, 8, 12))


def protocol_for(sequence_name: str) -> Protocol:
    """MOTChallenge's rules for its benchmarks' sequences (MOT16-02, MOT17-04-FRCNN, MOT20-01), else class-agnostic."""
    match = re.match(r"MOT(16|17|20)-\d\d", sequence_name)
    if match is None:
        return CLASS_AGNOSTIC
    return MOT20 if match.group(1) == "20" else MOT17


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


def sequence_data(truth: MotRows, tracks: MotRows, frames: list[int], protocol: Protocol = CLASS_AGNOSTIC) -> dict:
    """TrackEval's per-sequence input: per frame the ids of both sides and their IoU, `protocol`'s rules applied."""
    solver = importlib.import_module("scipy.optimize").linear_sum_assignment
    gt_ids, tracker_ids, similarity = [], [], []
    for frame in frames:
        gt, found = truth.at(frame), tracks.at(frame)
        iou = box_iou(gt.boxes, found.boxes)
        scored, absorbing = protocol.rules(gt)
        if absorbing.any() and len(found):
            candidates = np.where(iou >= IGNORE_MATCH_IOU - 1e-9, iou, 0.0)
            rows, cols = solver(-candidates)
            hit = candidates[rows, cols] > 0
            drop = cols[hit & absorbing[rows]]
            keep = np.ones(len(found), bool)
            keep[drop] = False
            found, iou = found.take(keep), iou[:, keep]
        gt_ids.append(gt.ids[scored])
        tracker_ids.append(found.ids)
        similarity.append(iou[scored])
    gt_ids, num_gt_ids = _relabel(gt_ids)
    tracker_ids, num_tracker_ids = _relabel(tracker_ids)
    return {"gt_ids": gt_ids, "tracker_ids": tracker_ids, "similarity_scores": similarity,
            "num_gt_ids": num_gt_ids, "num_tracker_ids": num_tracker_ids, "num_timesteps": len(frames),
            "num_gt_dets": int(sum(len(i) for i in gt_ids)), "num_tracker_dets": int(sum(len(i) for i in tracker_ids))}


def evaluate_sequence(truth: MotRows, tracks: MotRows, frames: list[int] | None = None,
                      protocol: Protocol = CLASS_AGNOSTIC) -> dict:
    """TrackEval's raw results of one sequence ({metric name: its fields}) under `protocol`; `frames` defaults to
    every frame either side has."""
    if frames is None:
        frames = sorted(set(truth.frames.tolist()) | set(tracks.frames.tolist()))
    data = sequence_data(truth, tracks, frames, protocol)
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
