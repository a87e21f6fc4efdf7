"""The loss gradient DDP averages equals the gradient of one process that sees the whole global batch."""

import torch

from detect.engine.assign import HeadSpec
from detect.engine.loss import LossConfig, YoloLoss
from tests.support.distributed import run_distributed

# 4 images on 64x64; images 0-1 hold 4 boxes, images 2-3 one box: the two ranks get unequal positives
TARGETS = torch.tensor([
    [0, 1, 0.30, 0.40, 0.25, 0.25], [0, 0, 0.70, 0.60, 0.40, 0.30], [1, 2, 0.50, 0.50, 0.20, 0.35],
    [1, 1, 0.20, 0.80, 0.30, 0.20], [3, 0, 0.60, 0.30, 0.45, 0.40],
])


def _loss_fn():
    heads = [HeadSpec(anchors=torch.tensor([[16.0, 16.0], [32.0, 24.0]]), options={"iou_loss": "ciou"}),
             HeadSpec(anchors=torch.tensor([[8.0, 8.0], [12.0, 16.0]]), scale_x_y=1.2)]
    return YoloLoss(heads, LossConfig())


def _raw(images):
    g = torch.Generator().manual_seed(0)
    maps = [torch.randn(4, 2, 4, 4, 8, generator=g), torch.randn(4, 2, 8, 8, 8, generator=g)]
    return [m[images].clone().requires_grad_(True) for m in maps]


def _rank_loss_and_grads(rank, world):
    images = [0, 1] if rank == 0 else [2, 3]
    raw = _raw(images)
    local = TARGETS[(TARGETS[:, 0] >= images[0]) & (TARGETS[:, 0] <= images[-1])].clone()
    local[:, 0] -= images[0]
    loss, _ = _loss_fn()(raw, local, (64, 64))
    loss.backward()
    return loss.item(), [r.grad for r in raw]


def test_gradient_does_not_depend_on_world_size():
    raw = _raw([0, 1, 2, 3])
    full, _ = _loss_fn()(raw, TARGETS, (64, 64))
    full.backward()
    per_rank = run_distributed(_rank_loss_and_grads, 2)
    # DDP averages the ranks' gradients: (1/W) * d loss_r / d raw_r must equal d full / d (rank r's images)
    assert abs(sum(loss for loss, _ in per_rank) / 2 - full.item()) < 1e-5
    for r, (_, grads) in enumerate(per_rank):
        for g_rank, g_full in zip(grads, raw):
            expected = g_full.grad[2 * r: 2 * r + 2]
            assert torch.allclose(g_rank / 2, expected, rtol=1e-4, atol=1e-7)
