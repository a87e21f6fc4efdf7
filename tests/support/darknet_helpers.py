"""Shared helpers for the detect.darknet tests."""

from __future__ import annotations

import cv2
import numpy as np
import torch

from detect import Darknet


@torch.no_grad()
def randomize_weights(model, seed: int = 0) -> None:
    """Fill every array a .weights file holds with random values of a sensible scale (BN statistics included),
    so that outputs stay O(1) through deep cfgs and every array matters."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.layers:
        for name, tensor in getattr(module, "darknet_tensors", list)():
            if name == "weights" and tensor.dim() > 1:
                bound = (3 / max(1, tensor[0].numel())) ** 0.5  # variance 1/fan_in
                tensor.uniform_(-bound, bound, generator=gen)
            elif name == "weights":  # weighted-shortcut weights: some below the 0.001 clamp
                tensor.uniform_(-0.5, 1.5, generator=gen)
            elif name in ("scales", "rolling_variance"):
                tensor.uniform_(0.5, 1.5, generator=gen)
            else:
                tensor.uniform_(-0.35, 0.35, generator=gen)

def relative_error(actual, expected) -> float:
    """max |actual - expected| / max(|expected|, 1e-3), on float64 arrays."""
    actual = actual.detach().double().numpy() if isinstance(actual, torch.Tensor) else np.asarray(actual)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape, f"shape {actual.shape} != {expected.shape}"
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-3))


def build_uninitialised(cfg, **kwargs):
    """A model with allocated but uninitialised tensors (no PyTorch init cost); fill it before use."""
    with torch.device("meta"):
        model = Darknet(cfg, **kwargs)
    return model.to_empty(device="cpu")


def letterbox(image: np.ndarray, size: int) -> tuple[torch.Tensor, float, tuple[int, int]]:
    """RGB float [1,3,size,size] in [0,1], aspect kept, grey (0.5) border; returns (tensor, scale, (left, top))."""
    h, w = image.shape[:2]
    scale = min(size / w, size / h)
    new_w, new_h = round(w * scale), round(h * scale)
    canvas = np.full((size, size, 3), 0.5, np.float32)
    left, top = (size - new_w) // 2, (size - new_h) // 2
    resized = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    canvas[top:top + new_h, left:left + new_w] = resized[:, :, ::-1].astype(np.float32) / 255  # BGR -> RGB
    return torch.from_numpy(canvas).permute(2, 0, 1)[None].contiguous(), scale, (left, top)
