"""Mixed precision: the one map from a precision flag to an autocast dtype, and the autocast context."""

from __future__ import annotations

import contextlib

import torch

AMP_DTYPES = {"off": None, "fp16": torch.float16, "bf16": torch.bfloat16}
AMP_MODES = ("auto", *AMP_DTYPES)  # auto: bf16 where the GPU supports it, else fp16


def amp_dtype(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of `mode` on `device`; None (float32) on the CPU, where autocast is not used."""
    if mode not in AMP_MODES:
        raise ValueError(f"precision {mode!r}: choose one of {', '.join(AMP_MODES)}")
    if torch.device(device).type != "cuda":
        return None
    if mode == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return AMP_DTYPES[mode]


def autocast(device: torch.device, dtype: torch.dtype | None):
    """torch.autocast on CUDA with `dtype`; nothing (float32) otherwise."""
    device = torch.device(device)
    if dtype is None or device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
