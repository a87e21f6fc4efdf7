"""Darknet layers that change the spatial layout: maxpool, local_avgpool, upsample, reorg3d, reorg
(reference §2.5, §2.6, §2.9)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def pool_output_size(size_in: int, padding: int, size: int, stride: int) -> int:
    """Darknet's pooling shape rule: (in + total padding − size) // stride + 1."""
    return (size_in + padding - size) // stride + 1


def pool_pads(h: int, w: int, size: int, stride_y: int, stride_x: int, padding: int) -> tuple[int, int, int, int]:
    """(left, right, top, bottom) padding so PyTorch's windows land where Darknet's do (left/top = padding//2)."""
    before = padding // 2
    out_h = pool_output_size(h, padding, size, stride_y)
    out_w = pool_output_size(w, padding, size, stride_x)
    right = max(0, (out_w - 1) * stride_x + size - before - w)
    bottom = max(0, (out_h - 1) * stride_y + size - before - h)
    return before, right, before, bottom


class MaxPool(nn.Module):
    """[maxpool]: windows start at −padding//2, positions outside the map count as −∞ (never 0).
    With `depth` it pools across channels: output channel g = max over channels g, g+out_channels, …"""

    def __init__(self, size, stride_y, stride_x, padding, depth=False, out_channels=1):
        super().__init__()
        self.size, self.stride_y, self.stride_x, self.padding = size, stride_y, stride_x, padding
        self.depth, self.out_channels = depth, out_channels
        self.by_views = False  # CPU inference (detect.darknet.packed.pack_model): `view_max_pool`

    def forward(self, x):
        if self.depth:
            return self._depth_pool(x)
        left, right, top, bottom = pool_pads(x.shape[2], x.shape[3], self.size, self.stride_y, self.stride_x,
                                              self.padding)
        if self.by_views and not (torch.is_grad_enabled() and x.requires_grad):
            return view_max_pool(x, self.size, self.stride_y, self.stride_x, (left, right, top, bottom))
        stride = (self.stride_y, self.stride_x)
        if left == right == top == bottom and left <= self.size // 2:
            return F.max_pool2d(x, self.size, stride, padding=left)  # PyTorch pads with −∞ internally
        if left or right or top or bottom:
            x = F.pad(x, (left, right, top, bottom), value=float("-inf"))
        return F.max_pool2d(x, self.size, stride)

    def _depth_pool(self, x):
        n, c, h, w = x.shape
        groups = -(-c // self.out_channels)
        missing = groups * self.out_channels - c
        if missing:
            x = torch.cat([x, x.new_full((n, missing, h, w), float("-inf"))], 1)
        return x.reshape(n, groups, self.out_channels, h, w).amax(1)

    def extra_repr(self) -> str:
        return (f"size={self.size}, stride=({self.stride_y}, {self.stride_x}), padding={self.padding}, "
                f"depth={self.depth}")


def view_max_pool(x: torch.Tensor, size: int, stride_y: int, stride_x: int,
                  pads: tuple[int, int, int, int]) -> torch.Tensor:
    """max_pool2d as running maxima of strided views, separably (a row pass, then a column pass), outside the
    map -inf: the same values as F.max_pool2d, in x's memory layout. On the CPU with NHWC activations each pass
    runs along contiguous channels and computes no indices (docs/benchmarks.md, "The packed PyTorch path", has the
    figures). For inference only (no gradient)."""
    if any(pads):
        x = F.pad(x, pads, value=float("-inf"))  # keeps NHWC activations NHWC
    out_h, out_w = (x.shape[2] - size) // stride_y + 1, (x.shape[3] - size) // stride_x + 1
    rows = _running_max([x[:, :, :, j:j + (out_w - 1) * stride_x + 1:stride_x] for j in range(size)])
    return _running_max([rows[:, :, i:i + (out_h - 1) * stride_y + 1:stride_y] for i in range(size)])


def _running_max(views: list[torch.Tensor]) -> torch.Tensor:
    if len(views) == 1:
        return views[0].clone()
    out = torch.maximum(views[0], views[1])
    for view in views[2:]:
        torch.maximum(out, view, out=out)
    return out


class LocalAvgPool(nn.Module):
    """[local_avgpool]: the maxpool window placement, averaging only the positions inside the map."""

    def __init__(self, size, stride_y, stride_x, padding):
        super().__init__()
        self.size, self.stride_y, self.stride_x, self.padding = size, stride_y, stride_x, padding

    def forward(self, x):
        pads = pool_pads(x.shape[2], x.shape[3], self.size, self.stride_y, self.stride_x, self.padding)
        stride = (self.stride_y, self.stride_x)
        ones = x.new_ones((1, 1) + tuple(x.shape[2:]))
        total = F.avg_pool2d(F.pad(x, pads), self.size, stride, divisor_override=1)
        count = F.avg_pool2d(F.pad(ones, pads), self.size, stride, divisor_override=1)
        return total / count


class Upsample(nn.Module):
    """[upsample]: stride>0 nearest ×stride; stride<0 sums each (−stride)² block; times `scale`."""

    def __init__(self, stride: int, scale: float):
        super().__init__()
        self.stride, self.scale = stride, scale

    def forward(self, x):
        if self.stride > 0:
            y = x if self.stride == 1 else F.interpolate(x, scale_factor=self.stride, mode="nearest")
        else:
            s = -self.stride
            n, c, h, w = x.shape
            y = x[:, :, : h // s * s, : w // s * s].reshape(n, c, h // s, s, w // s, s).sum((3, 5))
        return y * self.scale if self.scale != 1 else y

    def extra_repr(self) -> str:
        return f"stride={self.stride}, scale={self.scale}"


class Reorg3d(nn.Module):
    """[reorg3d]: space-to-depth with offset-major channels: out[(oy·s+ox)·C + c, i, j] = in[c, i·s+oy, j·s+ox]."""

    def __init__(self, stride: int, reverse: bool):
        super().__init__()
        self.stride, self.reverse = stride, reverse

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        if self.reverse:
            out_c = c // (s * s)
            return x.reshape(n, s, s, out_c, h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, out_c, h * s, w * s)
        return x.reshape(n, c, h // s, s, w // s, s).permute(0, 3, 5, 1, 2, 4).reshape(n, s * s * c, h // s, w // s)


class ReorgOld(nn.Module):
    """[reorg] (YOLOv2): Darknet runs the reorg3d kernel with the *input* sizes, so the input buffer is read as
    (C/s², H·s, W·s), reorganised, and the flat result is read as (C·s², H/s, W/s) (§2.9)."""

    def __init__(self, stride: int):
        super().__init__()
        self.stride = stride

    def forward(self, x):
        n, c, h, w = x.shape
        s = self.stride
        flat = x.reshape(n, c // (s * s), h, s, w, s).permute(0, 3, 5, 1, 2, 4).reshape(n, -1)
        return flat.view(n, c * s * s, h // s, w // s)
