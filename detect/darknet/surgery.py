"""Changes to a built model before training: freezing a prefix of layers, the from-scratch head priors, and the
BatchNorm momentum. Each works on a `Darknet` in place."""

from __future__ import annotations

import logging
import math

import torch

from .layers import ConvBlock
from .yolo import YoloHead

log = logging.getLogger(__name__)

_BATCH_NORMS = torch.nn.modules.batchnorm._BatchNorm


def backbone_length(model) -> int:
    """Layers before the straight chain of convolutions that feeds the first [yolo] head."""
    first_head = next(i for i, m in enumerate(model.layers) if isinstance(m, YoloHead))
    i = first_head - 1
    while i >= 0 and isinstance(model.layers[i], ConvBlock):
        i -= 1
    return i + 1


def freeze_layers(model, spec: str | None) -> list:
    """Freeze the first layers ('backbone' or N): no gradients, BatchNorm kept in eval. Returns those BN modules."""
    if spec is None:
        return []
    count = backbone_length(model) if spec == "backbone" else int(spec)
    if count > len(model.layers):
        raise ValueError(f"--freeze {spec}: the cfg has only {len(model.layers)} layers")
    frozen_bn = []
    for layer in list(model.layers)[:count]:
        for p in layer.parameters():
            p.requires_grad_(False)
        frozen_bn += [m for m in layer.modules() if isinstance(m, _BATCH_NORMS)]
    log.info("froze %d layers (%s)", count, spec)
    return frozen_bn


def prior_biases(model, head):
    """The feeder conv's biases as [A, 5+K] rows of `head`, or None where a from-scratch start sets no priors:
    a BatchNorm feeder has no conv bias, and new_coords heads (logistic feeders) start from the plain init."""
    feeder = model.layers[head.layer_index - 1]
    if not isinstance(feeder, ConvBlock) or feeder.conv.bias is None or head.new_coords:
        return None
    return feeder.conv.bias.view(head.num_anchors, -1)


def class_prior_logit(num_classes: int) -> float:
    """The from-scratch class bias: about 0.6 / K probability for each class."""
    return math.log(0.6 / max(num_classes - 0.99, 0.01))


def init_head_priors(model, img_size: int, heads=None) -> None:
    """From-scratch start: bias the convs feeding the heads to a low objectness prior (about 8 objects per
    image spread over each head's cells) and uniform class probabilities, so early steps are not spent there.
    `heads` (indices into model.heads) limits it to those heads, e.g. ones no weights reached."""
    for i, head in enumerate(model.heads):
        bias = prior_biases(model, head)
        if bias is None or (heads is not None and i not in heads):
            continue
        prior = min(8.0 / (img_size / max(head.stride)) ** 2, 0.5)
        with torch.no_grad():
            bias[:, 4] += math.log(prior / (1.0 - prior))
            bias[:, 5:] += class_prior_logit(head.num_classes)


def set_bn_momentum(model, momentum: float | None) -> None:
    """BatchNorm running-statistics factor (PyTorch convention) for every BatchNorm; None keeps the model's
    (Darknet's 0.01)."""
    if momentum is None:
        return
    for m in model.modules():
        if isinstance(m, _BATCH_NORMS):
            m.momentum = float(momentum)
