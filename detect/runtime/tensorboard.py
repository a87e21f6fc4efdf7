"""TensorBoard scalars of a training run, written by rank 0 into the run folder (`tensorboard --logdir
runs/train`): the three losses, the learning rate, both mAPs and the images per second of each epoch.

tensorboard is optional: `train.py --tensorboard` asks for it, and refuses to start without the package.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

# results row key -> TensorBoard tag
SCALAR_TAGS = {
    "box": "train/box_loss", "obj": "train/obj_loss", "cls": "train/cls_loss", "lr": "train/lr",
    "map50": "val/mAP50", "map": "val/mAP50-95", "img_s": "speed/images_per_s",
}


def tensorboard_available() -> bool:
    return importlib.util.find_spec("tensorboard") is not None


class TensorBoardLog:
    """One SummaryWriter over the run folder; `log_epoch(row)` per epoch, `close()` at the end."""

    def __init__(self, log_dir: str | Path):
        if not tensorboard_available():
            raise ValueError("--tensorboard needs the tensorboard package: pip install tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log_epoch(self, row: dict) -> None:
        """The scalars of a results row (keys of SCALAR_TAGS; a missing or non-finite value is skipped) at
        step = the epoch number, flushed so that a killed run keeps them."""
        for key, tag in SCALAR_TAGS.items():
            value = row.get(key)
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.writer.add_scalar(tag, float(value), int(row["epoch"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
