"""The files a --source names (a file, a folder, its sub-folders with --recursive, or a glob) and the output name
of each: unique per input, mirroring its path below --source."""

from __future__ import annotations

import glob
import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from detect.data.records.images import IMAGE_SUFFIXES
from detect.streams.reader import VIDEO_SUFFIXES

log = logging.getLogger("detect.predict")
MEDIA_SUFFIXES = IMAGE_SUFFIXES + VIDEO_SUFFIXES
_FRAME_NAME = re.compile(r"(.+)_\d+")  # <video output name>_<frame>


@dataclass(frozen=True)
class Input:
    """One file to detect in: its path below --source (an annotated image's path in the run folder) and the
    name of its other outputs (no extension; `output_names`)."""

    path: Path
    relative: str
    output: str

    @property
    def is_video(self) -> bool:
        return self.path.suffix.lower() in VIDEO_SUFFIXES



def list_sources(source: str, recursive: bool = False) -> list[Input]:
    """The image and video files `source` names (a file, a folder, its sub-folders too with `recursive`, or a
    glob), sorted, each with its output name (`output_names`)."""
    path = Path(source)
    if path.is_dir():
        entries = sorted(path.rglob("*") if recursive else path.iterdir())
        files = [p for p in entries if p.is_file() and p.suffix.lower() in MEDIA_SUFFIXES]
        others = [p.relative_to(path).as_posix() for p in entries
                  if p.is_file() and p.suffix.lower() not in MEDIA_SUFFIXES]
        if others:  # a folder of photos often holds other files: say which were left out, once
            log.info("--source %s: %d file(s) neither image nor video ignored: %s", source, len(others),
                     ", ".join(others[:5]) + (", ..." if len(others) > 5 else ""))
        folders = 0 if recursive else sum(p.is_dir() for p in entries)
        if folders:
            log.info("--source %s: %d sub-folder(s) not searched (--recursive searches them)", source,
                     folders)
        root = path
    elif path.is_file():
        files, root = [path], path.parent
    else:
        files = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
        root = glob_root(source)
    files = [f for f in files if f.suffix.lower() in MEDIA_SUFFIXES]
    if not files:
        raise FileNotFoundError(f"--source {source}: no such file, or no image or video file matches it "
                                f"(images: {', '.join(IMAGE_SUFFIXES)}; videos: {', '.join(VIDEO_SUFFIXES)})")
    relative = [_below(f, root) for f in files]
    return [Input(f, r, name) for f, r, name in zip(files, relative, output_names(relative))]



def glob_root(pattern: str) -> Path:
    """The folder a glob's matches are named below: its leading folders without a wildcard."""
    fixed = []
    for part in Path(pattern).parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")



def _below(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name



def output_names(relative: list[str]) -> list[str]:
    """The output name (no extension) of each input, given its distinct path below --source: the path without
    its suffix, unless inputs would share output files: inputs of the same name (a.jpg, a.png) and an image named
    like a video's frame (clip_3.jpg; clip.mp4 writes clip_0, clip_1, ...) are each named by their whole path
    instead (a.jpg, a.png; clip_3.jpg, clip.mp4), until no two inputs share a name (whole paths never do)."""
    names = [str(PurePosixPath(r).with_suffix("")) for r in relative]
    while True:
        counts = Counter(names)
        videos = {n for n, r in zip(names, relative) if Path(r).suffix.lower() in VIDEO_SUFFIXES}
        clashing = {n for n in names if counts[n] > 1}
        for n, r in zip(names, relative):
            match = _FRAME_NAME.fullmatch(n)
            if match and match.group(1) in videos and Path(r).suffix.lower() not in VIDEO_SUFFIXES:
                clashing |= {n, match.group(1)}
        renamed = [r if n in clashing else n for n, r in zip(names, relative)]
        if renamed == names:
            return names
        names = renamed



class UnreadableSource(ValueError):
    """An image or video that cannot be decoded: skipped, and counted in the summary."""
