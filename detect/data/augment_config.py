"""Augmentation settings: the `augment` section of the training hyperparameters (detect.engine.config.Hyp
gathers it with the others). It lives with the data pipeline that applies it, so `detect.data` needs nothing
from the training engine.
"""

from __future__ import annotations

from dataclasses import dataclass


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class AugmentConfig:
    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    degrees: float = 0.0
    translate: float = 0.1
    scale: float = 0.5
    shear: float = 0.0
    fliplr: float = 0.5
    mosaic: float = 1.0  # probability
    close_mosaic: float = 0.0  # fraction of the run's last epochs trained without mosaic (whole images, as in eval)
    min_box_size: float = 2.0  # pixels
    min_area_ratio: float = 0.1  # kept area / area before clipping

    def __post_init__(self):
        for name in ("mosaic", "fliplr"):
            _check(0.0 <= getattr(self, name) <= 1.0, f"{name} is a probability in [0, 1], got {getattr(self, name)}")
        _check(0.0 <= self.scale < 1.0, f"scale must be in [0, 1) (zoom range 1 +- scale), got {self.scale}")
        _check(0.0 <= self.close_mosaic <= 1.0, f"close_mosaic is a fraction of the epochs in [0, 1], got "
                                                f"{self.close_mosaic}")

    def mosaic_epochs(self, epochs: int | None) -> int | None:
        """Epochs (from the first) that use mosaic; None: all."""
        if epochs is None or self.close_mosaic == 0:
            return None
        return epochs - round(self.close_mosaic * epochs)
