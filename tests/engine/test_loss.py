import math

import pytest
import torch

from detect.engine.assign import HeadSpec, build_targets
from detect.engine.loss import (
    LossConfig,
    YoloLoss,
    decode_positives,
    objectness_balance,
)
from tests.conftest import ROOT


def _head(new_coords=False, scale=1.0, **options):
    return HeadSpec(anchors=torch.tensor([[16.0, 16.0], [32.0, 24.0]]), scale_x_y=scale, new_coords=new_coords,
                    options=options)


def _targets():
    # image 0: one box centred (20, 28) px 16x16 on a 64x64 input; image 1: one box (40, 12) 30x22
    return torch.tensor([[0, 1, 20 / 64, 28 / 64, 16 / 64, 16 / 64], [1, 0, 40 / 64, 12 / 64, 30 / 64, 22 / 64]])


@pytest.mark.parametrize("new_coords,scale", [(False, 1.0), (False, 1.2), (True, 2.0)])
def test_decode_matches_darknet_rules(new_coords, scale):
    head = _head(new_coords, scale)
    raw = torch.rand(2, 2, 8, 8, 7)
    (t,) = build_targets([head], _targets(), [(8, 8)], (64, 64))
    boxes = decode_positives(raw, head, t, torch.tensor([8.0, 8.0]))
    for k in range(t.count):
        p = raw[t.image[k], t.anchor[k], t.gy[k], t.gx[k]]
        anchor = head.anchors[t.anchor[k]]
        if new_coords:
            xy = p[:2] * scale - (scale - 1) / 2
            wh = (2 * p[2:4]) ** 2 * anchor
        else:
            xy = torch.sigmoid(p[:2]) * scale - (scale - 1) / 2
            wh = torch.exp(p[2:4]) * anchor
        assert torch.allclose(boxes[k], torch.cat([xy * 8, wh]), atol=1e-5)


def _perfect_raw(head, targets, logit=12.0):
    """Raw maps whose decoded boxes equal the targets at every positive and whose objectness is ~0 elsewhere."""
    (t,) = build_targets([head], targets, [(8, 8)], (64, 64))
    raw = torch.zeros(2, 2, 8, 8, 7)
    raw[..., 4] = -logit
    rel = t.box[:, :2] / 8
    raw[t.image, t.anchor, t.gy, t.gx, 0:2] = torch.logit(rel.clamp(1e-6, 1 - 1e-6))
    raw[t.image, t.anchor, t.gy, t.gx, 2:4] = torch.log(t.box[:, 2:4] / t.anchor_wh)
    raw[t.image, t.anchor, t.gy, t.gx, 4] = logit
    raw[t.image, t.anchor, t.gy, t.gx, 5:] = -logit
    raw[t.image, t.anchor, t.gy, t.gx, 5 + t.cls] = logit
    return raw


def test_perfect_prediction_has_near_zero_loss():
    head = _head(iou_loss="ciou")
    targets = _targets()
    loss = YoloLoss([head], LossConfig(box=1.0, obj=1.0, cls=1.0, obj_balance={8: 1.0}))
    total, parts = loss([_perfect_raw(head, targets)], targets, (64, 64))
    assert parts[0] < 1e-4  # 1 - CIoU
    assert parts[1] < 1e-4 and parts[2] < 1e-4
    assert abs(float(total) - float(parts.sum())) < 1e-6
    # a wrong class costs exactly BCE(12 logit, 0) + BCE(-12 logit, 1) averaged over two classes
    wrong = targets.clone()
    wrong[:, 1] = 1 - wrong[:, 1]
    _, parts = loss([_perfect_raw(head, targets)], wrong, (64, 64))
    expected = (2 * math.log1p(math.exp(12.0))) / 2
    assert abs(float(parts[2]) - expected) < 1e-3


def test_gains_scale_parts_and_balance():
    head = _head()
    raw = torch.randn(2, 2, 8, 8, 7)
    base = YoloLoss([head], LossConfig(box=1.0, obj=1.0, cls=1.0, obj_balance={8: 1.0}))([raw], _targets(), (64, 64))[1]
    scaled = YoloLoss([head], LossConfig(box=0.05, obj=2.0, cls=0.5, obj_balance={8: 3.0}))([raw], _targets(),
                                                                                             (64, 64))[1]
    assert torch.allclose(scaled, base * torch.tensor([0.05, 6.0, 0.5]), rtol=1e-5)
    assert objectness_balance(8, None) == 4.0 and objectness_balance(32, None) == 0.4
    assert objectness_balance(30, None) == 0.4


def test_loss_is_a_mean_over_the_local_batch():
    """Two ranks holding half of the batch each average to the full-batch loss (same positives per half)."""
    head = _head()
    torch.manual_seed(0)
    raw = torch.randn(2, 2, 8, 8, 7)
    t = torch.tensor([[0, 1, 20 / 64, 28 / 64, 16 / 64, 16 / 64], [1, 1, 20 / 64, 28 / 64, 16 / 64, 16 / 64]])
    loss = YoloLoss([head], LossConfig())
    full, _ = loss([raw], t, (64, 64))
    halves = [loss([raw[i:i + 1]], t[i:i + 1].clone().index_fill_(1, torch.tensor([0]), 0.0), (64, 64))[0]
              for i in range(2)]
    assert torch.allclose(full, (halves[0] + halves[1]) / 2, rtol=1e-5)


def test_new_coords_probabilities_and_gradients():
    head = _head(new_coords=True, scale=2.0, iou_loss="giou")
    raw = torch.rand(2, 2, 8, 8, 7).clamp(0.05, 0.95).requires_grad_()
    loss = YoloLoss([head], LossConfig())
    total, parts = loss([raw], _targets(), (64, 64))
    assert torch.isfinite(total) and (parts > 0).all()
    total.backward()
    (t,) = build_targets([head], _targets(), [(8, 8)], (64, 64))
    box_grad = raw.grad[..., :4].abs().sum(-1)
    mask = torch.zeros_like(box_grad, dtype=torch.bool)
    mask[t.image, t.anchor, t.gy, t.gx] = True
    assert (box_grad[~mask] == 0).all() and (box_grad[mask] > 0).all()


def test_optimising_raw_maps_reduces_the_loss():
    head = _head(scale=1.1)
    raw = torch.zeros(2, 2, 8, 8, 7, requires_grad=True)
    loss = YoloLoss([head], LossConfig())
    opt = torch.optim.Adam([raw], lr=0.1)
    first = None
    for _ in range(60):
        total, _ = loss([raw], _targets(), (64, 64))
        first = float(total.detach()) if first is None else first
        opt.zero_grad()
        total.backward()
        opt.step()
    assert float(total.detach()) < 0.1 * first


def test_label_smoothing_targets():
    head = _head(label_smooth_eps=0.2)
    raw = torch.zeros(2, 2, 8, 8, 7)
    _, parts = YoloLoss([head], LossConfig(cls=1.0))([raw], _targets(), (64, 64))
    # zero logits: BCE is log 2 for every target value
    assert abs(float(parts[2]) - math.log(2)) < 1e-5
    raw[..., 5:] = 3.0
    _, parts = YoloLoss([head], LossConfig(cls=1.0))([raw], _targets(), (64, 64))
    lp, l1p = -math.log1p(math.exp(-3.0)), -math.log1p(math.exp(3.0))
    hi, lo = 0.9, 0.1
    expected = -((hi * lp + (1 - hi) * l1p) + (lo * lp + (1 - lo) * l1p)) / 2
    assert abs(float(parts[2]) - expected) < 1e-5


def test_invalid_head_iou_loss_and_config():
    with pytest.raises(ValueError, match="iou_loss"):
        YoloLoss([_head(iou_loss="wat")], LossConfig())
    with pytest.raises(ValueError, match="iou_loss"):
        LossConfig(iou_loss="l1")


@pytest.mark.parametrize("cfg", ["yolo-mini.cfg"])
def test_decode_agrees_with_the_model_heads(cfg):

    from detect.darknet.model import Darknet

    model = Darknet(str(ROOT / "cfg" / cfg))
    torch.manual_seed(0)
    for head in model.heads:
        spec = HeadSpec.from_head(head)
        stride = head.stride[1]
        grid = int(256 / stride)
        raw = torch.randn(2, 3, grid, grid, 9) * 0.5
        t = torch.tensor([[0, 1, 0.3, 0.6, 0.15, 0.2], [1, 2, 0.7, 0.2, 0.25, 0.2]])
        (assigned,) = build_targets([spec], t, [(grid, grid)], (256, 256), anchor_t=100.0)
        mine = decode_positives(raw, spec, assigned, torch.tensor([stride, stride]))
        theirs = head.decode(raw, (256, 256))[assigned.image, assigned.anchor, assigned.gy, assigned.gx, :4]
        corner = torch.stack([assigned.gx, assigned.gy], 1).float() * stride
        assert torch.allclose(torch.cat([mine[:, :2] + corner, mine[:, 2:]], 1), theirs, atol=1e-4)


def test_channels_last_model_gives_the_same_loss_and_gradients():
    """The CUDA training layout (NHWC activations, so the heads' raw maps have NHWC strides) on the CPU."""
    from detect.darknet.model import Darknet
    from detect.engine.config import LossConfig

    torch.manual_seed(0)
    model = Darknet("cfg/yolo-mini.cfg", img_size=64, num_classes=4).train()
    x = torch.rand(2, 3, 64, 64)
    targets = torch.tensor([[0, 1, 0.5, 0.5, 0.3, 0.4], [1, 2, 0.3, 0.6, 0.2, 0.2]])
    loss_fn = YoloLoss.for_model(model, LossConfig())
    results = []
    for channels_last in (False, True):
        if channels_last:
            model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        model.zero_grad()
        raw = model(x)
        total, parts = loss_fn(raw, targets, (64, 64))
        total.backward()
        results.append((parts, torch.cat([p.grad.flatten() for p in model.parameters()])))
    (parts_a, grads_a), (parts_b, grads_b) = results
    assert torch.allclose(parts_a, parts_b, rtol=1e-5, atol=1e-7)
    assert torch.allclose(grads_a, grads_b, rtol=1e-4, atol=1e-6)
