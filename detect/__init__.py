"""YOLO-style detection training on Darknet .cfg models."""

from detect.runtime.lazy import lazy_exports

__all__ = ["Darknet"]
__getattr__, __dir__ = lazy_exports(__name__, {"Darknet": "detect.darknet.model"})
