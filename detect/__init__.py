"""YOLO-style detection training on Darknet .cfg models (docs/architecture.md: the packages and their layers).
The shipped cfgs and dataset specs are package resources under detect/assets (detect.runtime.assets)."""

from detect.runtime.lazy import lazy_exports

__all__ = ["Darknet"]
__getattr__, __dir__ = lazy_exports(__name__, {"Darknet": "detect.darknet.model"})
