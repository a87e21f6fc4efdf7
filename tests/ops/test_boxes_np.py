"""detect.ops.boxes_np: the one NumPy box IoU. It replaced two (the plots' matching, which did not clip areas,
and VOC's, which did); both give the numbers they gave, since a box with a negative side meets no other box."""

import numpy as np
import pytest
import torch

from detect.ops import boxes
from detect.ops.boxes_np import aligned_box_iou, box_area, box_iou

A = np.array([[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 1.0, 1.0]])
B = np.array([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 2.0], [5.0, 5.0, 6.0, 6.0]])


def _old_unclipped_iou(a, b, crowd=None):
    """The IoU detect.plots.matching had: areas as signed products."""
    inter = np.clip(np.minimum(a[:, None, 2:4], b[None, :, 2:4]) - np.maximum(a[:, None, :2], b[None, :, :2]),
                    0, None).prod(axis=2)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    if crowd is not None:
        union = np.where(crowd[None, :], area_a[:, None], union)
    return inter / np.maximum(union, 1e-12)


def _old_clipped_iou(a, b):
    """The IoU detect.evaluation.voc_metrics had: negative extents clipped to 0."""
    inter = np.prod((np.minimum(a[:, None, 2:], b[None, :, 2:]) - np.maximum(a[:, None, :2], b[None, :, :2]))
                    .clip(0), axis=2)
    area_a = np.prod((a[:, 2:] - a[:, :2]).clip(0), axis=1)
    area_b = np.prod((b[:, 2:] - b[:, :2]).clip(0), axis=1)
    return inter / np.maximum(area_a[:, None] + area_b[None, :] - inter, 1e-12)


def test_pairwise_values_by_hand_and_as_the_torch_one():
    expected = [[1 / 7, 1.0, 0.0], [0.0, 1 / 4, 0.0]]
    np.testing.assert_allclose(box_iou(A, B), expected, rtol=1e-12)
    np.testing.assert_allclose(boxes.box_iou(torch.from_numpy(A), torch.from_numpy(B)).numpy(), expected,
                               rtol=1e-6)
    assert box_iou(A, B[:0]).shape == (2, 0) and box_iou(A[:0], B).shape == (0, 3)


def test_a_crowd_column_is_intersection_over_the_first_boxs_area():
    """A person of area 4 inside a crowd region of area 100: IoU 0.04, but it overlaps the region fully."""
    person = np.array([[1.0, 1.0, 3.0, 3.0]])
    region = np.array([[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 10.0]])
    np.testing.assert_allclose(box_iou(person, region, np.array([False, True])), [[0.04, 1.0]], rtol=1e-12)


def test_negative_sides_have_area_zero_and_meet_nothing():
    inverted = np.array([[4.0, 0.0, 2.0, 2.0], [0.0, 3.0, 2.0, 1.0]])  # right < left; bottom < top
    assert box_area(inverted).tolist() == [0.0, 0.0]
    assert box_area(A).tolist() == [4.0, 1.0]
    assert box_iou(inverted, B).tolist() == [[0.0] * 3] * 2
    assert box_iou(B, inverted, np.array([True, False])).tolist() == [[0.0] * 2] * 3


@pytest.mark.parametrize("seed", [0, 1])
def test_both_old_callers_get_their_old_numbers(seed):
    """Random boxes, a third with a negative side and some of zero area: equal to the last bit to both former
    IoUs, the crowd form included (only the plots' matching had it)."""
    rng = np.random.default_rng(seed)

    def random_boxes(n):
        corner = rng.uniform(0, 50, (n, 2)).round(1)
        size = rng.uniform(-10, 30, (n, 2)).round(1)
        size[rng.random(n) < 0.1] = 0.0
        return np.concatenate([corner, corner + size], axis=1)

    a, b = random_boxes(40), random_boxes(30)
    crowd = rng.random(30) < 0.3
    assert (box_area(a) == 0).sum() > 10  # the cases the two formulas could differ on are there
    np.testing.assert_array_equal(box_iou(a, b), _old_clipped_iou(a, b))
    np.testing.assert_array_equal(box_iou(a, b), _old_unclipped_iou(a, b))
    np.testing.assert_array_equal(box_iou(a, b, crowd), _old_unclipped_iou(a, b, crowd))
    assert (box_iou(a, b) > 0).sum() > 20  # and overlapping pairs too


def test_aligned_pairs_are_the_pairwise_diagonal():
    rng = np.random.default_rng(3)
    a = np.concatenate([rng.uniform(0, 50, (20, 2)), rng.uniform(60, 120, (20, 2))], 1)
    b = a + rng.uniform(-40, 40, (20, 4))
    np.testing.assert_allclose(aligned_box_iou(a, b), np.diag(box_iou(a, b)))
    assert aligned_box_iou(np.array([[0, 0, 10, 10.0]]), np.array([[5, 0, 15, 10.0]]))[0] == pytest.approx(1 / 3)
