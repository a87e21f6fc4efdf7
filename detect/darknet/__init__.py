"""Darknet `.cfg` models with Darknet's exact semantics, and `.weights` / `.pt` weight I/O."""

from .cfg import CfgError
from .model import Darknet
from .weights import load_weights, save_pt
from .yolo import YoloHead

__all__ = ["CfgError", "Darknet", "YoloHead", "load_weights", "save_pt"]
