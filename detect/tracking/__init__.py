"""Detections over frames to tracks: ByteTrack on stacked arrays (bytetrack, with its Kalman filter: kalman, and
the matching: assignment), the trackers by name (config), one tracker per source (sources), the detector's
settings when tracking (settings), a source's frames numbered with one rule for gaps (frame_source) and tracked
(frames), MOTChallenge files and sequence folders (mot), HOTA / MOTA / IDF1 through TrackEval (metrics), and a
model run over MOT sequences and scored (evaluate)."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "ByteTracker": "detect.tracking.bytetrack",
    "TRACKERS": "detect.tracking.config",
    "TrackerConfig": "detect.tracking.config",
    "tracker_config": "detect.tracking.config",
    "TrackerBank": "detect.tracking.sources",
    "SourceTracks": "detect.tracking.sources",
    "mot_lines": "detect.tracking.mot",
    "read_mot": "detect.tracking.mot",
    "find_sequences": "detect.tracking.mot",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
