"""Suspected label errors of a split, each with one score comparable across kinds: the chance it is an error.

With `p` a detection's calibrated probability of being right (detect.audit.calibration) and a label's evidence
(detect.audit.evidence: confirm, other, shifted, anything, seen_conf), each kind has one statistic:
- `missing`: a detection no label accounts for: p * (1 - explained) (an object is there, and no nearby misplaced
  label is it);
- `box`: shifted * (1 - confirm): the model sees the label's class beside or around the box, and not at it;
- `class`: other * (1 - confirm): the model sees the box as another class, and not as its own;
- `spurious`: nothing_seen(seen_conf): the model sees nothing where the label is, read from the raw confidence
  on a log scale (a faint detection is not nothing, though its calibrated chance is as low as none's).
The score is Bayes' rule: prior odds times the likelihood ratio of the statistic, the ratio measured on the split
by making each kind of error on its own labels (detect.audit.likelihood; box and class read together with the
label's confirm), for `box` and `spurious` times what the detection beside the label says of which error it would
be (detect.audit.beside), for `class` times how rarely the model itself mixes up the two classes
(detect.audit.confusion),
the prior `PRIOR` of a label being wrong in each way (for `missing`, spread over the unlabelled detections:
PRIOR * labels / candidates). So a score is a chance, the same for every kind: 0.6 is a likelier error than 0.4,
whatever their kinds; the list stops at the prior (evidence that does not make the error likelier). `method="product"`
takes the statistics themselves as the scores (the benchmark's baseline). Each label gives its most likely kind;
unlabelled objects found twice (a multi-label model) give one issue. With a second model's view of the boxes
(detect.audit.second_opinion), each ratio is also multiplied by how much likelier the box's view is under the
error than under a right label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from detect.audit.beside import beside_factors
from detect.audit.calibration import NUM_SIZES, CalibrationSettings, ConfidenceCalibration
from detect.audit.confusion import confusion_factors
from detect.audit.evidence import (
    WINDOW_LOW,
    AuditImage,
    detection_outcomes,
    label_evidence,
    missing_candidates,
    nothing_seen,
    suppress_overlaps,
)
from detect.audit.likelihood import (
    CONFIRM_BANDS,
    SIBLING_BANDS,
    BandedRatioCurve,
    CellRatioCurves,
    band_ratio,
    confirm_band,
    sibling_band,
    simulate,
)
from detect.audit.second_opinion import appearance_factors, label_view_factors, label_views

KINDS = ("missing", "box", "class", "spurious")
PRIOR = 0.05  # the share of labels assumed wrong in each way before the model is asked: a few percent


@dataclass(frozen=True)
class ScoringSettings:
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    method: str = "likelihood"  # or "product" (the benchmark's baseline)
    prior: float = PRIOR
    window_low: float = WINDOW_LOW
    min_score: float = PRIOR  # issues below the prior (evidence that does not make the error likelier) are not listed


@dataclass(frozen=True)
class Issue:
    image: int  # record index in the split
    kind: str
    cls: int  # the label's class; the model's for `missing`
    box: tuple[float, float, float, float]  # the label's box; the detection's for `missing`
    score: float
    label: int | None = None  # the label's row in its image's labels (None for `missing`)
    suggested_class: int | None = None
    suggested_box: tuple[float, float, float, float] | None = None
    evidence: dict = field(default_factory=dict)  # the figures the score came from, for the json


def _joined(parts: list, dtype) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def calibrate(images: list[AuditImage], num_classes: int, img_size: int,
              settings: CalibrationSettings) -> ConfidenceCalibration:
    """The confidence calibration measured on the split's own detections and labels."""
    conf, cls, size, right = [], [], [], []
    for image in images:
        det = image.detections
        if not len(det):
            continue
        tp, counted = detection_outcomes(image)
        conf.append(det[counted, 4])
        cls.append(det[counted, 5].astype(np.int64))
        size.append(image.size_buckets(det[counted, :4], img_size))
        right.append(tp[counted])
    return ConfidenceCalibration(_joined(conf, float), _joined(cls, np.int64), _joined(size, np.int64),
                                 _joined(right, bool), num_classes, settings)


def _box(row) -> tuple[float, float, float, float]:
    return tuple(round(float(v), 2) for v in row[:4])


def find_issues(images: list[AuditImage], num_classes: int, img_size: int,
                settings: ScoringSettings = ScoringSettings()) -> list[Issue]:
    """Every suspected error of the split scoring at least `settings.min_score`, most likely first."""
    calibration = calibrate(images, num_classes, img_size, settings.calibration)
    probs, evidence, candidates = [], [], []
    for image in images:
        looked_at = image.evidence_rows()  # the image's detections, then its closer looks'
        probs.append(calibration(looked_at[:, 4], looked_at[:, 5].astype(np.int64),
                                 image.size_buckets(looked_at[:, :4], img_size)))
        evidence.append(label_evidence(image, probs[-1], settings.window_low))
        det = image.detections
        rows, explained = missing_candidates(image, probs[-1], evidence[-1].confirm, settings.window_low)
        siblings = (image.classes[None, :] == det[rows, 5].astype(np.int64)[:, None]).sum(1)
        candidates.append((rows, explained, probs[-1][rows] * (1.0 - explained), siblings))
    stats = _kind_statistics(images, evidence)
    seen = label_views(images)  # the second model's view of each label (None without one)
    appearance = appearance_factors(images, seen, candidates, num_classes)
    if settings.method == "likelihood":
        (label_scores, label_kinds), missing_score = _likelihood_scores(images, probs, stats, evidence, candidates,
                                                                        seen, num_classes, img_size, settings)
    else:
        label_scores, label_kinds, missing_score = stats, _argmax(stats), (lambda found, siblings, factor: found)
    issues: list[Issue] = []
    start = 0
    for image, p, ev, (rows, explained, found, siblings), factor in zip(images, probs, evidence, candidates,
                                                                          appearance):
        end = start + len(image.classes)
        issues += _label_issues(image, ev, label_scores[start:end], label_kinds[start:end], settings)
        issues += _missing_issues(image, p, rows, explained, factor, missing_score(found, siblings, factor),
                                  settings)
        start += len(image.classes)
    issues.sort(key=lambda issue: (-issue.score, issue.image, issue.kind))
    return issues


def _kind_statistics(images: list[AuditImage], evidence: list) -> np.ndarray:
    """[m, 3] per label of the split: the box, class and spurious statistics (the module docstring)."""
    if not images:
        return np.zeros((0, 3))
    return np.concatenate([np.stack([ev.shifted * (1 - ev.confirm), ev.other * (1 - ev.confirm),
                                     nothing_seen(ev.seen_conf)], 1) for ev in evidence])


def posterior(ratio: np.ndarray, prior: float) -> np.ndarray:
    """P(error) from the likelihood ratio of the evidence and the prior chance of the error."""
    prior_odds = prior / (1 - prior)
    return prior_odds * ratio / (prior_odds * ratio + 1.0)


def _likelihood_scores(images, probs, stats: np.ndarray, evidence, candidates, seen, num_classes: int, img_size: int,
                       settings: ScoringSettings):
    """((label scores [m, 3], each label's likeliest kind [m]), missing score function) by Bayes' rule with the
    simulated likelihood ratios."""
    simulated = simulate(images, probs, num_classes, settings.window_low)
    counted = ~_joined([im.difficult for im in images], bool)
    per_class, per_size = settings.calibration.per_class, settings.calibration.per_size
    classes = _joined([im.classes for im in images], np.int64)
    sizes = _joined([im.size_buckets(im.boxes, img_size) for im in images], np.int64)
    cell_classes = classes if per_class else np.zeros_like(classes)
    cell_sizes = sizes if per_size else np.zeros_like(sizes)
    spurious = CellRatioCurves(simulated.nothing, stats[counted, 2], cell_classes[counted], cell_sizes[counted],
                               num_classes if per_class else 1, NUM_SIZES if per_size else 1)
    # the split's labels (almost all right) against the simulated errors, each read with its confirm
    band = confirm_band(_joined([ev.confirm for ev in evidence], float),
                        _joined([ev.confirm_conf for ev in evidence], float))
    ratios = np.stack([BandedRatioCurve(simulated.box, simulated.box_band, stats[counted, 0],
                                        band[counted], CONFIRM_BANDS)(stats[:, 0], band),
                       BandedRatioCurve(simulated.wrong_class, simulated.class_band,
                                        stats[counted, 1], band[counted], CONFIRM_BANDS)(stats[:, 1], band)
                       if num_classes > 1 else np.zeros(len(stats)),
                       spurious(stats[:, 2], cell_classes, cell_sizes)], 1)
    ratios[:, :2] = np.where(stats[:, :2] > 0, ratios[:, :2], 0.0)  # no detection there: no evidence at all
    ratios *= label_view_factors(images, seen, simulated, num_classes)  # ones without a second opinion
    ratios *= beside_factors(images, evidence, simulated, seen, num_classes)
    if num_classes > 1:
        # the confusions are the image's own detections': a crop's view of a small box (close_look) confuses
        # other classes, so its other class is left at 1 (coco-tiny class-kind AP 0.669 against 0.597)
        other = _joined([np.where((ev.other_det >= 0) & (ev.other_det < len(im.detections)),
                                  im.evidence_rows()[ev.other_det, 5], -1)
                         for im, ev in zip(images, evidence)], np.int64).astype(np.int64)
        ratios[:, 1] *= confusion_factors(images, num_classes, classes, other)
    # the kind: the box ratio holds how rarely a moved box is confirmed; an invented one is as rarely, so the
    # spurious ratio gets the same credit for the choice (else an unconfirmed label with anything beside it reads
    # as moved), though not in the score (its statistic, nothing seen, already holds it)
    choice = ratios.copy()
    choice[:, 2] *= band_ratio(simulated.invented_band, band[counted], CONFIRM_BANDS)[band]
    found = _joined([c[2] for c in candidates], float)
    missing_curve = BandedRatioCurve(simulated.missing, sibling_band(simulated.missing_siblings), found,
                                     sibling_band(_joined([c[3] for c in candidates], np.int64)), SIBLING_BANDS)
    # the expected missing objects (PRIOR of the labels) spread over the detections that could be one
    missing_prior = min(0.5, settings.prior * max(int(counted.sum()), 1) / max(len(found), 1))
    return (posterior(ratios, settings.prior), _argmax(choice)), \
        lambda values, siblings, factor: posterior(missing_curve(values, sibling_band(siblings)) * factor,
                                                   missing_prior)


def _argmax(values: np.ndarray) -> np.ndarray:
    return values.argmax(1) if len(values) else np.zeros(0, np.int64)


def _label_issues(image: AuditImage, ev, scores: np.ndarray, kinds: np.ndarray,
                  settings: ScoringSettings) -> list[Issue]:
    """The issues of one image's labels: `scores` [m, 3] the box, class, spurious chances, `kinds` [m] the likeliest
    (0, 1, 2); a label is listed with its best chance, as its likeliest kind."""
    det = image.evidence_rows()
    issues = []
    for j in np.flatnonzero(~image.difficult & (scores.max(1, initial=0) >= settings.min_score)):
        kind = ("box", "class", "spurious")[int(kinds[j])]
        suggestion = {"box": ev.shifted_det[j], "class": ev.other_det[j]}.get(kind, -1)
        figures = {"confirm": round(float(ev.confirm[j]), 4), "other_class": round(float(ev.other[j]), 4),
                   "shifted": round(float(ev.shifted[j]), 4), "anything": round(float(ev.anything[j]), 4),
                   "seen_confidence": round(float(ev.seen_conf[j]), 4)}
        issues.append(Issue(image.index, kind, int(image.classes[j]), _box(image.boxes[j]),
                            round(float(scores[j].max()), 4), int(j),
                            int(det[suggestion, 5]) if suggestion >= 0 else None,
                            _box(det[suggestion]) if suggestion >= 0 else None, figures))
    return issues


def _missing_issues(image: AuditImage, p: np.ndarray, rows: np.ndarray, explained: np.ndarray,
                    appearance: np.ndarray, scores: np.ndarray, settings: ScoringSettings) -> list[Issue]:
    wanted = scores >= settings.min_score
    rows, scores, explained, appearance = rows[wanted], scores[wanted], explained[wanted], appearance[wanted]
    det = image.detections
    issues = []
    for k in suppress_overlaps(det[rows, :4], scores):
        row = det[rows[k]]
        figures = {"confidence": round(float(row[4]), 4), "probability": round(float(p[rows[k]]), 4),
                   "explained": round(float(explained[k]), 4)}
        if image.opinion is not None:  # how much likelier the second model's view is for the class's objects
            figures["appearance"] = round(float(appearance[k]), 4)
        issues.append(Issue(image.index, "missing", int(row[5]), _box(row), round(float(scores[k]), 4), None,
                            int(row[5]), _box(row), figures))
    return issues
