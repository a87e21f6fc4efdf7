"""Export: ONNX graphs (checked with onnxruntime; int8 quantization calibrated and checked in-process) and Darknet
`.cfg` + `.weights`. The runners that load such files live in detect.inference. onnx and onnxruntime are
imported only when used."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "OnnxExportOptions": "detect.export.onnx_export",
    "export_onnx": "detect.export.onnx_export",
    "export_darknet": "detect.export.darknet_export",
    "main": "detect.export.cli",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
