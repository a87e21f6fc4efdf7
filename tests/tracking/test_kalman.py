"""detect.tracking.kalman: the block-wise covariance step equals the full matrices, and a box moving at a constant
speed is followed with that speed."""

import numpy as np

from detect.tracking import kalman


def _full_predict(mean, cov):
    """The textbook step with full matrices: x = F x, P = F P F^T + Q."""
    f = np.eye(8)
    f[:4, 4:] = np.eye(4)
    wh = np.maximum(mean[2:4], 1.0)
    sides = np.concatenate([wh, wh])
    q = np.diag(np.concatenate([(kalman.POSITION_STD * sides) ** 2, (kalman.VELOCITY_STD * sides) ** 2]))
    return f @ mean, f @ cov @ f.T + q


def test_predict_equals_the_full_matrix_step():
    rng = np.random.default_rng(0)
    mean = np.array([[50.0, 40.0, 20.0, 30.0, 2.0, -1.0, 0.5, 0.0], [10.0, 10.0, 5.0, 8.0, 0.0, 0.0, 0.0, 0.0]])
    a = rng.normal(size=(2, 8, 8))
    cov = a @ a.transpose(0, 2, 1) + np.eye(8)
    new_mean, new_cov = kalman.predict(mean, cov)
    for i in range(2):
        want_mean, want_cov = _full_predict(mean[i], cov[i])
        np.testing.assert_allclose(new_mean[i], want_mean)
        np.testing.assert_allclose(new_cov[i], want_cov, rtol=1e-12)
    assert new_mean[0, 0] == 52.0 and new_mean[0, 1] == 39.0 and new_mean[0, 2] == 20.5


def test_constant_motion_is_learnt_and_the_covariance_stays_symmetric():
    box = np.array([[100.0, 50.0, 40.0, 60.0]])  # cx, cy, w, h
    mean, cov = kalman.initiate(box)
    assert mean[0, :4].tolist() == box[0].tolist() and (mean[0, 4:] == 0).all()
    for step in range(1, 40):
        mean, cov = kalman.predict(mean, cov)
        mean, cov = kalman.update(mean, cov, box + [[3.0 * step, -1.0 * step, 0.0, 0.0]])
    np.testing.assert_allclose(mean[0, 4:6], [3.0, -1.0], atol=0.05)
    np.testing.assert_allclose(mean[0, :4], [217.0, 11.0, 40.0, 60.0], atol=0.5)
    np.testing.assert_allclose(cov[0], cov[0].T, atol=1e-9)
    assert (np.linalg.eigvalsh(cov[0]) > 0).all()


def test_box_conversions_round_trip():
    xyxy = np.array([[10.0, 20.0, 50.0, 80.0]])
    assert kalman.xyxy_to_cxcywh(xyxy).tolist() == [[30.0, 50.0, 40.0, 60.0]]
    assert kalman.cxcywh_to_xyxy(kalman.xyxy_to_cxcywh(xyxy)).tolist() == xyxy.tolist()
