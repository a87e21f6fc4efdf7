"""Darknet layers that read other layers' outputs: route, shortcut, sam, scale_channels (reference §2.3, 2.4,
2.10, 2.11). Each has `sources` (absolute layer indices) and `forward(x, inputs)` with x = previous output."""

from __future__ import annotations

import torch
from torch import nn

from .activations import Activation


class Route(nn.Module):
    """Concatenate chunk `group_id` of `groups` equal channel chunks of every source."""

    def __init__(self, sources: list[int], groups: int, group_id: int):
        super().__init__()
        self.sources, self.groups, self.group_id = sources, groups, group_id

    def forward(self, x, inputs):
        if self.groups > 1:
            inputs = [t.chunk(self.groups, 1)[self.group_id] for t in inputs]
        return inputs[0] if len(inputs) == 1 else torch.cat(inputs, 1)

    def extra_repr(self) -> str:
        return f"sources={self.sources}, groups={self.groups}, group_id={self.group_id}"


def _add_leading(out: torch.Tensor, addend: torch.Tensor) -> torch.Tensor:
    """out[:, :m] + addend[:, :m] with m = min of the channel counts; no in-place change of either tensor."""
    c, c_add = out.shape[1], addend.shape[1]
    if c_add == c:
        return out + addend
    if c_add > c:
        return out + addend[:, :c]
    return torch.cat([out[:, :c_add] + addend, out[:, c_add:]], 1)


class Shortcut(nn.Module):
    """Sum of the previous output and the `from` layers (only the leading min(C, C_from) channels of each),
    optionally weighted (per_feature or per_channel, relu or softmax normalised), then the activation.

    relu normalisation uses max(w, 0.001), the form of Darknet's GPU kernel and of its inference-time fuse
    (the CPU training path uses max(w, 0)); this is what Darknet-trained weights were trained and run with.
    """

    def __init__(self, sources: list[int], channels: int, weights_type: str, normalization: str,
                 activation: Activation):
        super().__init__()
        self.sources, self.channels = sources, channels
        self.weights_type, self.normalization = weights_type, normalization
        self.act = activation
        count = len(sources) + 1
        if weights_type == "per_feature":
            self.weights = nn.Parameter(torch.ones(count))
        elif weights_type == "per_channel":
            self.weights = nn.Parameter(torch.ones(count * channels))  # layout w[k·C + c] as in the file
        else:
            self.weights = None

    def normalized_weights(self) -> torch.Tensor:
        """[n+1, 1] (per_feature) or [n+1, C] (per_channel), normalised across the n+1 inputs."""
        w = self.weights.view(len(self.sources) + 1, -1)
        if self.normalization == "softmax":
            e = torch.exp(w - w.amax(0, keepdim=True))
            return e / (0.0001 + e.sum(0, keepdim=True))
        positive = w.clamp(min=0.001)
        return positive / (0.0001 + positive.sum(0, keepdim=True))

    def forward(self, x, inputs):
        if self.weights is None:
            out = x
            for addend in inputs:
                out = _add_leading(out, addend)
            return self.act(out)
        w = self.normalized_weights()
        out = x * w[0].view(1, -1, 1, 1)
        for k, addend in enumerate(inputs, start=1):
            m = min(self.channels, addend.shape[1])
            out = _add_leading(out, addend[:, :m] * w[k].view(1, -1, 1, 1)[:, : m if w.shape[1] > 1 else 1])
        return self.act(out)

    def darknet_tensors(self):
        return [] if self.weights is None else [("weights", self.weights)]

    def extra_repr(self) -> str:
        return f"sources={self.sources}, weights_type={self.weights_type}, normalization={self.normalization}"


class Sam(nn.Module):
    """Spatial attention: act(x · from), element-wise."""

    def __init__(self, source: int, activation: Activation):
        super().__init__()
        self.sources, self.act = [source], activation

    def forward(self, x, inputs):
        return self.act(x * inputs[0])


class ScaleChannels(nn.Module):
    """act(x · from), x being (C,1,1) per channel (scale_wh=0) or (1,H,W) per position (scale_wh=1)."""

    def __init__(self, source: int, scale_wh: bool, activation: Activation):
        super().__init__()
        self.sources, self.scale_wh, self.act = [source], scale_wh, activation

    def forward(self, x, inputs):
        return self.act(x * inputs[0])  # broadcasting covers both modes; shapes are checked at build time
