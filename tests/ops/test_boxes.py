import math

import pytest
import torch

from detect.ops.boxes import (
    aligned_iou,
    box_iou,
    clip_boxes_,
    xywh_to_xyxy,
    xyxy_to_xywh,
)


def test_conversions_round_trip_and_values():
    xywh = torch.tensor([[10.0, 20.0, 4.0, 6.0], [0.5, 0.5, 1.0, 1.0]])
    xyxy = xywh_to_xyxy(xywh)
    assert torch.equal(xyxy, torch.tensor([[8.0, 17.0, 12.0, 23.0], [0.0, 0.0, 1.0, 1.0]]))
    assert torch.equal(xyxy_to_xywh(xyxy), xywh)
    # leading dimensions are kept
    assert xywh_to_xyxy(torch.zeros(2, 3, 5, 4)).shape == (2, 3, 5, 4)


def test_box_iou_pairwise_matrix():
    a = torch.tensor([[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 1.0, 1.0]])
    b = torch.tensor([[1.0, 1.0, 3.0, 3.0], [0.0, 0.0, 2.0, 2.0], [5.0, 5.0, 6.0, 6.0]])
    iou = box_iou(a, b)
    expected = torch.tensor([[1 / 7, 1.0, 0.0], [0.0, 1 / 4, 0.0]])
    assert iou.shape == (2, 3)
    assert torch.allclose(iou, expected, atol=1e-6)


def test_aligned_iou_family_overlapping_squares():
    a = torch.tensor([0.0, 0.0, 2.0, 2.0])
    b = torch.tensor([1.0, 1.0, 3.0, 3.0])
    # inter 1, union 7, enclosing 3x3 (area 9, diagonal^2 18), centre distance^2 2
    assert aligned_iou(a, b, "iou", xywh=False).item() == pytest.approx(1 / 7, abs=1e-6)
    assert aligned_iou(a, b, "giou", xywh=False).item() == pytest.approx(1 / 7 - 2 / 9, abs=1e-6)
    assert aligned_iou(a, b, "diou", xywh=False).item() == pytest.approx(1 / 7 - 2 / 18, abs=1e-6)
    # same aspect ratio: CIoU adds nothing to DIoU
    assert aligned_iou(a, b, "ciou", xywh=False).item() == pytest.approx(1 / 7 - 2 / 18, abs=1e-6)


def test_aligned_iou_disjoint_and_aspect_penalty():
    a = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 2.0, 2.0]])
    b = torch.tensor([[2.0, 0.0, 3.0, 1.0], [0.0, 0.0, 4.0, 2.0]])
    giou = aligned_iou(a, b, "giou", xywh=False)
    diou = aligned_iou(a, b, "diou", xywh=False)
    ciou = aligned_iou(a, b, "ciou", xywh=False)
    # disjoint: iou 0, enclosing 3x1, union 2, centres 2 apart, diagonal^2 10
    assert giou[0].item() == pytest.approx(-1 / 3, abs=1e-6)
    assert diou[0].item() == pytest.approx(-0.4, abs=1e-6)
    # 2x2 inside 4x2: iou 0.5, centre distance^2 1, diagonal^2 20
    v = 4 / math.pi**2 * (math.atan(2.0) - math.atan(1.0)) ** 2
    alpha = v / (1 - 0.5 + v)
    assert diou[1].item() == pytest.approx(0.45, abs=1e-6)
    assert ciou[1].item() == pytest.approx(0.45 - alpha * v, abs=1e-6)


def test_aligned_iou_xywh_broadcasting_and_gradient():
    pred = torch.tensor([[[5.0, 5.0, 2.0, 2.0]], [[6.0, 5.0, 2.0, 2.0]]], requires_grad=True)  # [2,1,4]
    target = torch.tensor([[5.0, 5.0, 2.0, 2.0], [5.0, 6.0, 2.0, 4.0], [50.0, 50.0, 1.0, 1.0]])  # [3,4]
    iou = aligned_iou(pred, target, "ciou")
    assert iou.shape == (2, 3)
    assert iou[0, 0].item() == pytest.approx(1.0, abs=1e-5)
    # centre (6,5) w2h2 vs (5,5): inter 1x2=2, union 6 -> iou 1/3
    assert aligned_iou(pred, target, "iou")[1, 0].item() == pytest.approx(1 / 3, abs=1e-6)
    (1 - iou).sum().backward()
    assert torch.isfinite(pred.grad).all() and pred.grad.abs().sum() > 0


def test_degenerate_boxes_stay_finite():
    zero = torch.zeros(3, 4)
    for kind in ("iou", "giou", "diou", "ciou"):
        assert torch.isfinite(aligned_iou(zero, zero, kind)).all()
    with pytest.raises(ValueError, match="siou"):
        aligned_iou(zero, zero, "siou")


def test_clip_boxes_in_place():
    boxes = torch.tensor([[-5.0, -1.0, 120.0, 40.0], [10.0, 20.0, 30.0, 90.0]])
    out = clip_boxes_(boxes, h=50, w=100)
    assert out is boxes
    assert torch.equal(boxes, torch.tensor([[0.0, 0.0, 100.0, 40.0], [10.0, 20.0, 30.0, 50.0]]))
