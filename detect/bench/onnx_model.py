"""The benchmark's ONNX copy of a model: a fixed-size export in memory, for onnxruntime and OpenCV's ONNX importer.
Kept apart and small on purpose: detect.export is the project's exporter, and this helper can call it instead."""

from __future__ import annotations

import io
import warnings

import torch


def export_onnx_bytes(model: torch.nn.Module, batch: int, height: int, width: int) -> bytes:
    """`model` (an eval-mode Darknet, fused or not, with plain convolutions) as ONNX opset 17 bytes: input `images`
    [batch, 3, height, width], output `detections` [batch, P, 5+K]."""
    buffer = io.BytesIO()
    example = torch.zeros(batch, 3, height, width)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation and tracer notes
        torch.onnx.export(model, (example,), buffer, dynamo=False, opset_version=17, input_names=["images"],
                          output_names=["detections"])
    return buffer.getvalue()
