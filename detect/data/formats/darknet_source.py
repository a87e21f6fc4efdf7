"""A split of a Darknet obj.data: its image list file, the images' YOLO txt labels, into the label cache.

The list holds one image path per line (`get_paths`, src/data.c); blank lines are skipped and surrounding
whitespace is dropped. Relative lines are read from the current directory (Darknet's rule), else from the list
file's folder: one base for the whole list, the first that holds a listed image, said in one info line.
Labels (the rule table of detect.data.formats.label_location): AlexeyAB's `replace_image_to_label`, else pjreddie's
images/ -> labels/, one rule per split, the first under which any label file exists; images that would share one
label file are skipped (`shared_label`). Darknet's `read_boxes` reads a missing label file as an image without
objects ("Can't open label file", the path added to bad.list); so does this reader, counting each as
`background` (information). A listed image that does not exist is reported as `missing` with
the list's line and skipped. Label lines are read and checked as YOLO txt everywhere (detect.data.formats.yolo_labels):
a line that is no box drops its image (`label_syntax`, the line named), a box out of range or outside the image
is dropped and reported with its line.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from detect.data.formats.darknet_paths import locate, not_found_message
from detect.data.formats.label_location import DARKNET_RULES, RULE_WORDS, label_file, skip_shared
from detect.data.formats.spec import DataSpec
from detect.data.formats.yolo_labels import read_boxes
from detect.data.records.cache import Fingerprint, SplitLabels, cache_file_for, cached_labels
from detect.data.records.images import probe_images
from detect.data.records.records import BadInputReport, ImageRecord, image_ids_for

log = logging.getLogger(__name__)

# src/detector.c coco_ids: the COCO category id of each of the 80 classes, for `eval = coco`
COCO_IDS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32,
            33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60,
            61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90)
LEADING_INT = re.compile(r"^\s*[+-]?\d+")


@dataclass(frozen=True)
class ImageList:
    """The lines of an image list file and the folder its relative lines are read from."""

    file: Path
    listed: tuple[str, ...]  # each line as written, surrounding whitespace dropped
    lines: tuple[int, ...]  # 1-based line numbers in `file`
    base: Path  # absolute; an absolute line ignores it

    def paths(self) -> list[Path]:
        return [self.base / text for text in self.listed]


def read_image_list(list_file: Path, what: str) -> ImageList:
    """The list's lines with their base folder (said in one info line); an error naming the list, a line and both
    places tried when not one listed image exists."""
    try:
        text = list_file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{list_file}: not a text list of image paths ({e})") from None
    entries = [(line.strip(), n) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not entries:
        raise ValueError(f"{list_file}: lists no image; write one image path per line")
    folder, cwd = list_file.absolute().parent, Path.cwd()
    relative = [(value, n) for value, n in entries if not Path(value).is_absolute()]
    base, how = cwd, (f"relative to the current directory {cwd} (Darknet's rule), though none of its relative "
                      f"lines names an image that exists" if relative else "as absolute paths")
    for value, n in relative:
        found = locate(value, list_file, n)
        if found.found is not None:
            base = cwd if found.base == "cwd" else folder
            how = (f"relative to the current directory {cwd} (Darknet's rule)" if base == cwd else
                   f"relative to the list's folder {folder} (they are not under the current directory {cwd}, "
                   f"where Darknet opens them)")
            if found.base == "data":  # the list lies in what Darknet calls data/: `data/x` is its `x`
                entries = [(_inside_data(v), n) for v, n in entries]
                how += "; their leading data/ read as that folder (an export meant for Darknet's data/, e.g. CVAT's)"
            break
    else:
        if relative and not any(Path(value).exists() for value, _ in entries):
            value, n = relative[0]
            raise FileNotFoundError(not_found_message(locate(value, list_file, n), "listed image") + " No other "
                                    "line of the list names an image that exists either.")
    log.info(f"{what}: image paths of {list_file} read {how}")
    return ImageList(list_file, tuple(v for v, _ in entries), tuple(n for _, n in entries), base)


def _inside_data(value: str) -> str:
    parts = Path(value).parts
    return str(Path(*parts[1:])) if len(parts) > 1 and parts[0] == "data" else value


def choose_label_rule(listing: ImageList, what: str) -> str:
    """The first rule under which any listed image has a label file (said in an info line); a ValueError naming
    where each rule looked when none has one."""
    for rule in DARKNET_RULES:
        for listed in listing.listed:
            label = label_file(listed, listing.base, rule)
            if label.is_file():
                alone = "; AlexeyAB's rule finds no label file beside these images" if rule == "darknet" else ""
                log.info(f"{what}: labels by {RULE_WORDS[rule]}{alone}, e.g. {label}")
                return rule
    if not any(path.exists() for path in listing.paths()):
        return DARKNET_RULES[0]  # every image is missing: the label cache reports each
    first = listing.listed[0]
    places = " or ".join(str(label_file(first, listing.base, rule)) for rule in DARKNET_RULES)
    raise ValueError(f"{what}: {len(listing.listed)} image(s) listed in {listing.file} but not one label file; for "
                     f"line {listing.lines[0]} ({first}) Darknet reads {places}. Write each image's labels there "
                     f"(class cx cy w h per line, normalised); Darknet would train every image as background")


def image_ids(listing: ImageList, coco: bool) -> list[int]:
    """Numeric file stems when unique (else positions); with `eval = coco`, Darknet's `get_coco_image_id` (the
    number after the path's last `_` or `/`) where that gives unique positive ids."""
    paths = listing.paths()
    if coco:
        ids = [darknet_coco_image_id(listed) for listed in listing.listed]  # the path as listed, as Darknet
        if all(i > 0 for i in ids) and len(set(ids)) == len(ids):
            return ids
        log.info(f"{listing.file}: the file names give no unique COCO image ids (Darknet's get_coco_image_id); "
                 f"images are numbered as for any list")
    return image_ids_for([p.stem for p in paths])


def darknet_coco_image_id(path: str) -> int:
    """src/detector.c get_coco_image_id: atoi of what follows the last `_` (else the last `/`) of the path."""
    cut = path.rfind("_") if "_" in path else path.rfind("/")
    match = LEADING_INT.match(path[cut + 1:])
    return int(match.group()) if match else 0


def fingerprint(listing: ImageList, labels: list[Path], names, rule: str, coco: bool) -> str:
    fp = Fingerprint("darknet", names, f"rule={rule}", f"coco={coco}", listing.base).add_file_stat(listing.file)
    for image, label in zip(listing.paths(), labels):
        fp.add_file_stat(image)
        try:
            fp.add(hashlib.sha1(label.read_bytes()).digest())
        except OSError:
            fp.add("no-label")
    return fp.hexdigest()


def scan(listing: ImageList, labels: list[Path], names, coco: bool) -> SplitLabels:
    """Records of the listed images with their label files `labels`."""
    report = BadInputReport()
    paths, ids = listing.paths(), image_ids(listing, coco)
    present = [p.exists() for p in paths]
    for path, line, ok in zip(paths, listing.lines, present):
        if not ok:
            report.add("missing", path, f"listed in {listing.file} line {line}: file not found")
    own_label = skip_shared(paths, labels, report, str(listing.file))
    present = [ok and own for ok, own in zip(present, own_label)]
    probes = iter(probe_images([p for p, ok in zip(paths, present) if ok], report))
    records, dropped = [], []
    for path, label, image_id, ok, own in zip(paths, labels, ids, present, own_label):
        if not own:
            continue  # reported as shared_label
        probe = next(probes) if ok else None
        if probe is None:
            dropped.append(image_id)
            continue
        if not label.is_file():
            report.add("background", label, "no label file: an image without objects, as Darknet reads it "
                                            "(\"Can't open label file\")")
        read = read_boxes(label if label.is_file() else None, probe, len(names), report)
        if read is None:
            dropped.append(image_id)
            continue
        records.append(ImageRecord(str(path), probe.width, probe.height, *read, image_id))
    category_ids = list(COCO_IDS) if coco and len(names) == len(COCO_IDS) else list(range(len(names)))
    return SplitLabels(records, tuple(names), category_ids, dropped, report)


def darknet_labels(spec: DataSpec, split: str, cache_dir: Path, what: str) -> SplitLabels:
    """The cached labels of a split of an obj.data spec (built on rank 0 first)."""
    list_file = spec.images(split)
    listing = read_image_list(list_file, what)
    rule = choose_label_rule(listing, what)
    labels = [label_file(listed, listing.base, rule) for listed in listing.listed]
    coco = spec.darknet.eval == "coco"
    cache_file = cache_file_for(cache_dir, Path(spec.source_file).stem, split, f"{list_file.absolute()}|{listing.base}")
    return cached_labels(cache_file, lambda: fingerprint(listing, labels, spec.names, rule, coco),
                         lambda: scan(listing, labels, spec.names, coco), what)


__all__ = ["COCO_IDS", "ImageList", "choose_label_rule", "darknet_labels", "read_image_list"]
