"""The model's side of data parallelism: SyncBatchNorm when it is wanted and DistributedDataParallel around the
model (torch.nn's wrappers; the process group itself is detect.runtime.dist's)."""

from __future__ import annotations

import torch

from detect.runtime.dist import DistContext


def use_sync_bn(mode: str, device: torch.device, world_size: int) -> bool:
    """Whether to convert BatchNorm to SyncBatchNorm.

    `auto`: only for CUDA with more than one process (DDP refuses SyncBatchNorm on CPU modules).
    `on` off CUDA is a configuration error; `off` never converts.
    """
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"--sync-bn must be auto, on or off, got {mode!r}")
    if mode == "off":
        return False
    if device.type != "cuda":
        if mode == "on":
            raise ValueError("--sync-bn on needs CUDA: SyncBatchNorm does not run on the CPU "
                             "(use --sync-bn auto or off)")
        return False
    return world_size > 1


def convert_sync_bn(model: torch.nn.Module) -> torch.nn.Module:
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)


def wrap_ddp(model: torch.nn.Module, ctx: DistContext, **kwargs) -> torch.nn.Module:
    """DistributedDataParallel around `model` when world size > 1 (device_ids on CUDA); else `model`."""
    if not ctx.distributed:
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP

    kwargs.setdefault("gradient_as_bucket_view", True)  # gradients live in the all-reduce buckets: no copy
    if ctx.device.type == "cuda":
        return DDP(model, device_ids=[ctx.device.index], output_device=ctx.device.index, **kwargs)
    return DDP(model, **kwargs)
