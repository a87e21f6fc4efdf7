"""Darknet `.cfg` models with Darknet's exact semantics, and `.weights` / `.pt` weight I/O."""

from detect.checkpoint import save_pt  # the .pt writer, kept here for `from detect.darknet import save_pt`

from .cfg import CfgError
from .model import Darknet
from .weights import load_weights
from .yolo import YoloHead

__all__ = ["CfgError", "Darknet", "YoloHead", "load_weights", "save_pt"]
