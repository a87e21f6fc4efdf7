"""A constant-velocity Kalman filter over boxes, for every track at once.

State per track: centre x, centre y, width, height and their velocities (pixels per frame); a box is measured
as (cx, cy, w, h). Width and height move on their own (not an aspect ratio and a height), so a zooming camera or an
object that turns keeps a velocity of its size. The noise scales with the box: the position's standard deviation
is `POSITION_STD` of its side, the velocity's `VELOCITY_STD` (ByteTrack's and SORT's weights), so small and
large objects are followed alike. All functions take and return stacked arrays: mean [T, 8], covariance
[T, 8, 8]; none loops over tracks.
"""

from __future__ import annotations

import numpy as np

POSITION_STD = 1 / 20
VELOCITY_STD = 1 / 160


def _sides(boxes: np.ndarray) -> np.ndarray:
    """[T, 4] of (w, h, w, h): the scale of each coordinate's noise."""
    wh = np.maximum(boxes[:, 2:4], 1.0)  # a degenerate box still gets some noise
    return np.concatenate([wh, wh], axis=1)


def initiate(measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean [n, 8], covariance [n, 8, 8]) of new tracks at boxes [n, 4] (cx, cy, w, h), standing still."""
    n = len(measured)
    mean = np.zeros((n, 8))
    mean[:, :4] = measured
    sides = _sides(measured)
    std = np.concatenate([2 * POSITION_STD * sides, 10 * VELOCITY_STD * sides], axis=1)
    cov = np.zeros((n, 8, 8))
    cov[:, np.arange(8), np.arange(8)] = std**2
    return mean, cov


def predict(mean: np.ndarray, cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One frame ahead: position += velocity; covariance F P F^T + Q, written per block (F = [[I, I], [0, I]])."""
    sides = _sides(mean[:, :4])
    mean = mean.copy()
    mean[:, :4] += mean[:, 4:]
    pp, pv, vp, vv = cov[:, :4, :4], cov[:, :4, 4:], cov[:, 4:, :4], cov[:, 4:, 4:]
    out = np.empty_like(cov)
    out[:, :4, :4] = pp + pv + vp + vv
    out[:, :4, 4:] = pv + vv
    out[:, 4:, :4] = vp + vv
    out[:, 4:, 4:] = vv
    diagonal = np.concatenate([(POSITION_STD * sides) ** 2, (VELOCITY_STD * sides) ** 2], axis=1)
    out[:, np.arange(8), np.arange(8)] += diagonal
    return mean, out


def update(mean: np.ndarray, cov: np.ndarray, measured: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tracks' states corrected by their measured boxes [T, 4] (cx, cy, w, h)."""
    noise = (POSITION_STD * _sides(mean[:, :4])) ** 2
    innovation_cov = cov[:, :4, :4].copy()
    innovation_cov[:, np.arange(4), np.arange(4)] += noise
    # gain K = P H^T S^-1, with H taking the first four coordinates: solve S K^T = H P instead of inverting S
    gain = np.linalg.solve(innovation_cov, cov[:, :4, :]).transpose(0, 2, 1)
    mean = mean + np.einsum("tij,tj->ti", gain, measured - mean[:, :4])
    cov = cov - gain @ cov[:, :4, :]
    return mean, cov


def xyxy_to_cxcywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([(boxes[:, :2] + boxes[:, 2:4]) / 2, boxes[:, 2:4] - boxes[:, :2]], axis=1)


def cxcywh_to_xyxy(boxes: np.ndarray) -> np.ndarray:
    half = boxes[:, 2:4] / 2
    return np.concatenate([boxes[:, :2] - half, boxes[:, :2] + half], axis=1)
