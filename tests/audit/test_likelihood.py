"""The likelihood ratios (the spurious statistic's per (class, size) cell, the banded curves) and the simulated
errors they are measured on."""

import dataclasses

import numpy as np

from detect.audit import likelihood
from detect.audit.evidence import AuditImage
from detect.audit.likelihood import (
    CONFIRM_BANDS,
    BandedRatioCurve,
    CellRatioCurves,
    RatioCurve,
    confirm_band,
    histogram,
    sibling_band,
    simulation_plan,
)

WRONG = np.ones(500)  # simulated invented boxes: nothing seen at all


def _right(small_nothing: int, large_nothing: int, per_size: int = 400):
    """A split of two common classes: of `per_size` small and `per_size` large labels each, this many see
    nothing (statistic 1); the others are seen (statistic 0)."""
    stats, classes, sizes = [], [], []
    for cls in (0, 1):
        for size, nothing in ((0, small_nothing), (2, large_nothing)):
            stats += [1.0] * nothing + [0.0] * (per_size - nothing)
            classes += [cls] * per_size
            sizes += [size] * per_size
    return np.array(stats), np.array(classes), np.array(sizes)


def test_a_rare_class_borrows_its_sizes_figure_not_the_splits():
    # small objects are often not seen when right (a third of them), large ones almost always are
    stats, classes, sizes = _right(small_nothing=130, large_nothing=4)
    # class 2 has two labels, both small and unseen: too few to say anything of its own
    stats, classes, sizes = (np.concatenate([stats, [1.0, 1.0]]), np.concatenate([classes, [2, 2]]),
                             np.concatenate([sizes, [0, 0]]))
    curves = CellRatioCurves(WRONG, stats, classes, sizes, num_classes=3, num_sizes=3)
    one = np.ones(1)
    rare_small = curves(one, np.array([2]), np.array([0]))[0]
    common_small = curves(one, np.array([0]), np.array([0]))[0]
    common_large = curves(one, np.array([0]), np.array([2]))[0]
    rare_large = curves(one, np.array([2]), np.array([2]))[0]
    # a small unseen label is weak evidence whatever its class; a large unseen one strong
    assert common_large > 10 * common_small
    assert rare_small < 2 * common_small
    assert rare_large > 5 * rare_small
    assert rare_large > 0.5 * common_large


def test_one_class_is_told_apart_by_size_only():
    stats, classes, sizes = _right(small_nothing=130, large_nothing=4)
    keep = classes == 0
    one_class = CellRatioCurves(WRONG, stats[keep], classes[keep], sizes[keep], num_classes=1, num_sizes=3)
    values = np.array([1.0, 1.0, 0.5])
    cells = np.array([0, 2, 2])
    got = one_class(values, np.zeros(3, np.int64), cells)
    assert got[1] > 10 * got[0]
    assert got[2] <= got[1]


def test_a_confirmed_label_weighs_by_how_often_errors_are_confirmed():
    # errors: the statistic high, confirm almost always 0; right labels: most confirmed, the statistic low
    rng = np.random.default_rng(0)
    wrong, wrong_confirm = rng.uniform(0.4, 0.9, 1000), np.where(rng.uniform(size=1000) < 0.02, 0.5, 0.0)
    right = np.concatenate([rng.uniform(0.0, 0.3, 900), rng.uniform(0.4, 0.9, 100)])
    right_confirm = np.concatenate([rng.uniform(0.3, 1.0, 900), np.full(100, 0.5)])
    curve = BandedRatioCurve(wrong, confirm_band(wrong_confirm, wrong_confirm), right,
                             confirm_band(right_confirm, right_confirm), CONFIRM_BANDS)
    unconfirmed, confirmed = curve(np.array([0.6, 0.6]), confirm_band(np.array([0.0, 0.5]), np.array([0.0, 0.5])))
    # the same statistic: strong evidence without a confirming detection, none with one (right labels with a
    # confirming detection show this statistic far more often than errors do)
    assert unconfirmed > 20 and confirmed < 1.0
    # a plain curve of the statistic alone cannot tell them apart
    plain = RatioCurve(wrong, histogram(right))(np.array([0.6]))[0]
    assert confirmed < plain < unconfirmed


def test_a_faint_confirming_detection_is_a_band_of_its_own():
    # calibrated, a detection at 0.004 and none both read 0; the band keeps them apart, then bands the chance
    confirm = np.array([0.0, 0.0, 0.01, 0.05, 0.2, 0.9])
    raw = np.array([0.0, 0.004, 0.03, 0.1, 0.3, 0.95])
    assert confirm_band(confirm, raw).tolist() == [0, 1, 1, 2, 3, 4]
    assert CONFIRM_BANDS == 5


def test_a_find_alone_in_its_image_weighs_less_when_forgotten_objects_have_company():
    # removed labels: 80% had another label of their class in the image; unlabelled detections: 30%
    rng = np.random.default_rng(1)
    wrong, wrong_siblings = rng.uniform(0.3, 0.9, 1000), (rng.uniform(size=1000) < 0.8).astype(int) * 3
    right, right_siblings = rng.uniform(0.0, 0.9, 4000), (rng.uniform(size=4000) < 0.3).astype(int)
    curve = BandedRatioCurve(wrong, sibling_band(wrong_siblings), right, sibling_band(right_siblings), 2)
    alone, with_company = curve(np.array([0.6, 0.6]), sibling_band(np.array([0, 2])))
    assert with_company > 5 * alone


def _split(count: int, seed: int = 0) -> list[AuditImage]:
    rng = np.random.default_rng(seed)
    images = []
    for n in range(count):
        xy = rng.uniform(0, 500, (3, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(10, 120, (3, 2))], 1)
        images.append(AuditImage(n, boxes, rng.integers(0, 4, 3), np.zeros(3, bool), np.zeros((0, 4)),
                                 np.zeros(0, np.int64), np.zeros((0, 6)), 640, name=f"img{n:03d}.jpg"))
    return images


def _errors(images, plan, moved: float = 0.0) -> dict:
    """(image name, label box less `moved`) -> what the plan makes of that label: [the misplaced box, the new
    class, the invented box (nan when none)], less `moved` where it is a place."""
    out = {}
    for c in plan:
        image = images[c.image]
        invented = np.full(4, np.nan) if c.invented is None else c.invented - moved
        key = (image.name, tuple(np.round(image.boxes[c.label] - moved, 3)))
        out[key] = np.concatenate([c.misplaced - moved, [c.new_class], invented])
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.allclose(a[k], b[k], atol=1e-3, equal_nan=True) for k in a)


def test_simulated_errors_follow_the_labels_not_the_order_the_split_lists_them_in(monkeypatch):
    images = _split(40)
    plan = _errors(images, simulation_plan(images, 4))
    assert len(plan) == 120  # every label once
    # the images listed backwards, each image's labels reversed, boxes moved by a format's rounding (YOLO's
    # six decimals): the same errors on the same labels
    shuffled = [dataclasses.replace(im, index=k, boxes=im.boxes[::-1] + 4e-4, classes=im.classes[::-1])
                for k, im in enumerate(images[::-1])]
    assert _same(_errors(shuffled, simulation_plan(shuffled, 4), moved=4e-4), plan)
    # fewer labels simulated than the split holds: the same ones, whichever the order
    monkeypatch.setattr(likelihood, "SIMULATED", 50)
    chosen = _errors(images, simulation_plan(images, 4))
    assert len(chosen) == 50 and set(chosen) <= set(plan)
    assert _same(_errors(shuffled, simulation_plan(shuffled, 4), moved=4e-4), chosen)
    # another simulation seed, other errors
    assert not _same(_errors(images, simulation_plan(images, 4, seed=1)), chosen)
