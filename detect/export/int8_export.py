"""`python -m detect.export --int8`: the float graph exported beside the output, quantized, checked, and written
with its verdict in the metadata.

Only a graph that passed its mAP check (or whose check the user skipped with --no-int8-check) gets the ordinary
name: a user, a script or `detect.predict --weights best-int8.onnx` must not pick up an int8 graph that lost more
mAP than was allowed. A refused graph is written as `<name>-failed-check.onnx` (`failed_check_path`) for a look,
an earlier export under the ordinary name is removed (it would pass for this model's), and the export fails.
Every loader warns about a file whose check failed or was skipped (detect.inference.onnx_metadata.int8_warning).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .int8_check import Int8CheckFailed, check_int8
from .onnx_export import OnnxExportOptions, export_onnx
from .quantize import calibration_images, quantize_int8, record_int8_check

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Int8Settings:
    data: str  # the spec whose training images calibrate and whose val split checks
    calibration_images: int
    max_drop: float | None  # None: no check (--no-int8-check)


def failed_check_path(path: Path) -> Path:
    """best-int8.onnx -> best-int8-failed-check.onnx; another name (--output q.onnx) -> q-int8-failed-check.onnx."""
    stem = path.stem if path.stem.endswith("int8") else path.stem + "-int8"
    return path.with_name(stem + "-failed-check.onnx")


def export_int8(model, path: Path, options: OnnxExportOptions, names, class_conf, settings: Int8Settings) -> Path:
    """The int8 graph of `model` at `path` when its check passes (or is skipped); Int8CheckFailed otherwise, the
    graph then written at `failed_check_path(path)`."""
    images = calibration_images(settings.data, settings.calibration_images)
    float_path = path.with_name(path.stem + "-float.tmp.onnx")  # .onnx: the loader reads them as models
    unchecked = path.with_name(path.stem + "-unchecked.tmp.onnx")
    try:
        export_onnx(model, float_path, options, names, class_conf)
        quantize_int8(float_path, unchecked, images, options.img_size)
        calibrated = f"int8, calibrated on {len(images)} images of {settings.data}"
        if settings.max_drop is None:
            record_int8_check(unchecked, path, {"result": "skipped", "detail": "--no-int8-check"})
            print(f"ONNX model written: {path} ({calibrated}; not checked: --no-int8-check)")
            return path
        try:
            check = check_int8(float_path, unchecked, settings.data, max(options.img_size), settings.max_drop)
        except Int8CheckFailed as e:
            _keep_refused(unchecked, path, str(e))
            raise Int8CheckFailed(f"{e}; the int8 graph is written as {failed_check_path(path)}, not {path}, and "
                                  f"predict, val and the API warn when they load it: use the float export, or "
                                  f"calibrate on more images (--calibration-images), or allow the loss with a "
                                  f"larger --max-map-drop", e.check) from None
        line = f"{check.line(settings.data)}: within {settings.max_drop:g}"
        record_int8_check(unchecked, path, {"result": "passed", "detail": line, "float_map": check.float_map,
                                            "int8_map": check.int8_map, "max_drop": settings.max_drop})
        print(f"ONNX model written: {path} ({calibrated})\n{line}")
        return path
    finally:
        float_path.unlink(missing_ok=True)
        unchecked.unlink(missing_ok=True)


def _keep_refused(unchecked: Path, path: Path, detail: str) -> None:
    failed = failed_check_path(path)
    record_int8_check(unchecked, failed, {"result": "failed", "detail": detail})
    if path.is_file():  # an earlier export to this name would now pass for this model's int8 graph
        path.unlink()
        log.warning("%s: removed (an earlier export to this name; this model's int8 graph failed its check)", path)
