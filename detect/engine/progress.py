"""The epoch's progress bar on rank 0: losses, lr, img/s (and GPU memory) refreshed about once a second, since
reading the loss sums from the device makes the host wait for the GPU."""

from __future__ import annotations

import time

import torch


class EpochProgress:
    """tqdm over one epoch's micro-batches; `update` after each one. A no-op off rank 0 or with progress off."""

    def __init__(self, enabled: bool, total: int, epoch: int, epochs: int, initial: int, device: torch.device):
        self.device = device
        self._shown = -float("inf")  # when the postfix last showed the losses
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=f"epoch {epoch + 1}/{epochs}", leave=True,
                            dynamic_ncols=True, mininterval=1.0)

    def update(self, sums: torch.Tensor, counted: int, lr, images: int, start: float) -> None:
        if self.bar is None:
            return
        now = time.perf_counter()
        if now - self._shown >= 1.0:
            self._shown = now
            parts = (sums / max(counted, 1)).tolist()
            post = {"box": f"{parts[0]:.4f}", "obj": f"{parts[1]:.4f}", "cls": f"{parts[2]:.4f}",
                    "lr": f"{lr:.2e}", "img/s": f"{images / max(now - start, 1e-9):.1f}"}
            if self.device.type == "cuda":
                post["mem"] = f"{torch.cuda.max_memory_allocated(self.device) / 2**30:.2f}G"
            self.bar.set_postfix(post, refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
