"""Host batches to model inputs: the one place uint8 images become float tensors on the device."""

from __future__ import annotations

import torch


def to_model_input(images: torch.Tensor, device: torch.device, channels_last: bool = False) -> torch.Tensor:
    """uint8 [N, 3, H, W] (pinned on CUDA hosts) -> float32 in [0, 1] on `device`.

    The copy is asynchronous and the division runs on the device, so the host never waits on it;
    channels_last matches a model converted with `model.to(memory_format=torch.channels_last)`.
    """
    x = images.to(device, non_blocking=True).float().div_(255)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x
