"""Lazy re-exports for package `__init__`s (PEP 562): a name is imported from its module on first use, so
importing a package, or any module inside it, does not import torch or OpenCV before something needs them."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(package: str, homes: dict[str, str]) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`, which re-exports every name of `homes` from the module
    `homes[name]` (an absolute dotted name)."""

    def __getattr__(name: str):
        if name not in homes:  # also how `from package import submodule` falls back to importing it
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(homes))

    return __getattr__, __dir__
