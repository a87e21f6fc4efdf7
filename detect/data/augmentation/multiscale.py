"""Multi-scale training: a new square input size per step, a multiple of the model's stride.

The size depends only on (seed, step), so every rank picks the same size for the same step without
communicating. Targets are normalised to the image, so resizing the batch leaves them valid.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F


class MultiScale:
    def __init__(self, base_size: int, stride: int, low: float = 0.5, high: float = 1.5, seed: int = 0):
        if not 0 < low <= 1 <= high:
            raise ValueError(f"multi-scale range must satisfy 0 < low <= 1 <= high, got low={low}, high={high}")
        self.stride = int(stride)
        self.seed = int(seed)
        self.min_units = max(1, math.ceil(base_size * low / stride))
        self.max_units = max(self.min_units, math.floor(base_size * high / stride))

    @property
    def sizes(self) -> list[int]:
        return [u * self.stride for u in range(self.min_units, self.max_units + 1)]

    def size_for(self, step: int) -> int:
        rng = np.random.default_rng([self.seed, int(step)])
        return int(rng.integers(self.min_units, self.max_units + 1)) * self.stride

    @staticmethod
    def resize(images: torch.Tensor, size: int) -> torch.Tensor:
        """Bilinear resize of a float batch [N, C, H, W] to size x size (no-op when already that size)."""
        if images.shape[-2:] == (size, size):
            return images
        return F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
