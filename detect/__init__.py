"""YOLO-style detection training on Darknet .cfg models."""

from .darknet import Darknet

__all__ = ["Darknet"]
