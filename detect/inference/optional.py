"""The optional extra `export` (onnx, onnxruntime): imported on first use, with one line when it is missing."""

from __future__ import annotations

import importlib

INSTALL_HINT = 'pip install -e ".[export]"'


def require(module: str):
    """Import `module` (e.g. "onnx", "onnxruntime"), or raise ValueError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ValueError(f"{module} is not installed ({e}); ONNX export and .onnx models need the export "
                         f"extra: {INSTALL_HINT}") from None
