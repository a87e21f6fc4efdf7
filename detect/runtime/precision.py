"""Mixed precision: the one map from a precision flag to an autocast dtype, and the autocast context.

On CUDA, `auto` is bf16 where the GPU has it, else fp16. On the CPU, autocast is bf16 only: `bf16` asks for it,
and `auto` takes it where the CPU runs bf16 natively (AVX512-BF16 or AMX: oneDNN's convolutions in bf16, checked
once) and `CPU_AUTO_BF16` holds (the measured choice: docs/benchmarks.md "bf16 on the CPU"); fp16 is refused on
the CPU (no fast kernels there). The weights stay float32 (autocast casts per op), and the loss is computed in
float32 (detect.engine.loss).
"""

from __future__ import annotations

import contextlib
import functools

import torch

AMP_DTYPES = {"off": None, "fp16": torch.float16, "bf16": torch.bfloat16}
AMP_MODES = ("auto", *AMP_DTYPES)  # auto: bf16 where the device runs it natively (GPU: else fp16)
CPU_AUTO_BF16 = True  # `--amp auto` trains in bf16 on CPUs with native bf16 (measured: docs/benchmarks.md)


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU runs bf16 convolutions natively (AVX512-BF16 or AMX), as oneDNN reports it."""
    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # a torch without the probes: take the CPU as one without
        return False


def amp_dtype(mode: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of `mode` on `device` (None: float32)."""
    if mode not in AMP_MODES:
        raise ValueError(f"precision {mode!r}: choose one of {', '.join(AMP_MODES)}")
    device = torch.device(device)
    if device.type == "cpu":
        if mode == "fp16":
            raise ValueError("--amp fp16 is for CUDA GPUs: the CPU has no fast fp16 kernels; --amp bf16 (where the "
                             "CPU has native bf16) or --amp off")
        if mode == "auto":
            return torch.bfloat16 if CPU_AUTO_BF16 and cpu_has_native_bf16() else None
        return AMP_DTYPES[mode]
    if device.type != "cuda":
        return None
    if mode == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return AMP_DTYPES[mode]


def describe_cpu_precision(mode: str, dtype: torch.dtype | None) -> str:
    """The one line a CPU run says at its start about its precision."""
    native = cpu_has_native_bf16()
    if dtype == torch.bfloat16:
        how = "native bf16 (AVX512-BF16/AMX)" if native else "no native bf16: emulated, slower than float32"
        return f"CPU precision: bf16 autocast, float32 weights and loss ({how}; --amp off for float32)"
    reason = ("--amp off" if mode == "off" else "this CPU has no native bf16" if not native
              else "bf16 is not the CPU default")
    return f"CPU precision: float32 ({reason})"


def autocast(device: torch.device, dtype: torch.dtype | None):
    """torch.autocast with `dtype` on CUDA, and with bf16 on the CPU; nothing (float32) otherwise."""
    device = torch.device(device)
    if dtype is None or device.type not in ("cuda", "cpu") or (device.type == "cpu" and dtype != torch.bfloat16):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
