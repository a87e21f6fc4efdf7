"""What one image's detections say about each of its labels, and which detections no label accounts for.

Inputs are one image's labels (xyxy pixels, classes, VOC `difficult`), its crowd regions (COCO `iscrowd`) and the
model's detections [n, 6] (x1, y1, x2, y2, confidence, class) with each detection's calibrated probability of
being right (detect.audit.calibration). Per label:
- `confirm`: the best same-class probability among detections at IoU >= 0.5: the model sees this very object;
  `confirm_conf` the same detections' best raw confidence (a faint one is not none, though both calibrate to ~0);
- `other`, `other_det`: the best other-class probability at IoU >= 0.5: the model sees the box as another class;
- `shifted`, `shifted_det`: the best same-class probability at `window_low` <= IoU < 0.5, from a detection that
  confirms no other label of the class and overlaps no other more: the model sees the object, but elsewhere or
  of another extent;
- `anything`: the best probability of any detection at IoU >= `window_low`: whether anything is seen there;
  `seen_conf` the same detections' best raw confidence (down to the detection floor, 0.001), scaled by IoU / 0.5
  below the match IoU (seen_confidence).
A detection no label overlaps at IoU 0.5 (and no crowd region covers) is a candidate for a missing label; the
chance that a nearby unconfirmed same-class label explains it instead (the label is misplaced, not absent) is
`explained`.

A box the model also looked at closely (detect.audit.close_look: a crop about it, magnified) is judged on the image's
detections and its own crop's together; another box's crop does not count for it. The detection rows the evidence
points at (`other_det`, `shifted_det`) index `AuditImage.evidence_rows()`: the image's detections, then the crops'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from detect.audit.calibration import size_bucket
from detect.evaluation.matching import match_image
from detect.evaluation.per_image import ImageTruth
from detect.ops.boxes_np import box_iou

MATCH_IOU = 0.5  # COCO's AP50 rule: a detection at this IoU is the labelled object
WINDOW_LOW = 0.1  # a same-class detection overlapping a label less than this is about another object


@dataclass
class AuditImage:
    """One image of the split as the audit reads it."""

    index: int  # the record's position in the split
    boxes: np.ndarray  # float [m, 4] xyxy pixels: the labels
    classes: np.ndarray  # int [m]
    difficult: np.ndarray  # bool [m]: VOC difficult, evaluated as ignored; never flagged
    crowd: np.ndarray  # float [c, 4]: COCO crowd regions (any class); detections inside them are no finds
    crowd_classes: np.ndarray  # int [c]
    detections: np.ndarray  # float [n, 6]
    longer_side: int  # the image's longer side in pixels (for the size as the network sees it)
    opinion: np.ndarray | None = None  # float [k, 6]: a second model's detections, its own classes (--second-opinion)
    # the closer looks (detect.audit.close_look): the boxes looked at [c, 4], and what the model found in each crop
    # [l, 7] (image pixels, score, class, the crop's row in look_boxes)
    look_boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    looked: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))
    name: str = ""  # the image's file name: what the simulated errors are drawn from, whatever the split's order

    def evidence_rows(self) -> np.ndarray:
        """[n + l, 6] the detections the evidence reads: the image's, then its closer looks'."""
        return np.concatenate([self.detections.reshape(-1, 6), self.looked[:, :6]]) if len(self.looked) \
            else self.detections

    def size_buckets(self, boxes: np.ndarray, img_size: int) -> np.ndarray:
        """Each box's size bucket (detect.audit.calibration.size_bucket) as the network sees it at img_size."""
        return size_bucket(boxes, np.full(len(boxes), self.longer_side), img_size)

    def truth(self) -> ImageTruth:
        """Labels and crowd regions as COCOeval matches them (crowd and difficult boxes ignored)."""
        crowd = np.concatenate([np.zeros(len(self.classes), bool), np.ones(len(self.crowd_classes), bool)])
        return ImageTruth(np.concatenate([self.boxes, self.crowd]).reshape(-1, 4),
                          np.concatenate([self.classes, self.crowd_classes]).astype(np.int64),
                          np.concatenate([self.difficult, np.ones(len(self.crowd_classes), bool)]), crowd)


def detection_outcomes(image: AuditImage) -> tuple[np.ndarray, np.ndarray]:
    """(right, counted) per detection: COCOeval's IoU-0.5 matching against the labels; a detection absorbed by a
    crowd region or a difficult box is not counted (detect.evaluation.matching)."""
    return match_image(image.detections, image.truth(), MATCH_IOU)


@dataclass
class LabelEvidence:
    confirm: np.ndarray
    other: np.ndarray
    other_det: np.ndarray  # int: detection row, -1 when none
    shifted: np.ndarray
    shifted_det: np.ndarray
    anything: np.ndarray
    seen_conf: np.ndarray  # seen_confidence: the best raw confidence there, scaled by the overlap (0 when none)
    confirm_conf: np.ndarray  # the best raw confidence among the confirming detections (0 when none)


def nothing_seen(conf: np.ndarray) -> np.ndarray:
    """The spurious statistic from the best raw confidence of anything at a label: 1 when nothing, falling by a
    quarter per decade of confidence (0.001 -> 0.75, 0.01 -> 0.5, 0.1 -> 0.25, 1 -> 0). On a log scale because
    the difference between a faint detection and none, which tells a real object the model barely sees from an
    empty region, sits in the lowest confidences, where the calibrated probability is flat."""
    return np.clip(-np.log10(np.maximum(np.asarray(conf, np.float64), 1e-4)) / 4.0, 0.0, 1.0)


def _best(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the largest value where `mask` holds (0 when nowhere) and its column (-1 when nowhere)."""
    masked = np.where(mask, values, -1.0)
    column = masked.argmax(1) if masked.shape[1] else np.zeros(len(masked), np.int64)
    best = masked[np.arange(len(masked)), column] if masked.shape[1] else np.full(len(masked), -1.0)
    return np.maximum(best, 0.0), np.where(best >= 0, column, -1)


def seen_confidence(iou: np.ndarray, det: np.ndarray, window_low: float = WINDOW_LOW) -> np.ndarray:
    """Per box (rows of `iou` [m, n] against the detections `det`): the best raw confidence of a detection
    overlapping it at IoU >= window_low, scaled by IoU / 0.5 below the match IoU (0 when none): a detection
    that only grazes the box is mostly about something else (a junk box of a model that fires everywhere, beside
    an invented label), one at the match IoU is the object itself."""
    return _best(det[None, :, 4] * np.minimum(1.0, iou / MATCH_IOU), iou >= window_low)[0]


def visible_rows(image: AuditImage) -> np.ndarray:
    """bool [m, n + l]: which of `evidence_rows()` count for each label: the image's detections, and the detections
    of the label's own closer look (a crop about this very box)."""
    n, looked = len(image.detections), image.looked
    visible = np.ones((len(image.boxes), n + len(looked)), bool)
    if len(looked):
        own = np.full(len(image.boxes), -1)
        if len(image.boxes) and len(image.look_boxes):
            hit = (image.boxes[:, None, :] == image.look_boxes[None, :, :]).all(2)
            own = np.where(hit.any(1), hit.argmax(1), -1)
        visible[:, n:] = looked[None, :, 6].astype(np.int64) == own[:, None]
    return visible


def label_evidence(image: AuditImage, prob: np.ndarray, window_low: float = WINDOW_LOW) -> LabelEvidence:
    """The evidence of the module docstring for each label of `image`, `prob` being each evidence row's calibrated
    probability (AuditImage.evidence_rows)."""
    det = image.evidence_rows()
    iou = box_iou(image.boxes, det[:, :4])  # [m, n + l]
    same = image.classes[:, None] == det[None, :, 5].astype(np.int64)
    visible = visible_rows(image)
    p = np.broadcast_to(prob[None, :], iou.shape)
    # whose object a detection is reads the boxes alone: a crop about one label also shows its neighbours
    on_label = same & (iou >= MATCH_IOU)
    confirming = on_label & visible
    # a detection that is another same-class label's object cannot be this one's true place, and a detection
    # beside several labels (one box over a group) is the nearest one's only
    elsewhere = on_label.sum(0)[None, :] - on_label > 0
    if len(iou):
        nearest = np.where(same, iou, -1.0).argmax(0)
        elsewhere |= np.arange(len(iou))[:, None] != nearest[None, :]
    confirm, _ = _best(p, confirming)
    confirm_conf, _ = _best(np.broadcast_to(det[None, :, 4], iou.shape), confirming)
    # an other-class detection that is another label's object (a pizza labelled on the table) says nothing here
    labelled = on_label.any(0)[None, :]
    other, other_det = _best(p, visible & ~same & (iou >= MATCH_IOU) & ~labelled)
    shifted, shifted_det = _best(p, visible & same & (iou >= window_low) & (iou < MATCH_IOU) & ~elsewhere)
    anything, _ = _best(p, visible & (iou >= window_low))
    seen_conf = seen_confidence(np.where(visible, iou, 0.0), det, window_low)
    return LabelEvidence(confirm, other, other_det, shifted, shifted_det, anything, seen_conf, confirm_conf)


def missing_candidates(image: AuditImage, prob: np.ndarray, confirm: np.ndarray,
                       window_low: float = WINDOW_LOW) -> tuple[np.ndarray, np.ndarray]:
    """(detection rows, explained [k]) of the detections no label overlaps at IoU 0.5 and no crowd region or
    difficult box covers; `explained` is the largest (1 - confirm) of the unconfirmed same-class labels the
    detection overlaps at IoU >= window_low (0 when none): how likely the label is this object, misplaced."""
    det = image.detections
    if not len(det):
        return np.zeros(0, np.int64), np.zeros(0)
    free = np.ones(len(det), bool)
    if len(image.boxes):
        free &= box_iou(det[:, :4], image.boxes).max(1) < MATCH_IOU
    if len(image.crowd):  # intersection over the detection's area, as COCOeval overlaps a crowd region
        free &= box_iou(det[:, :4], image.crowd, np.ones(len(image.crowd), bool)).max(1) < MATCH_IOU
    rows = np.flatnonzero(free)
    if not len(rows) or not len(image.boxes):
        return rows, np.zeros(len(rows))
    iou = box_iou(det[rows, :4], image.boxes)  # [k, m]
    same = det[rows, 5].astype(np.int64)[:, None] == image.classes[None, :]
    near = same & (iou >= window_low) & ~image.difficult[None, :]
    explained = np.where(near, 1.0 - confirm[None, :], 0.0).max(1)
    return rows, explained


def suppress_overlaps(boxes: np.ndarray, scores: np.ndarray, iou_thres: float = MATCH_IOU) -> np.ndarray:
    """Indices kept by a class-agnostic greedy NMS, highest score first: one issue per unlabelled object, though
    a multi-label model finds it as two classes."""
    order = np.argsort(-scores, kind="stable")
    keep: list[int] = []
    if not len(order):
        return np.zeros(0, np.int64)
    iou = box_iou(boxes[order], boxes[order])
    suppressed = np.zeros(len(order), bool)
    for i in range(len(order)):
        if suppressed[i]:
            continue
        keep.append(int(order[i]))
        suppressed |= iou[i] >= iou_thres
    return np.array(keep, np.int64)
