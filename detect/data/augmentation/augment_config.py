"""Augmentation settings: the `augment` section of the training hyperparameters (detect.engine.config.Hyp
gathers it with the others). It lives with the data pipeline that applies it, so `detect.data` needs nothing
from the training engine.
"""

from __future__ import annotations

from dataclasses import dataclass


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


# YOLOv5's range; the horizon lies 1/perspective px (|x| + |y|) from the frame's centre, so more than this brings it
# into the corners of a 416 px mosaic (832 px square)
MAX_PERSPECTIVE = 0.001


@dataclass(frozen=True)
class AugmentConfig:
    hsv_h: float = 0.015
    hsv_s: float = 0.7
    hsv_v: float = 0.4
    degrees: float = 0.0
    translate: float = 0.1
    scale: float = 0.5
    shear: float = 0.0
    perspective: float = 0.0  # perspective coefficient of the random affine (per pixel; YOLOv5's range 0-0.001)
    fliplr: float = 0.5
    flipud: float = 0.0  # probability of a vertical flip
    mosaic: float = 1.0  # probability
    mosaic9: float = 0.0  # probability that a mosaic has 9 tiles (3 x 3, as yolov7 trains) instead of 4
    mixup: float = 0.0  # probability of blending the sample with a second one (ratio ~ beta(32, 32), both boxes kept)
    close_mosaic: float = 0.0  # fraction of the run's last epochs trained without mosaic (whole images, as in eval)
    min_box_size: float = 2.0  # pixels
    min_area_ratio: float = 0.1  # kept area / area before clipping

    def __post_init__(self):
        for name in ("mosaic", "mosaic9", "mixup", "fliplr", "flipud"):
            _check(0.0 <= getattr(self, name) <= 1.0, f"{name} is a probability in [0, 1], got {getattr(self, name)}")
        _check(0.0 <= self.scale < 1.0, f"scale must be in [0, 1) (zoom range 1 +- scale), got {self.scale}")
        _check(0.0 <= self.perspective <= MAX_PERSPECTIVE,
               f"perspective must be in [0, {MAX_PERSPECTIVE}] (larger ones bring the horizon into the "
               f"corners of a 416 px mosaic), got {self.perspective}")
        _check(0.0 <= self.close_mosaic <= 1.0, f"close_mosaic is a fraction of the epochs in [0, 1], got "
                                                f"{self.close_mosaic}")

    def mosaic_epochs(self, epochs: int | None) -> int | None:
        """Epochs (from the first) that use mosaic and mixup; None: all."""
        if epochs is None or self.close_mosaic == 0:
            return None
        return epochs - round(self.close_mosaic * epochs)
