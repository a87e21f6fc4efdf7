"""The YOLO txt layout: one `class cx cy w h` line per box in a .txt file per image, found where Darknet,
ultralytics or labelImg put it (detect.data.formats.label_location's rule table; detect.data.formats.label_layouts chooses one
rule per split). Two images that would read one label file (`x.jpg` and `x.png` beside `x.txt`) are both skipped
and reported (`shared_label`).

Coordinates are normalised to the image (0..1). A line of an odd number of 7 or more values is a polygon
(`class x1 y1 x2 y2 ...`) and becomes its bounding box; what detect.predict writes after `class cx cy w h` (a
confidence, a track id: `parse_label_text`) is read past. A missing label file means a background image.
Image ids are the numeric file stems when all of them are numeric and unique (COCO file names keep their
official ids), else the position in the sorted file list.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from detect.data.formats.label_layouts import label_path
from detect.data.formats.label_location import skip_shared
from detect.data.records.cache import Fingerprint, SplitLabels
from detect.data.records.images import probe_images
from detect.data.records.records import (
    BadInputReport,
    ImageRecord,
    first_few,
    image_ids_for,
    validate_boxes_kept,
)


def list_images(entry: Path) -> list[Path]:
    """Image files of a split: every file under a folder but .txt files (labels beside the images, or
    labelImg's classes.txt: never images), or the paths listed in a .txt file. Other files stay in the list, so
    that the cache's report names them."""
    if entry.is_dir():
        return sorted(p for p in entry.rglob("*") if p.is_file() and p.suffix.lower() != ".txt")
    lines = [ln.strip() for ln in entry.read_text().splitlines()]
    files = []
    for line in filter(None, lines):
        p = Path(line)
        files.append(p if p.is_absolute() else (entry.parent / p))
    return [Path(str(p).replace("/./", "/")) for p in files]


def fingerprint(files: list[Path], names, layout: str) -> str:
    """The cache key of a split: its files, their labels under `layout`, and the layout itself (the same files
    read by another rule are other labels)."""
    fp = Fingerprint("yolo", names, f"layout={layout}")
    for image in files:
        fp.add_file_stat(image)
        label = label_path(image, layout)
        try:
            fp.add(hashlib.sha1(label.read_bytes()).digest() if label is not None else "no-label")
        except OSError:
            fp.add("no-label")
    return fp.hexdigest()


def parse_label_text(text: str, with_confidence: list | None = None,
                     line_numbers: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(classes float64 [n], boxes normalised cxcywh float64 [n,4]); raises ValueError naming the bad line.
    Lines `detect.predict --save-txt` writes read as boxes, the values after `class cx cy w h` ignored: 6 values
    (a confidence from --save-conf, or a track id from --track) and 7 values ending in a track id, which predict
    writes as a whole number without a decimal point (1, 12), where a polygon's coordinates are fractions (a
    triangle whose last coordinate is written as the bare integer 1 reads as a tracked box: the one ambiguity of
    the layout). The line numbers of those go into `with_confidence`; `line_numbers` receives the line of each
    box."""
    classes, boxes = [], []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            values = [float(v) for v in fields]
        except ValueError:
            raise ValueError(f"line {number}: {line.strip()!r} is not numbers (want: class cx cy w h)") from None
        ends_in_an_id = fields[-1].isdigit() and int(fields[-1]) >= 1
        if len(values) == 5 or len(values) == 6 or (len(values) == 7 and ends_in_an_id):
            boxes.append(values[1:5])
            if len(values) > 5 and with_confidence is not None:
                with_confidence.append(number)
        elif len(values) >= 7 and len(values) % 2 == 1:
            xs, ys = np.array(values[1::2]), np.array(values[2::2])
            boxes.append([(xs.min() + xs.max()) / 2, (ys.min() + ys.max()) / 2, np.ptp(xs), np.ptp(ys)])
        else:
            raise ValueError(f"line {number}: {len(values)} values; want 5 (class cx cy w h), 6 (and a confidence "
                             f"or a track id, ignored) or a polygon (class x1 y1 x2 y2 x3 y3 ...)")
        classes.append(values[0])
        if line_numbers is not None:
            line_numbers.append(number)
    return np.array(classes, dtype=np.float64), np.array(boxes, dtype=np.float64).reshape(-1, 4)


def scan(files: list[Path], names, layout: str) -> SplitLabels:
    """Records of a split whose labels lie as `layout` (detect.data.formats.label_layouts) says."""
    if not names:
        raise ValueError("a yolo dataset needs `names` in its spec (one name per class id)")
    report = BadInputReport()
    own_label = skip_shared(files, [label_path(f, layout) for f in files], report)
    probes = iter(probe_images([f for f, own in zip(files, own_label) if own], report))
    records, dropped = [], []
    for path, own, image_id in zip(files, own_label, image_ids_for([p.stem for p in files])):
        if not own:
            continue  # reported as shared_label
        probe = next(probes)
        if probe is None:
            dropped.append(image_id)
            continue
        read = read_boxes(label_path(path, layout), probe, len(names), report)
        if read is None:
            dropped.append(image_id)
            continue
        boxes, classes = read
        records.append(ImageRecord(str(path), probe.width, probe.height, boxes, classes, image_id))
    return SplitLabels(records, tuple(names), list(range(len(names))), dropped, report)


def read_boxes(label: Path | None, probe, num_classes: int,
               report: BadInputReport) -> tuple[np.ndarray, np.ndarray] | None:
    """The validated boxes (xyxy pixels, classes) of one image of `probe`'s size from its label file (none when
    `label` is None or absent: a background image); None when the file cannot be read, reported as label_syntax
    with the line at fault. Boxes dropped or clipped are reported with their lines."""
    try:
        text = label.read_text(encoding="utf-8-sig") if label is not None and label.exists() else ""
        confident: list[int] = []
        lines: list[int] = []
        classes, cxcywh = parse_label_text(text, confident, lines)
    except (ValueError, UnicodeDecodeError) as e:
        report.add("label_syntax", label, str(e))
        return None
    except OSError as e:  # unreadable (permissions, I/O): the image is dropped, not taken as background
        report.add("label_syntax", label, f"cannot be read ({type(e).__name__}: {e.strerror or e})")
        return None
    if confident:
        report.add("confidence_column", label, f"{len(confident)} line(s) with values after class cx cy w h (a confidence, "
                   f"a track id: detect.predict --save-conf / --track), read as boxes with those ignored: "
                   f"line(s) {first_few(confident)}", count=len(confident))
    scale = np.array([probe.width, probe.height] * 2, dtype=np.float64)
    xyxy = np.concatenate([cxcywh[:, :2] - cxcywh[:, 2:] / 2, cxcywh[:, :2] + cxcywh[:, 2:] / 2], 1) * scale
    boxes, classes, _ = validate_boxes_kept(xyxy, classes, probe.width, probe.height, num_classes, str(label), report,
                                            np.array(lines, dtype=np.int64))
    return boxes, classes
