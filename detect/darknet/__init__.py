"""Darknet `.cfg` models with Darknet's exact semantics: the cfg parsed and its layers built, `.weights` and
`.pt` files read and written, the one loader of a model file for training, fine-tune transfer onto other
classes, surgery, and the packed (fused) CPU form."""

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
