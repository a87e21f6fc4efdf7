"""Shared helpers for the detect.darknet tests."""

from __future__ import annotations

import numpy as np
import torch


@torch.no_grad()
def randomize_weights(model, seed: int = 0) -> None:
    """Fill every array a .weights file holds with random values of a sensible scale (BN statistics included),
    so that outputs stay O(1) through deep cfgs and every array matters."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.layers:
        for name, tensor in getattr(module, "darknet_tensors", list)():
            shape = tensor.shape
            if name == "weights" and tensor.dim() > 1:
                fan_in = max(1, tensor[0].numel())
                value = torch.randn(shape, generator=gen) / fan_in ** 0.5
            elif name == "weights":  # weighted-shortcut weights: some below the 0.001 clamp
                value = torch.rand(shape, generator=gen) * 2 - 0.5
            elif name in ("scales", "rolling_variance"):
                value = torch.rand(shape, generator=gen) + 0.5
            else:
                value = torch.randn(shape, generator=gen) * 0.2
            tensor.copy_(value)


def relative_error(actual, expected) -> float:
    """max |actual - expected| / max(|expected|, 1e-3), on float64 arrays."""
    actual = actual.detach().double().numpy() if isinstance(actual, torch.Tensor) else np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-3))
