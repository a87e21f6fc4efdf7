"""The spurious statistic's likelihood ratios per (class, size) cell."""

import numpy as np

from detect.audit.likelihood import (
    CONFIRM_BANDS,
    BandedRatioCurve,
    CellRatioCurves,
    RatioCurve,
    confirm_band,
    histogram,
    sibling_band,
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
