"""MOTChallenge files: tracking results and ground truth as text lines, and the sequence folders they belong to.

A line is `frame,id,left,top,width,height,conf,...` (1-based frames, pixels). Results end with `-1,-1,-1` (the
world coordinates MOTChallenge's 2D files leave empty); ground truth (gt/gt.txt) has `conf` 0 for a box that
is not scored (an ignore region: a tracker is neither rewarded nor penalised there), then the class and the
visibility. A sequence is a folder SEQ with SEQ/seqinfo.ini (name, imDir, frameRate, seqLength, imWidth,
imHeight, imExt), SEQ/img1/000001.jpg ... and SEQ/gt/gt.txt.
"""

from __future__ import annotations

import configparser
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.data.records.images import IMAGE_SUFFIXES


def mot_lines(frame: int, boxes: np.ndarray, ids: np.ndarray, scores: np.ndarray) -> str:
    """The result lines of one frame (1-based) for boxes [k, 4] xyxy with their track ids and scores."""
    return "".join(f"{frame},{int(i)},{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{s:.4f},-1,-1,-1\n"
                   for (x1, y1, x2, y2), i, s in zip(np.asarray(boxes).tolist(), np.asarray(ids).tolist(),
                                                     np.asarray(scores).tolist()))


@dataclass(frozen=True)
class MotRows:
    """The rows of a MOT file as columns: frame and id int64 [n], boxes float64 [n, 4] xyxy, conf [n], and the
    class column of ground truth (int64 [n], -1 where a file has none; None for results)."""

    frames: np.ndarray
    ids: np.ndarray
    boxes: np.ndarray
    conf: np.ndarray
    classes: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls) -> MotRows:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 4)), np.zeros(0))

    @classmethod
    def stack(cls, rows: list[MotRows]) -> MotRows:
        rows = [r for r in rows if len(r)] or [cls.empty()]
        columns = [np.concatenate([getattr(r, f) for r in rows]) for f in ("frames", "ids", "boxes", "conf")]
        classes = None if all(r.classes is None for r in rows) else np.concatenate(
            [np.full(len(r), -1, np.int64) if r.classes is None else r.classes for r in rows])
        return cls(*columns, classes)

    def take(self, keep: np.ndarray) -> MotRows:
        """The rows `keep` (a mask or indices) selects."""
        return MotRows(self.frames[keep], self.ids[keep], self.boxes[keep], self.conf[keep],
                       None if self.classes is None else self.classes[keep])

    def at(self, frame: int) -> MotRows:
        return self.take(self.frames == frame)


def parse_mot(text: str, source: str = "MOT text") -> MotRows:
    """The rows of a MOT results or ground-truth text (comma- or space-separated; at least 6 columns, conf 1 when
    there is no 7th, class -1 when there is no 8th). ValueError naming the line at fault."""
    values = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.replace(",", " ").split()
        if not fields:
            continue
        try:
            row = [float(v) for v in fields]
        except ValueError:
            raise ValueError(f"{source} line {number}: {line.strip()!r} is not numbers (want frame,id,left,top,"
                             f"width,height,conf,...)") from None
        if len(row) < 6:
            raise ValueError(f"{source} line {number}: {len(row)} values; a MOT line has at least 6 (frame,id,"
                             f"left,top,width,height)")
        values.append((row + [1.0, -1.0])[:8] if len(row) == 6 else (row + [-1.0])[:8])
    if not values:
        return MotRows.empty()
    table = np.array(values, np.float64)
    left_top, size = table[:, 2:4], table[:, 4:6]
    return MotRows(table[:, 0].astype(np.int64), table[:, 1].astype(np.int64),
                   np.concatenate([left_top, left_top + size], axis=1), table[:, 6], table[:, 7].astype(np.int64))


def read_mot(path: str | Path) -> MotRows:
    return parse_mot(Path(path).read_text(), str(path))


@dataclass(frozen=True)
class Sequence:
    """A MOTChallenge sequence folder: its frames (1-based number, image path) and what seqinfo.ini says."""

    path: Path
    name: str
    frames: list[tuple[int, Path]]  # in frame order
    fps: float | None
    length: int | None = None  # seqinfo.ini's seqLength: the frames the ground truth may cover

    def scored_frames(self) -> list[int]:
        """The frames scored: 1..seqLength when seqinfo.ini gives it (a frame whose image is missing still counts:
        its ground truth is missed), else the frames there are images of."""
        numbers = [number for number, _ in self.frames]
        return sorted(set(range(1, self.length + 1)) | set(numbers)) if self.length else numbers

    def missing_frames(self) -> list[int]:
        """Frames 1..seqLength without an image."""
        return sorted(set(range(1, (self.length or 0) + 1)) - {number for number, _ in self.frames})

    @property
    def ground_truth(self) -> Path:
        return self.path / "gt" / "gt.txt"


def read_sequence(folder: str | Path) -> Sequence:
    """The sequence in `folder`: seqinfo.ini's name, imDir (img1), imExt, frameRate and seqLength when present;
    the frames are the images of imDir numbered by their digit stems (000001.jpg is frame 1) and in that order,
    else 1, 2, ... in name order."""
    folder = Path(folder)
    info = configparser.ConfigParser()
    if (folder / "seqinfo.ini").is_file():
        info.read(folder / "seqinfo.ini")
    section = info["Sequence"] if info.has_section("Sequence") else {}
    image_dir = folder / section.get("imDir", "img1")
    suffix = section.get("imExt", "").lower()
    if not image_dir.is_dir():
        raise FileNotFoundError(f"{folder}: not a MOTChallenge sequence (no {image_dir.name}/ of frames; want "
                                f"SEQ/img1/000001.jpg ..., SEQ/gt/gt.txt and SEQ/seqinfo.ini)")
    images = sorted(p for p in image_dir.iterdir()
                    if p.suffix.lower() == suffix or (not suffix and p.suffix.lower() in IMAGE_SUFFIXES))
    if not images:
        raise FileNotFoundError(f"{image_dir}: no frames (images {suffix or ', '.join(IMAGE_SUFFIXES)})")
    numbers = [int(p.stem) if p.stem.isdigit() else 0 for p in images]
    if min(numbers) < 1 or len(set(numbers)) < len(numbers):
        numbers = list(range(1, len(images) + 1))
    frames = sorted(zip(numbers, images))  # by number: 2.jpg before 10.jpg
    try:
        fps = float(section["frameRate"]) if "frameRate" in section else None
        length = int(section["seqLength"]) if "seqLength" in section else None
    except ValueError as e:
        raise ValueError(f"{folder / 'seqinfo.ini'}: {e} (frameRate and seqLength are numbers)") from None
    if length is not None and frames[-1][0] > length:
        raise ValueError(f"{folder / 'seqinfo.ini'}: seqLength={length}, but {frames[-1][1].name} is frame "
                         f"{frames[-1][0]}; correct seqLength (the frames the ground truth covers)")
    return Sequence(folder, section.get("name", folder.name), frames, fps, length)


def find_sequences(root: str | Path) -> list[Sequence]:
    """The sequences under `root`: root itself when it is one (it has an img1/ or a seqinfo.ini), else its
    sub-folders that are, sorted by name (a MOT17/train folder). FileNotFoundError when there are none."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such folder (want a MOTChallenge sequence SEQ/ or a folder of them)")
    if (root / "img1").is_dir() or (root / "seqinfo.ini").is_file():
        return [read_sequence(root)]
    found = [read_sequence(p) for p in sorted(root.iterdir())
             if p.is_dir() and ((p / "img1").is_dir() or (p / "seqinfo.ini").is_file())]
    if not found:
        raise FileNotFoundError(f"{root}: no MOTChallenge sequence in it (a SEQ/ folder with img1/ frames, "
                                f"gt/gt.txt and seqinfo.ini)")
    return found
