"""Minimal resumable checkpoints for the checkpoint-safety tests (also imported by their child processes)."""

import torch


def fake_checkpoint(epoch: int, size: int = 1000) -> dict:
    """A resumable checkpoint's keys (the values are what the tests check)."""
    return {"model": {"w": torch.full((size,), float(epoch))}, "optimizer": {}, "epoch": epoch, "step": 2 * epoch,
            "cfg_text": "[net]\n", "opts": {}, "batch_in_epoch": 0}
