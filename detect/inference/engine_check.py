"""What the compiled CPU engines (ncnn, OpenVINO) share: the input they accept, and the check each passes
before the tools use it (its rows against the PyTorch model's on an input of another batch and size than the one
it was built or traced at)."""

from __future__ import annotations

import numpy as np
import torch

from detect.darknet import Darknet


def engine_input(x: torch.Tensor, max_stride: int) -> np.ndarray:
    """`x` [N, 3, H, W] (H and W multiples of `max_stride`) as contiguous float32 NCHW numpy, whatever its
    layout; ValueError for another shape."""
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"expected input [N, 3, H, W], got {tuple(x.shape)}")
    if x.shape[2] % max_stride or x.shape[3] % max_stride:
        raise ValueError(f"input {x.shape[2]}x{x.shape[3]} is not a multiple of the model's largest stride "
                         f"{max_stride}")
    return x.detach().to("cpu", torch.float32).contiguous().numpy()


def check_against_torch(run, fused: Darknet, engine: str) -> float:
    """Largest difference between `run(x)` and the fused PyTorch model on 2 images of 2x3 strides; ValueError
    when the row shapes differ or the values are not within float32 rounding (1e-3 + 1e-4 of the largest)."""
    stride = fused.max_stride
    x = torch.rand(2, 3, 2 * stride, 3 * stride, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = fused(x)
    got = run(x)
    if got.shape != expected.shape:
        raise ValueError(f"{engine} gave rows of shape {tuple(got.shape)}, PyTorch {tuple(expected.shape)}")
    diff = float((got - expected).abs().max())
    tolerance = 1e-3 + 1e-4 * float(expected.abs().max())
    if not diff <= tolerance:
        raise ValueError(f"{engine}'s outputs differ from PyTorch's by {diff:.3g} (more than {tolerance:.3g})")
    return diff
