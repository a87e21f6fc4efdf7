"""Anchors fitted to a dataset's box shapes and written back into the cfg: the cfg's anchor layout, seeded
k-means (1 - centred IoU) then a seeded log-space hill-climb on recall under the loss's rule
(detect.engine.anchors), and a rewrite of the `anchors=` lines that keeps every other byte of the cfg. Pure numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detect.darknet.cfg import parse_cfg
from detect.darknet.options import parse_yolo_options
from detect.engine.anchors import AnchorFit, anchor_fit, log_ratio, shape_iou

MIN_FIT_SIZE = 2.0  # boxes smaller than this (pixels, either side) are left out of fitting: augmentation drops them
MAX_FIT_SHAPES = 20_000  # fitting uses a seeded sample of at most this many shapes (figures use all)


# -- cfg anchor layout ----------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)  # holds arrays: no field-wise == or hash
class AnchorLayout:
    """The anchors of a cfg: the list its [yolo] sections share and each head's mask into it."""

    anchors: np.ndarray  # [num, 2] input pixels
    masks: tuple[tuple[int, ...], ...]  # per [yolo] section, cfg order
    layers: tuple[int, ...]  # layer index of each [yolo] section
    classes: tuple[int, ...]  # classes of each [yolo] section (the feeding conv has (5 + classes) rows per slot)

    @property
    def used(self) -> np.ndarray:
        """The anchor indices some head's mask names, ascending (pjreddie's yolov3-tiny leaves anchor 0 unused)."""
        return np.unique(np.concatenate([np.asarray(m, dtype=np.int64) for m in self.masks]))

    def head_anchors(self, anchors: np.ndarray | None = None) -> list[np.ndarray]:
        """Per head, its [A, 2] anchors: from `anchors` (a [num, 2] list) or the cfg's own."""
        anchors = self.anchors if anchors is None else np.asarray(anchors, dtype=np.float64).reshape(-1, 2)
        return [anchors[list(mask)] for mask in self.masks]


def read_anchor_layout(cfg_text: str, source: str = "<cfg>") -> AnchorLayout:
    """The anchor layout of cfg text. Every [yolo] section must share one anchor list (all YOLO cfgs do),
    since a fitted list replaces it everywhere."""
    yolos = [s for s in parse_cfg(cfg_text, source) if s.type == "yolo"]
    if not yolos:
        raise ValueError(f"{source}: no [yolo] sections, so no anchors to fit")
    options = [parse_yolo_options(s) for s in yolos]
    first = options[0]["anchors"]
    for section, opts in zip(yolos[1:], options[1:]):
        if opts["anchors"] != first:
            raise section.error(f"anchors {opts['anchors']} (num={opts['num']}) differ from the first [yolo]'s "
                                f"{first}; anchor fitting needs one list shared by every head", "anchors")
    return AnchorLayout(anchors=np.array(first, dtype=np.float64).reshape(-1, 2),
                        masks=tuple(tuple(o["mask"]) for o in options), layers=tuple(s.index for s in yolos),
                        classes=tuple(o["classes"] for o in options))


# -- fitting --------------------------------------------------------------------------------------------------
def fit_fitness(shapes: np.ndarray, anchors: np.ndarray, anchor_t: float) -> float:
    """What refinement maximises: recall, plus the mean closeness 1/ratio of each matched box's best anchor.
    A newly matched box is worth at least 1 + 1/anchor_t, more than any closeness gain elsewhere, so recall
    comes first and closeness decides between anchor sets of equal recall."""
    return _log_fitness(np.log(shapes), np.log(anchors), np.log(anchor_t))


def _log_fitness(log_shapes: np.ndarray, log_anchors: np.ndarray, log_t: float) -> float:
    """`fit_fitness` on logs, which the refinement loop takes once."""
    best = log_ratio(log_shapes, log_anchors).min(1)
    matched = best < log_t
    return float(matched.mean() + np.where(matched, np.exp(-best), 0.0).mean())


def kmeans_anchors(shapes: np.ndarray, n: int, seed: int = 0, iterations: int = 300) -> np.ndarray:
    """[n, 2] k-means centres of `shapes` under the distance 1 - IoU of centred boxes (a size-independent
    distance: Euclidean k-means on w, h would let the large boxes dominate). Seeded k-means++ start, median
    update. Deterministic for a seed."""
    shapes = np.asarray(shapes, dtype=np.float64).reshape(-1, 2)
    if len(shapes) == 0:
        raise ValueError("no box shapes to fit anchors to")
    rng = np.random.default_rng(seed)
    centres = shapes[[rng.integers(len(shapes))]]
    while len(centres) < n:  # k-means++: the next seed far (in IoU) from those chosen
        far = 1.0 - shape_iou(shapes, centres).max(1)
        p = far**2 / (far**2).sum() if far.sum() > 0 else None  # None: every shape is a seed already (uniform)
        centres = np.concatenate([centres, shapes[[rng.choice(len(shapes), p=p)]]])
    for _ in range(iterations):
        iou = shape_iou(shapes, centres)
        nearest = iou.argmax(1)
        updated = centres.copy()
        for k in range(n):  # n is the cfg's anchor count (<= 16): a loop over clusters, not over boxes
            members = shapes[nearest == k]
            updated[k] = np.median(members, 0) if len(members) else shapes[iou.max(1).argmin()]  # empty: reseed
        if np.allclose(updated, centres):
            break
        centres = updated
    return centres


def refine_anchors(shapes: np.ndarray, anchors: np.ndarray, anchor_t: float = 4.0, seed: int = 0,
                   generations: int = 1000, sigma: float = 0.1) -> np.ndarray:
    """Seeded hill-climb on `fit_fitness`: each generation scales a random subset of the anchor sides by
    log-normal factors and keeps the result when it is fitter. Anchors stay >= 1 pixel."""
    rng = np.random.default_rng(seed)
    log_shapes, log_t = np.log(np.asarray(shapes, dtype=np.float64)), np.log(anchor_t)
    best = np.log(np.asarray(anchors, dtype=np.float64).reshape(-1, 2))  # mutated in log space: scale factors
    best_fitness = _log_fitness(log_shapes, best, log_t)
    for _ in range(generations):
        chosen = rng.random(best.shape) < 0.5
        chosen.flat[rng.integers(chosen.size)] = True  # never an empty mutation
        step = sigma * rng.random()  # the step size itself varies, so small and large moves are both tried
        candidate = np.maximum(best + np.where(chosen, step * rng.standard_normal(best.shape), 0.0), 0.0)
        fitness = _log_fitness(log_shapes, candidate, log_t)
        if fitness > best_fitness:
            best, best_fitness = candidate, fitness
    return np.exp(best)


def round_anchors(anchors: np.ndarray) -> np.ndarray:
    """Sorted by area (Darknet's order: masks give the small anchors to the fine heads), whole pixels >= 1, as
    Darknet cfgs write them."""
    anchors = np.maximum(np.round(np.asarray(anchors, dtype=np.float64).reshape(-1, 2)), 1.0)
    return anchors[np.argsort(anchors.prod(1), kind="stable")]


@dataclass(frozen=True, eq=False)  # holds arrays: no field-wise == or hash
class FittedAnchors:
    anchors: np.ndarray  # [num, 2]: the used ones fitted (whole pixels, ascending area), the others the cfg's
    before: AnchorFit  # the cfg's anchors
    after: AnchorFit  # the fitted ones

    def summary(self) -> str:
        heads = ", ".join(f"{label} {a:.3f} -> {b:.3f}" for label, a, b in
                          zip(self.after.head_labels, self.before.head_recall, self.after.head_recall))
        return (f"anchors fitted to {self.after.num_boxes} boxes: best possible recall {self.before.recall:.3f} -> "
                f"{self.after.recall:.3f}, anchors/box {self.before.anchors_per_box:.2f} -> "
                f"{self.after.anchors_per_box:.2f}; per head: {heads}; anchors={format_anchors(self.anchors)}")


def fit_anchors(shapes: np.ndarray, layout: AnchorLayout, anchor_t: float = 4.0, seed: int = 0,
                generations: int = 1000, min_size: float = MIN_FIT_SIZE,
                max_shapes: int = MAX_FIT_SHAPES) -> FittedAnchors:
    """The cfg's `num` anchors fitted to `shapes` (those some mask uses: k-means, then refined for recall from
    the fitter of the k-means centres and the cfg's own anchors, so the fit never starts worse than the cfg;
    sorted by area into the used indices, so the coarsest head keeps the largest).
    Fitting uses the shapes at least `min_size` on both sides (a seeded sample of `max_shapes`); the before and
    after figures count every shape."""
    shapes = np.asarray(shapes, dtype=np.float64).reshape(-1, 2)
    usable = shapes[(shapes >= min_size).all(1)]
    if len(usable) == 0:
        raise ValueError(f"no box of the {len(shapes)} is at least {min_size:g} pixels on both sides: "
                         "nothing to fit anchors to")
    rng = np.random.default_rng(seed)
    if len(usable) > max_shapes:
        usable = usable[np.sort(rng.choice(len(usable), max_shapes, replace=False))]
    used = layout.used  # only anchors a head uses are fitted; an unused one keeps its cfg value
    start = kmeans_anchors(usable, len(used), seed)
    if fit_fitness(usable, layout.anchors[used], anchor_t) > fit_fitness(usable, start, anchor_t):
        start = layout.anchors[used]
    anchors = layout.anchors.copy()
    anchors[used] = round_anchors(refine_anchors(usable, start, anchor_t, seed, generations))
    labels = [f"layer {layer}" for layer in layout.layers]
    return FittedAnchors(anchors, before=anchor_fit(shapes, layout.head_anchors(), anchor_t, labels),
                         after=anchor_fit(shapes, layout.head_anchors(anchors), anchor_t, labels))


# -- writing them back ----------------------------------------------------------------------------------------
def format_anchors(anchors: np.ndarray) -> str:
    """Darknet's `anchors=` value: w,h pairs separated by two spaces."""
    return ",  ".join(f"{w:g},{h:g}" for w, h in np.asarray(anchors, dtype=np.float64).reshape(-1, 2))


def rewrite_cfg_anchors(cfg_text: str, anchors: np.ndarray, source: str = "<cfg>") -> str:
    """`cfg_text` with the `anchors=` line of every [yolo] section set to `anchors` ([num, 2]); every other
    byte (comments, spacing, line endings, key order) is kept. The cfg's own lexer finds the lines, so the one
    rewritten is the one the builder reads (the first `anchors` of each section); a section without one gets
    it right after its header."""
    anchors = np.asarray(anchors, dtype=np.float64).reshape(-1, 2)
    lines = cfg_text.splitlines(keepends=True)
    value = format_anchors(anchors)
    for section in parse_cfg(cfg_text, source):
        if section.type != "yolo":
            continue
        num = section.get_int("num", 1)
        if num != len(anchors):
            raise section.error(f"{len(anchors)} anchors given for a [yolo] with num={num}", "num")
        option = section.options.get("anchors")
        if option is None:
            header = lines[section.line - 1]
            ending = header[len(header.rstrip("\r\n")):] or "\n"
            lines[section.line - 1] = header.rstrip("\r\n") + ending + "anchors=" + value + ending
            continue
        line = lines[option.line - 1]
        body = line.rstrip("\r\n")
        equals = body.index("=")
        spaces = len(body[equals + 1:]) - len(body[equals + 1:].lstrip())  # keep the file's `anchors = ` style
        lines[option.line - 1] = body[: equals + 1 + spaces] + value + line[len(body):]
    return "".join(lines)


@dataclass(frozen=True)
class AnchorChange:
    """One head anchor slot whose anchor changed: the pretrained w, h rows of its conv lose their meaning."""

    layer: int  # the [yolo] layer; its conv is layer - 1
    slot: int  # position in the head's mask
    index: int  # anchor index (the mask value)
    old: tuple[float, float]
    new: tuple[float, float]
    classes: int  # the cfg's classes: the conv has 5 + classes output rows per slot

    @property
    def rows(self) -> tuple[int, int]:
        """The feeding conv's output rows (and biases) predicting this slot's w and h."""
        first = self.slot * (5 + self.classes)
        return first + 2, first + 3


def anchor_changes(layout: AnchorLayout, new_anchors: np.ndarray) -> list[AnchorChange]:
    """Every (head, slot) whose anchor differs between the cfg's `layout` and `new_anchors` ([num, 2])."""
    new_anchors = np.asarray(new_anchors, dtype=np.float64).reshape(-1, 2)
    if new_anchors.shape != layout.anchors.shape:
        raise ValueError(f"{len(new_anchors)} new anchors for a cfg with num={len(layout.anchors)}")
    return [AnchorChange(layer, slot, int(index), _pair(layout.anchors[index]), _pair(new_anchors[index]), classes)
            for layer, mask, classes in zip(layout.layers, layout.masks, layout.classes)
            for slot, index in enumerate(mask) if not np.array_equal(layout.anchors[index], new_anchors[index])]


def _pair(anchor: np.ndarray) -> tuple[float, float]:
    return float(anchor[0]), float(anchor[1])


def describe_anchor_changes(changes: Sequence[AnchorChange]) -> str:
    """The changed slots as log text: which pretrained box rows the new anchors invalidate."""
    if not changes:
        return "anchors unchanged: every pretrained box row stays valid"
    head = (f"new anchors change {len(changes)} head anchor slots; the pretrained w, h rows of those slots were "
            "trained for the old anchors and must relearn (they transfer only when the class count is the cfg's):")
    lines = [head]
    for c in changes:
        lines.append(f"  layer {c.layer} slot {c.slot} (anchor {c.index}): {c.old[0]:g}x{c.old[1]:g} -> "
                     f"{c.new[0]:g}x{c.new[1]:g}; conv layer {c.layer - 1} rows {c.rows[0]},{c.rows[1]}")
    return "\n".join(lines)
