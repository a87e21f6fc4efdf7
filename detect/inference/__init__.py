"""Inference: a user's model file loaded once (loading -> ModelHandle), its engine chosen and run behind one
contract (handle.Runner: PyTorch, ncnn, OpenVINO, onnxruntime), and the one path from images to detections
(predictor.Predictor, postprocess) every front end shares."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "ModelHandle": "detect.inference.handle",
    "Runner": "detect.inference.handle",
    "load_model_file": "detect.inference.loading",
    "class_names": "detect.inference.loading",
    "InferenceSettings": "detect.inference.predictor",
    "Predictor": "detect.inference.predictor",
    "OnnxModel": "detect.inference.onnx_runtime",
    "load_onnx_model": "detect.inference.onnx_runtime",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
