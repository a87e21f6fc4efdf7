"""A detector's settings turned into tracking ones: the tracker takes the model's thresholds as its high score,
and the detector runs lower, down to the tracker's low score, so that ByteTrack's second stage gets the faint
boxes of occluded objects (which a detection threshold would have dropped)."""

from __future__ import annotations

from dataclasses import replace

from detect.inference.handle import ModelHandle
from detect.inference.options import PREDICT, InferenceOptions, build_settings
from detect.inference.predictor import InferenceSettings

from .config import TrackerConfig, tracker_config


def for_tracking(settings: InferenceSettings, tracker: str | TrackerConfig) -> tuple[InferenceSettings,
                                                                                    TrackerConfig]:
    """(the detector's settings when tracking, the tracker's settings). `settings.thresholds` (one conf, or the
    model's per-class thresholds) become the tracker's high threshold; the detector keeps every box from the
    tracker's low threshold up (or from the thresholds, when they are lower still)."""
    config = tracker_config(tracker) if isinstance(tracker, str) else tracker
    config = config.with_high(settings.thresholds)
    return replace(settings, conf=config.low, class_conf=None), config


def tracking_detector(handle: ModelHandle, options: InferenceOptions, tracker: str | TrackerConfig, device,
                      batch_size: int = PREDICT.batch_size) -> tuple[InferenceSettings, TrackerConfig]:
    """The one detector of predict --track and val --track: `options` with predict's defaults (PREDICT: the
    model's thresholds, IoU 0.45, 300 boxes; detect.inference.options.build_settings), then `for_tracking`.
    Only the default `batch_size` is the tool's (val batches 32 frames), and a batch never changes a box."""
    defaults = replace(PREDICT, batch_size=batch_size)
    return for_tracking(build_settings(handle, options, defaults, device), tracker)
