"""Frames from live sources and videos: a reader thread per source (webcam index, rtsp://, http(s):// video or
MJPEG URL, or a video file), the newest frame winning for live sources, reconnection of a dropped stream, and
the counts of what was read, processed and dropped (detect.streams.reader)."""

from detect.runtime.lazy import lazy_exports

_HOMES = {
    "FrameReader": "detect.streams.reader",
    "FrameStream": "detect.streams.reader",
    "StreamError": "detect.streams.reader",
    "StreamStats": "detect.streams.reader",
    "is_stream": "detect.streams.reader",
    "open_stream": "detect.streams.reader",
    "source_stem": "detect.streams.reader",
}
__all__ = list(_HOMES)
__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
