"""The step's loss on padded targets: fixed shapes, the same figures as the positives alone, one compiled graph."""

import torch
import torch.nn.functional as F

from detect.engine.assign import HeadSpec, assign_padded, build_targets, pad_targets, target_capacity
from detect.engine.config import LossConfig
from detect.engine.loss import YoloLoss, decode_positives, objectness_balance
from detect.ops.boxes import aligned_iou


def _heads():
    coarse = HeadSpec(anchors=torch.tensor([[24.0, 30.0], [40.0, 36.0], [60.0, 50.0]]), scale_x_y=2.0,
                      new_coords=True, options={"iou_loss": "ciou"})
    fine = HeadSpec(anchors=torch.tensor([[6.0, 8.0], [12.0, 10.0], [16.0, 20.0]]), scale_x_y=1.0,
                    options={"iou_loss": "ciou", "label_smooth_eps": 0.1})
    return [coarse, fine]


def _batch(seed=0, n=37, images=4, classes=5):
    g = torch.Generator().manual_seed(seed)
    targets = torch.cat([torch.randint(0, images, (n, 1), generator=g).float(),
                         torch.randint(0, classes, (n, 1), generator=g).float(),
                         torch.rand(n, 2, generator=g) * 0.9 + 0.05, torch.rand(n, 2, generator=g) * 0.4 + 0.02], 1)
    raw = [torch.randn(images, 3, 4, 4, 5 + classes, generator=g) * 0.5,
           torch.randn(images, 3, 8, 8, 5 + classes, generator=g) * 0.5]
    raw[0][..., :] = raw[0].sigmoid()  # the new_coords head's maps are probabilities
    return raw, targets


def _reference(heads, raw_maps, targets, config):
    """The loss written over the compact positives (nonzero-shaped): what the padded rows must reproduce."""
    grids = [(r.shape[2], r.shape[3]) for r in raw_maps]
    assigned = build_targets(heads, targets, grids, (64, 64), config.anchor_t)
    parts = torch.zeros(3)
    for raw, head, t, (gh, gw) in zip(raw_maps, heads, assigned, grids):
        n = max(t.count, 1)
        pred = decode_positives(raw, head, t, torch.tensor([64 / gw, 64 / gh]))
        iou = aligned_iou(pred, t.box, kind="ciou", xywh=True)
        parts[0] += (1 - iou).sum() / n
        obj = torch.zeros(raw.shape[:-1])
        for k in range(t.count):
            slot = (t.image[k], t.anchor[k], t.gy[k], t.gx[k])
            obj[slot] = max(float(obj[slot]), float(iou[k].clamp(min=0)))
        p = raw[..., 4]
        obj_bce = F.binary_cross_entropy(p.clamp(1e-7, 1 - 1e-7), obj) if head.new_coords \
            else F.binary_cross_entropy_with_logits(p, obj)
        parts[1] += obj_bce * objectness_balance(64 / gw, config.obj_balance)
        eps = float(head.options.get("label_smooth_eps", 0.0))
        k = raw.shape[-1] - 5
        target = torch.full((t.count, k), eps / 2)
        target[torch.arange(t.count), t.cls] = 1 - eps / 2
        logits = raw[t.image, t.anchor, t.gy, t.gx, 5:]
        cls = F.binary_cross_entropy(logits.clamp(1e-7, 1 - 1e-7), target, reduction="sum") if head.new_coords \
            else F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
        parts[2] += cls / (n * k)
    return parts * torch.tensor([config.box, config.obj, config.cls])


def test_padded_rows_compact_to_the_positives_in_order():
    heads, (_, targets) = _heads(), _batch()
    padded, valid = pad_targets(targets, 64)
    rows = assign_padded(heads, padded, valid, [(4, 4), (8, 8)], (64, 64))
    assert [r.count for r in rows] == [5 * 3 * 64, 1 * 3 * 64]  # cells x anchors x capacity: fixed by the capacity
    for r, c in zip(rows, build_targets(heads, targets, [(4, 4), (8, 8)], (64, 64))):
        kept = r.compact()
        assert kept.count == c.count > 0
        for name in ("image", "anchor", "gy", "gx", "box", "cls", "anchor_wh"):
            assert torch.equal(getattr(kept, name), getattr(c, name)), name


def test_padded_loss_equals_the_positives_loss_at_any_capacity():
    heads, (raw, targets) = _heads(), _batch()
    config = LossConfig()
    expected = _reference(heads, raw, targets, config)
    loss = YoloLoss(heads, config)
    total, parts = loss(raw, targets, (64, 64))
    assert torch.allclose(parts, expected, rtol=1e-5, atol=1e-7)
    assert loss.capacity == 64
    wide, valid = pad_targets(targets, 512)  # more padding, the same figures and gradients
    grads = []
    for maps, t, v in ((raw, *pad_targets(targets, 64)), (raw, wide, valid)):
        maps = [m.clone().requires_grad_() for m in maps]
        loss.padded_loss(maps, t, v, (64, 64))[0].backward()
        grads.append(torch.cat([m.grad.flatten() for m in maps]))
    assert torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-8)
    assert torch.isfinite(grads[0]).all() and grads[0].abs().sum() > 0


def test_capacity_grows_in_powers_of_two_and_empty_batches_train_objectness_only():
    assert target_capacity(0) == 64 and target_capacity(64) == 64 and target_capacity(65) == 128
    assert target_capacity(10, current=128) == 128 and target_capacity(300, current=128) == 512
    heads, (raw, targets) = _heads(), _batch()
    loss = YoloLoss(heads, LossConfig())
    loss(raw, _batch(n=100)[1], (64, 64))
    assert loss.capacity == 128
    loss(raw, targets, (64, 64))
    assert loss.capacity == 128  # kept: a smaller batch does not change the shapes
    _, parts = loss(raw, targets[:0], (64, 64))
    assert parts[0] == 0 and parts[2] == 0 and parts[1] > 0


def test_the_loss_with_its_assignment_compiles_as_one_graph_and_equals_eager():
    heads, (raw, targets) = _heads(), _batch(seed=3)
    loss = YoloLoss(heads, LossConfig(), class_weights=torch.linspace(0.5, 2.0, 5))
    padded, valid = loss.pad(targets, "cpu")
    compiled = torch.compile(loss.padded_loss, fullgraph=True, dynamic=False)  # fullgraph: a graph break raises
    results = []
    for fn in (loss.padded_loss, compiled):
        maps = [m.clone().requires_grad_() for m in raw]
        total, parts = fn(maps, padded, valid, (64, 64))
        total.backward()
        results.append((total.detach(), parts, torch.cat([m.grad.flatten() for m in maps])))
    (t_e, p_e, g_e), (t_c, p_c, g_c) = results
    assert torch.allclose(t_e, t_c, rtol=1e-5) and torch.allclose(p_e, p_c, rtol=1e-5, atol=1e-7)
    assert torch.allclose(g_e, g_c, rtol=1e-4, atol=1e-7)
