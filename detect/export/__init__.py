"""Export: ONNX graphs (checked with onnxruntime) and Darknet `.cfg` + `.weights`; ONNX models as stand-ins for
the PyTorch model in detect.val and detect.predict. onnx and onnxruntime are imported only when used."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "OnnxExportOptions": "detect.export.onnx_export",
    "export_onnx": "detect.export.onnx_export",
    "export_darknet": "detect.export.darknet_export",
    "OnnxModel": "detect.export.runtime",
    "load_onnx_model": "detect.export.runtime",
    "main": "detect.export.cli",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
