"""Test-time augmentation (`--augment` in detect.val and detect.predict, `Detector.load(augment=True)`): the model
on its input at several scales, some mirrored, each pass's boxes mapped back to the input's pixels and every
prediction concatenated, so that one NMS (the usual one, with merge) chooses among them.

Scales 1, 0.83 and 0.67 with the middle one mirrored: the smaller passes find the large objects the full-size
pass cuts or misses, the mirror adds a second opinion at nearly full resolution. A scaled input is resized
bilinearly and padded at the right and bottom to the model's stride with the letterbox grey, so box coordinates
need only the division by the scale (and x -> W - x for the mirror).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

SCALES = (1.0, 0.83, 0.67)
FLIPS = (False, True, False)
PAD_VALUE = 114 / 255  # the letterbox grey, as the canvases are filled


class AugmentedModel(nn.Module):
    """Wraps a detector whose eval-mode output is [N, P, 5+K] rows (cx, cy, w, h in input pixels, scores)."""

    def __init__(self, model: nn.Module, stride: int, scales=SCALES, flips=FLIPS):
        super().__init__()
        if len(scales) != len(flips):
            raise ValueError(f"test-time augmentation needs one flip per scale, got {scales} and {flips}")
        self.model, self.stride, self.scales, self.flips = model, int(stride), tuple(scales), tuple(flips)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        outs = []
        for scale, flip in zip(self.scales, self.flips):
            xi = x.flip(-1) if flip else x
            nh, nw = h, w
            if scale != 1:
                nh, nw = max(round(h * scale), 1), max(round(w * scale), 1)
                xi = F.interpolate(xi, size=(nh, nw), mode="bilinear", align_corners=False)
                pad_h = math.ceil(nh / self.stride) * self.stride - nh
                pad_w = math.ceil(nw / self.stride) * self.stride - nw
                if pad_h or pad_w:
                    xi = F.pad(xi, (0, pad_w, 0, pad_h), value=PAD_VALUE)
                if x.is_contiguous(memory_format=torch.channels_last):
                    xi = xi.contiguous(memory_format=torch.channels_last)
            y = self.model(xi).clone()
            # back by the sizes the pass had (rounded: 416 x 0.83 is 345, 0.8293), x and y each their own
            y[..., 0:4:2] *= w / nw
            y[..., 1:4:2] *= h / nh
            if flip:
                y[..., 0] = w - y[..., 0]
            outs.append(y)
        return torch.cat(outs, 1)
