"""Confidence calibration and the likelihood ratios the audit's scores take."""

import numpy as np

from detect.audit.calibration import (
    CalibrationSettings,
    ConfidenceCalibration,
    pool_adjacent_violators,
    size_bucket,
)
from detect.audit.likelihood import RatioCurve, histogram


def test_pool_adjacent_violators_is_the_monotone_least_squares_fit():
    fitted = pool_adjacent_violators(np.array([1.0, 3.0, 2.0, 4.0]), np.array([1.0, 1.0, 1.0, 1.0]))
    np.testing.assert_allclose(fitted, [1.0, 2.5, 2.5, 4.0])
    fitted = pool_adjacent_violators(np.array([5.0, 1.0]), np.array([1.0, 3.0]))
    np.testing.assert_allclose(fitted, [2.0, 2.0])


def test_size_buckets_are_sides_as_the_network_sees_them():
    boxes = np.array([[0, 0, 30, 30], [0, 0, 50, 50], [0, 0, 200, 200]], float)
    # a 1280 px image at 416: sides 9.75, 16.25, 65 network pixels; a 416 px image: 30, 50, 200
    assert size_bucket(boxes, np.full(3, 1280), 416).tolist() == [0, 0, 2]
    assert size_bucket(boxes, np.full(3, 416), 416).tolist() == [1, 1, 2]


def test_calibration_recovers_the_rate_of_right_detections_and_shrinks_rare_classes():
    rng = np.random.default_rng(0)
    conf = rng.uniform(0, 1, 20000)
    classes = np.zeros(len(conf), np.int64)
    classes[:30] = 1  # a rare class: 30 detections, all wrong
    right = rng.uniform(0, 1, len(conf)) < conf ** 2
    right[:30] = False
    calibration = ConfidenceCalibration(conf, classes, np.zeros(len(conf), np.int64), right, 2,
                                        CalibrationSettings(per_size=False))
    probe = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(calibration(probe, np.zeros(3, np.int64), np.zeros(3, np.int64)), probe ** 2,
                               atol=0.03)
    rare = calibration(probe, np.ones(3, np.int64), np.zeros(3, np.int64))
    assert (rare < probe ** 2).all() and (rare > 0.3 * probe ** 2).all()  # pulled down, not to zero
    assert (np.diff(calibration(np.linspace(0, 1, 50), np.ones(50, np.int64), np.zeros(50, np.int64))) >= 0).all()
    raw = ConfidenceCalibration(conf, classes, classes, right, 2, CalibrationSettings(enabled=False))
    np.testing.assert_allclose(raw(probe, np.zeros(3), np.zeros(3)), probe)


def test_ratio_curve_is_the_density_ratio_made_monotone():
    rng = np.random.default_rng(1)
    right = histogram(rng.uniform(0, 0.5, 10000))  # correct labels: weak evidence
    wrong = rng.uniform(0.5, 1.0, 10000)  # errors: strong evidence
    curve = RatioCurve(wrong, right)
    low, high = curve(np.array([0.2, 0.9]))
    assert low < 0.01 and high > 100
    assert (np.diff(curve.table) >= 0).all()
