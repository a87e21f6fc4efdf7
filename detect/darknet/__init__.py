"""Darknet `.cfg` models with Darknet's exact semantics, and `.weights` / `.pt` weight I/O."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "CfgError": "detect.darknet.cfg",
    "Darknet": "detect.darknet.model",
    "YoloHead": "detect.darknet.yolo",
    "load_weights": "detect.darknet.weights",
    "save_pt": "detect.darknet.pt_files",  # the .pt writer, kept here for `from detect.darknet import save_pt`
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
