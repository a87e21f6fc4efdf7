"""What `detect.predict --track` adds: each source's frames through its own tracker, the ids drawn with short
trails, the ids in labels and json, MOTChallenge files (--save-mot) and the distinct tracks per class at the end.

A source is a video file, a stream, or a folder of images read in name order (each folder of --source its own
sequence; with --recursive every sub-folder is one). Images of several folders may share a batch: each image
still goes to its folder's tracker, numbered by its place in the folder (frame_source: an image that cannot be
read is a gap its tracker ages through, counted as dropped).
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

import cv2
import numpy as np

from detect.runtime.files import atomic_write_text
from detect.runtime.interrupts import deferred_interrupt
from detect.tracking.config import DEFAULT_TRACKER, LOW_SCORE, TRACKERS, TrackerConfig
from detect.tracking.frame_source import Frame, read_frames, track_frame
from detect.tracking.mot import mot_lines
from detect.tracking.sources import TrackerBank, summary_line

from .inputs import Input
from .outputs import class_colour, draw_label, line_thickness, save_results


def add_track_flags(p) -> None:
    p.add_argument("--track", nargs="?", const=DEFAULT_TRACKER, default=None, choices=tuple(TRACKERS),
                   metavar="TRACKER", help=f"follow objects over frames with {' or '.join(TRACKERS)} (default "
                   f"{DEFAULT_TRACKER}): a video, a stream, or a folder of images read in name order (each folder "
                   f"its own sequence); track ids in labels (last value) and json, ids and trails drawn, distinct "
                   f"tracks per class printed and in tracks.json. --conf is the tracker's high score; the detector "
                   f"runs down to {LOW_SCORE:g} for its second stage")
    p.add_argument("--save-mot", action="store_true",
                   help="with --track: mot/<source>.txt per source, MOTChallenge lines frame,id,left,top,width,"
                        "height,conf,-1,-1,-1 (frames from 1)")


def track_colour(track_id: int) -> tuple[int, int, int]:
    """A stable colour per track (the class palette, stepped by a prime so neighbouring ids differ)."""
    return class_colour(int(track_id) * 7 + 3)


def draw_tracks(image: np.ndarray, rows: np.ndarray, names: list[str], trails: dict) -> np.ndarray:
    """Boxes coloured by track, labelled `#id name score`, each with the trail of its recent centres (the tracks
    of this frame only)."""
    out = image.copy()
    thickness = line_thickness(image)
    shown = {int(i) for i in np.asarray(rows).reshape(-1, 7)[:, 6]}
    for track_id, trail in trails.items():
        if track_id not in shown:  # a track missed in this frame: no trail without its box
            continue
        points = np.array([(x, y) for _, x, y in trail], np.int32)
        if len(points) > 1:
            cv2.polylines(out, [points.reshape(-1, 1, 2)], False, track_colour(track_id), thickness, cv2.LINE_AA)
    for x1, y1, x2, y2, score, k, track_id in np.asarray(rows).tolist():
        colour = track_colour(int(track_id))
        cv2.rectangle(out, (int(x1), int(y1)), (int(x2), int(y2)), colour, thickness, cv2.LINE_AA)
        draw_label(out, (int(x1), int(y1)), f"#{int(track_id)} {names[int(k)]} {score:.2f}", colour, thickness)
    return out


def image_sequence(item: Input, source: str) -> str:
    """The sequence an image belongs to: its folder below --source, named by that path (the folder --source
    names itself: by its own name; a glob's matches: "images")."""
    folder = str(PurePosixPath(item.relative).parent)
    if folder != ".":
        return folder
    name = Path(source).name
    return name if name and not glob.has_magic(name) else "images"


class Tracking:
    """One tracker per source (TrackerBank) and predict's tracking outputs in `run_dir`. `source`: --source,
    which names the sequence of the images directly in it. Frames reach the trackers as frame_source.Frame
    (the rule there: a frame without an image is a gap its tracker ages through, counted as dropped)."""

    def __init__(self, config: TrackerConfig, run_dir: Path, names: list[str], source: str, save_conf: bool = False,
                 save_mot: bool = False):
        self.bank, self.run_dir, self.names, self.source = TrackerBank(config), run_dir, names, source
        self.save_conf, self.save_mot = save_conf, save_mot
        self._places: dict[str, int] = {}  # the place of the last image of each image sequence so far
        self._reached: dict[str, int] = {}  # frames of each source up to the last one given, tracked or not
        self._keys: dict[tuple[str, str], str] = {}  # (kind, name) of each source -> its tracker's key

    def _key(self, kind: str, name: str) -> str:
        """A key of its own for each source, also the name of its mot/ file: a folder `cam/` and a video
        `cam.mp4` are two sources (the second one's key gets -2)."""
        if (kind, name) not in self._keys:
            base = re.sub(r"[^\w\-. /]", "_", name)
            key, n = base, 1
            while key in self._keys.values():
                n += 1
                key = f"{base}-{n}"
            self._keys[(kind, name)] = key
        return self._keys[(kind, name)]

    def video_key(self, output: str) -> str:
        """The key of a video or stream whose outputs are named `output`."""
        return self._key("video", output)

    def frames(self, images) -> Iterator[Frame]:
        """Image files of predict (input, image or the BadImage its decoding raised), in order, as the frames of
        their sequences (frame_source.read_frames): an image's number is its place in its folder."""
        def items():
            for item, image in images:
                key = self._key("images", image_sequence(item, self.source))
                self._places[key] = place = self._places.get(key, -1) + 1
                self._reached[key] = place + 1  # an unreadable last image is still counted, as dropped
                yield place, image, key
        return read_frames(items())

    def image(self, item: Input, frame: Frame, det):
        """(tracked rows [k, 7], annotated image, save: writes its outputs) of an image of a sequence (`frame`:
        its Frame from `frames`); None for a frame without an image (a gap)."""
        rows, annotated = self.frame(frame.source, det, frame.image, index=frame.number)
        if rows is None:
            return None
        return rows, annotated, lambda: self.save(rows, frame.image.shape, item.output, str(item.path),
                                                  frame.source, frame.number + 1)

    def frame(self, key: str, det, image: np.ndarray | None, fps: float | None = None,
              index: int | None = None) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(tracked rows [k, 7], annotated frame) of the next frame of source `key`, (None, None) for a frame
        without an image (`index`: its number in the source, where a live stream may have dropped frames before
        it; frame_source.track_frame)."""
        number = self._reached.get(key, 0) if index is None else index
        self._reached[key] = number + 1
        rows = track_frame(self.bank.source(key, fps), Frame(index, image, key), det)
        if rows is None:
            return None, None
        return rows, draw_tracks(image, rows, self.names, self.bank[key].trails)

    def save(self, rows: np.ndarray, shape, stem: str, source: str, key: str, frame: int) -> None:
        """labels/<stem>.txt and json/<stem>.json with the track ids, and (--save-mot) the frame's lines of
        mot/<key>.txt (frame: 1-based). Call inside the frame's deferred_interrupt block."""
        save_results(rows[:, :6], self.names, shape, stem, self.run_dir, source, self.save_conf, ids=rows[:, 6])
        if self.save_mot:
            path = self.run_dir / "mot" / f"{key}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as f:
                f.write(mot_lines(frame, rows[:, :4], rows[:, 6], rows[:, 4]))

    def finish(self) -> dict:
        """Print the distinct tracks per class of each source and over all, with the frames tracked and dropped
        (without an image, or a live stream's); write tracks.json. Also after Ctrl-C: what was tracked so far (a
        second Ctrl-C waits for tracks.json)."""
        summary = self.bank.summary(self.names)
        for source in summary["sources"]:
            source["dropped"] = self._reached.get(source["source"], source["frames"]) - source["frames"]
            dropped = f", {source['dropped']} dropped" if source["dropped"] else ""
            print(f"tracks {source['source']}: {summary_line(source['per_class'])} ({source['tracks']} tracks over "
                  f"{source['frames']} frames{dropped})")
        if len(summary["sources"]) > 1:
            print(f"tracks in all: {summary_line(summary['per_class'])} ({summary['tracks']} tracks)")
        with deferred_interrupt():
            atomic_write_text(self.run_dir / "tracks.json", json.dumps(summary, indent=1))
        return summary
