"""A detector's settings turned into tracking ones: the tracker takes the model's thresholds as its high score,
and the detector runs lower, down to the tracker's low score, so that ByteTrack's second stage gets the faint
boxes of occluded objects (which a detection threshold would have dropped)."""

from __future__ import annotations

from dataclasses import replace

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
