"""detect.inference.options: the flags become one typed value (cli_flags.inference_options), one builder makes the
settings of every tool, None is "not given", and val --track runs the detector as predict --track does."""

import dataclasses
from pathlib import Path

import pytest
import torch

from detect.inference.class_conf import ClassConf
from detect.inference.cli_flags import inference_options
from detect.inference.handle import ModelHandle
from detect.inference.options import EVALUATION, PREDICT, InferenceOptions, build_settings
from detect.predict.cli import detector_settings
from detect.predict.cli import parse_args as predict_args
from detect.tracking.settings import tracking_detector
from detect.val import parse_args as val_args

CPU = torch.device("cpu")


class _Runner:
    num_classes, max_stride = 2, 32


def _handle(class_conf=None) -> ModelHandle:
    return ModelHandle(_Runner(), ["person", "car"], 320, None, False, "torch", Path("m.pt"), "letterbox", class_conf)


def _flags(*extra):
    return ["--weights", "m.pt", *extra]


@pytest.mark.parametrize("extra", [(), ("--conf", "0.3"), ("--iou", "0.6", "--max-det", "50", "--img", "320")])
def test_val_track_runs_the_detector_as_predict_track(extra):
    """val --track used val's NMS IoU 0.6 and predict --track 0.45 (HOTA 0.329 against 0.344 on one clip)."""
    predict, _ = detector_settings(_handle(), inference_options(predict_args(_flags("--source", "x", "--track",
                                                                                    *extra))), "bytetrack", CPU)
    val_options = inference_options(val_args(_flags("--data", "seqs", "--track", *extra)))
    tracked, config = tracking_detector(_handle(), val_options, "bytetrack", CPU, batch_size=EVALUATION.batch_size)
    assert dataclasses.replace(tracked, batch_size=PREDICT.batch_size) == predict  # the batch never changes a box
    assert tracked.iou == (0.6 if "--iou" in extra else 0.45) and tracked.max_det == (50 if extra[2:] else 300)
    assert config.high == (0.3 if "--conf" in extra else 0.25)


def test_an_explicit_conf_equal_to_a_default_is_given():
    """`--conf 0.001` was taken as not given under val --track (its default was 0.001): the tracker got 0.25."""
    options = inference_options(val_args(_flags("--data", "seqs", "--track", "--conf", "0.001")))
    assert options.conf == 0.001
    settings, config = tracking_detector(_handle(ClassConf((0.4, 0.5), 0.45, (10, 10), 10.0, "a split")), options, "bytetrack", CPU)
    assert config.high == 0.001 and settings.class_conf is None
    not_given = inference_options(val_args(_flags("--data", "seqs", "--track")))
    assert not_given.conf is None and not_given.iou is None and not_given.batch_size is None
    _, config = tracking_detector(_handle(ClassConf((0.4, 0.5), 0.45, (10, 10), 10.0, "a split")), not_given, "bytetrack", CPU)
    assert tuple(config.high) == (0.4, 0.5)  # the model file's own thresholds


def test_each_tool_fills_what_was_not_given_with_its_defaults():
    val = build_settings(_handle(), inference_options(val_args(_flags("--data", "d.yaml"))), EVALUATION, CPU)
    assert (val.conf, val.iou, val.max_det, val.batch_size, val.multi_label, val.merge) == (
        0.001, 0.6, 300, 32, True, True)
    plain = inference_options(val_args(_flags("--data", "d.yaml", "--single-label", "--no-merge", "--batch", "4")))
    assert (plain.multi_label, plain.merge, plain.batch_size) == (False, False, 4)
    predict = build_settings(_handle(), inference_options(predict_args(_flags("--source", "x"))), PREDICT, CPU)
    assert (predict.conf, predict.iou, predict.max_det, predict.batch_size, predict.multi_label) == (
        0.25, 0.45, 300, 1, False)
    api = build_settings(_handle(), InferenceOptions(conf=0.5, iou=0.3), PREDICT, CPU)
    assert (api.conf, api.iou, api.img_size, api.square) == (0.5, 0.3, 320, False)  # the handle's canvas
