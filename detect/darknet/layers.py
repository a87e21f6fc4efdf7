"""Darknet layers that hold weights or act on one input: convolutional, connected, batchnorm, activation,
avgpool, dropout, softmax, empty (reference §2.1, §2.12-2.16).

Layers with weights expose `darknet_tensors()`: (array name, tensor) pairs in `.weights` file order (§4.2).
"""

from __future__ import annotations

import torch
from torch import nn

from .activations import Activation

BN_EPS = 1e-5  # Darknet's eps in every inference path (§4.6)
BN_MOMENTUM = 0.01  # Darknet's GPU running-statistics factor (§4.6)


class ConvBlock(nn.Module):
    """Conv2d, then BatchNorm (whose beta is Darknet's "biases") or a conv bias, then the activation."""

    def __init__(self, in_channels, filters, size, stride, padding, dilation, groups, batch_normalize,
                 activation: Activation, flipped: bool = False):
        super().__init__()
        self.flipped = flipped  # cfg `flipped=1`: .weights files store the kernel as [(C/groups)·k·k][n]
        self.conv = nn.Conv2d(in_channels, filters, size, stride=stride, padding=padding * dilation,
                              dilation=dilation, groups=groups, bias=not batch_normalize)
        self.bn = nn.BatchNorm2d(filters, eps=BN_EPS, momentum=BN_MOMENTUM) if batch_normalize else None
        self.act = activation

    def forward(self, x):
        x = self.conv(x)
        if self.bn is not None:
            x = self.bn(x)
        return self.act(x)

    def darknet_tensors(self):
        if self.bn is None:
            return [("biases", self.conv.bias), ("weights", self.conv.weight)]
        return [("biases", self.bn.bias), ("scales", self.bn.weight), ("rolling_mean", self.bn.running_mean),
                ("rolling_variance", self.bn.running_var), ("weights", self.conv.weight)]

    @torch.no_grad()
    def fuse(self) -> None:
        """Fold BatchNorm into the convolution, in double precision like Darknet's fuse_conv_batchnorm."""
        if self.bn is None:
            return
        conv, bn = self.conv, self.bn
        factor = bn.weight.double() / torch.sqrt(bn.running_var.double() + bn.eps)
        fused = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride,
                          padding=conv.padding, dilation=conv.dilation, groups=conv.groups, bias=True)
        fused = fused.to(device=conv.weight.device, dtype=conv.weight.dtype)
        fused.weight.copy_(conv.weight.double() * factor.view(-1, 1, 1, 1))
        fused.bias.copy_(bn.bias.double() - factor * bn.running_mean.double())
        self.conv, self.bn = fused, None


class Connected(nn.Module):
    """Fully connected on the C,H,W-flattened input: W·x, optional BN, + biases, activation; output (out,1,1)."""

    def __init__(self, inputs, outputs, batch_normalize, activation: Activation):
        super().__init__()
        self.linear = nn.Linear(inputs, outputs, bias=not batch_normalize)
        self.bn = nn.BatchNorm1d(outputs, eps=BN_EPS, momentum=BN_MOMENTUM) if batch_normalize else None
        self.act = activation

    def forward(self, x):
        y = self.linear(x.flatten(1))
        if self.bn is not None:
            y = self.bn(y)
        return self.act(y).view(y.shape[0], -1, 1, 1)

    def darknet_tensors(self):
        if self.bn is None:
            return [("biases", self.linear.bias), ("weights", self.linear.weight)]
        # BN arrays come after the weights for [connected], unlike [convolutional] (§4.2)
        return [("biases", self.bn.bias), ("weights", self.linear.weight), ("scales", self.bn.weight),
                ("rolling_mean", self.bn.running_mean), ("rolling_variance", self.bn.running_var)]


class BatchNormLayer(nn.Module):
    """A stand-alone [batchnorm]: scales·(x−mean)/sqrt(var+eps) + biases."""

    def __init__(self, channels):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)

    def forward(self, x):
        return self.bn(x)

    def darknet_tensors(self):
        return [("biases", self.bn.bias), ("scales", self.bn.weight), ("rolling_mean", self.bn.running_mean),
                ("rolling_variance", self.bn.running_var)]


class GlobalAvgPool(nn.Module):
    """[avgpool]: mean over H×W, output (C,1,1)."""

    def forward(self, x):
        return x.mean((2, 3), keepdim=True)


class Softmax(nn.Module):
    """[softmax]: softmax of x/temperature within each of `groups` contiguous chunks of the flattened input."""

    def __init__(self, groups: int, temperature: float):
        super().__init__()
        self.groups, self.temperature = groups, temperature

    def forward(self, x):
        flat = x.flatten(1)
        chunks = flat.view(flat.shape[0], self.groups, -1) / self.temperature
        return chunks.softmax(-1).view(flat.shape)

    def extra_repr(self) -> str:
        return f"groups={self.groups}, temperature={self.temperature}"


class Identity(nn.Module):
    """[empty]/[silence], and [dropout] at inference (Darknet reuses the previous layer's buffer)."""

    def forward(self, x):
        return x
