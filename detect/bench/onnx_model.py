"""The benchmark's ONNX copy of a model: the file `detect.export` writes (fixed size, no NMS), as bytes for
onnxruntime and OpenCV's ONNX importer, so the bench times the graph users deploy."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from detect.export.onnx_export import OnnxExportOptions, export_onnx


def export_onnx_bytes(model: torch.nn.Module, batch: int, height: int, width: int) -> bytes:
    """`model` (an eval-mode Darknet, fused or not, with plain convolutions) as detect.export's ONNX bytes: input
    [batch, 3, height, width], output [batch, P, 5+K]."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.onnx"
        export_onnx(model, path, OnnxExportOptions(img_size=(height, width), batch=batch))
        return path.read_bytes()
