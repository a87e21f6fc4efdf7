"""The mAP check of an int8 export: the float and the int8 graph of one model, each evaluated in this process as
`detect.val` evaluates it (its loader, its engine, its defaults: detect.evaluation.model_eval) on the val split of
the spec that calibrated it, on the CPU. An int8 graph that loses more than `max_drop` mAP@0.5:0.95 is refused
(`Int8CheckFailed`; detect.export.int8_export then writes it under a name that says so)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from detect.evaluation.evaluator import CocoEvaluator
from detect.evaluation.model_eval import Feed, evaluate_model
from detect.inference.cli_flags import default_workers
from detect.inference.loading import load_model_file
from detect.inference.onnx_runtime import UNCHECKED_INT8
from detect.inference.options import EVALUATION, InferenceOptions, build_settings
from detect.inference.predictor import Predictor

log = logging.getLogger(__name__)

DEFAULT_MAX_DROP = 0.005


class Int8CheckFailed(ValueError):
    """The check refused the graph; `check` holds its figures (None when a graph could not be evaluated)."""

    def __init__(self, message: str, check: Int8Check | None = None):
        super().__init__(message)
        self.check = check


class _NoUncheckedWarning(logging.Filter):
    """The graph under check has no verdict yet: the loader's warning about that is not for the user."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, UNCHECKED_INT8, False)


@dataclass(frozen=True)
class Int8Check:
    float_map: float
    float_map50: float
    int8_map: float
    int8_map50: float

    @property
    def drop(self) -> float:
        return self.float_map - self.int8_map

    def line(self, data: str) -> str:
        return (f"int8 check on {data}'s val split (detect.val's evaluation at the export's size): mAP@0.5:0.95 "
                f"{self.float_map:.4f} float -> {self.int8_map:.4f} int8 ({-self.drop:+.4f}), mAP@0.5 "
                f"{self.float_map50:.4f} -> {self.int8_map50:.4f}")


def _val_metrics(weights: Path, data: str, img_size: int) -> tuple[float, float]:
    """(mAP@0.5:0.95, mAP@0.5) of `weights` on `data`'s val split with detect.val's defaults (multi-label,
    merge-NMS, conf 0.001, IoU 0.6) at `img_size`; Int8CheckFailed naming what went wrong."""
    from detect.data.loader import open_split

    device = torch.device("cpu")
    quiet, loader_log = _NoUncheckedWarning(), logging.getLogger("detect.inference.onnx_runtime")
    loader_log.addFilter(quiet)
    try:
        handle = load_model_file(weights, device=device, img_size=img_size)
        source = open_split(data, "val")
        if source.num_classes != handle.num_classes:
            raise ValueError(f"{weights.name} predicts {handle.num_classes} classes, {data} has {source.num_classes}")
        evaluator = CocoEvaluator(source, keep_results=False)
        settings = build_settings(handle, InferenceOptions(), EVALUATION, device)  # detect.val's defaults
        result = evaluate_model(handle, Predictor(handle.runner, settings, device), source, evaluator,
                                Feed(workers=default_workers()))
    except (ValueError, OSError) as e:
        raise Int8CheckFailed(f"the int8 check could not evaluate {weights.name} on {data} ({e}); run detect.val on "
                              f"it yourself, or pass --no-int8-check") from None
    finally:
        loader_log.removeFilter(quiet)
    return result.map, result.map50


def check_int8(float_path: Path, int8_path: Path, data: str, img_size: int, max_drop: float) -> Int8Check:
    """Both graphs' val metrics; Int8CheckFailed when int8 loses more than `max_drop` mAP@0.5:0.95."""
    float_map, float_map50 = _val_metrics(float_path, data, img_size)
    int8_map, int8_map50 = _val_metrics(int8_path, data, img_size)
    check = Int8Check(float_map, float_map50, int8_map, int8_map50)
    if check.drop > max_drop:
        raise Int8CheckFailed(f"{check.line(data)}: int8 lost more than {max_drop:g}", check)
    return check
