"""The Pascal VOC layout: one xml `<annotation>` per image with its `<size>` and `<object>`s (`name`,
`bndbox` xmin ymin xmax ymax, `difficult`, `truncated`).

Where the files are (detect.data.formats.spec, format voc): VOCdevkit year folders (`ImageSets/Main/<split>.txt` lists
the stems, `Annotations/<stem>.xml`, `JPEGImages/<stem>.jpg`), a folder of images beside their xml (Roboflow's
export: `train/`, `valid/`), or flat folders with list files of names or stems, or with `val_fraction` (a stem
is val when a hash of it falls below the fraction: the same images every time, whatever the file-system order,
and adding images never moves the others).

VOC coordinates are 1-based inclusive pixel indices: xmin=1, xmax=10 covers the first ten columns, which is
x1=0, x2=10 in the records' corner coordinates. `difficult` objects are trained on and flagged in the records
so that evaluation ignores them; `truncated` is information only and is not kept. An image without an xml is a
background image; an xml without an image is reported and skipped; two images of one stem (`x.jpg`, `x.png`),
which would both read `x.xml`, are both skipped (`shared_label`, detect.data.formats.label_location).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.data.formats.label_location import shared_labels, skip_shared
from detect.data.formats.spec import DataSpec
from detect.data.records.cache import Fingerprint, SplitLabels
from detect.data.records.images import is_image_file, probe_images
from detect.data.records.records import (
    BadInputReport,
    ImageRecord,
    image_ids_for,
    validate_boxes_kept,
)

log = logging.getLogger(__name__)

FLAT_ANNOTATION_DIRS = ("annotations", "annots", "Annotations")
BOX_TAGS = ("xmin", "ymin", "xmax", "ymax")


@dataclass(frozen=True)
class VocItem:
    stem: str
    image: Path | None  # None: no image file with this stem
    xml: Path | None  # None: no annotation file (a background image)
    listed_in: Path | None  # the list file naming it; None when found by listing the flat folders
    images_dir: Path  # where the image was looked for (for the report)
    shared: tuple[Path, ...] = ()  # two or more images of this stem, which would all read one xml: skipped


@dataclass(frozen=True)
class VocAnnotation:
    size: tuple[int, int] | None  # (width, height) as the xml says, None when it has no <size>
    names: list[str]  # one per object
    boxes: np.ndarray  # float64 [n, 4]: xmin, ymin, xmax, ymax as written (1-based, inclusive)
    difficult: np.ndarray  # bool [n]


def _number(obj: ET.Element, tag: str, where: str) -> float:
    text = obj.findtext(tag)
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: <{tag}> is {text!r}, not a number") from None


def parse_annotation(path: Path) -> VocAnnotation:
    """Read one VOC xml; a ValueError names what is wrong (the parser's line and column for broken xml)."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise ValueError(f"not well-formed xml: {e}") from None
    if root.tag != "annotation":
        raise ValueError(f"the root element is <{root.tag}>, not <annotation>")
    size = None
    if root.find("size") is not None:
        size = tuple(int(_number(root.find("size"), tag, "<size>")) for tag in ("width", "height"))
    names, boxes, difficult = [], [], []
    for i, obj in enumerate(root.iter("object"), 1):
        name = (obj.findtext("name") or "").strip()
        where = f"object {i} ({name or 'no <name>'})"
        box = obj.find("bndbox")
        if not name or box is None:
            raise ValueError(f"{where}: an object needs a <name> and a <bndbox>")
        names.append(name)
        boxes.append([_number(box, tag, where) for tag in BOX_TAGS])
        difficult.append((obj.findtext("difficult") or "0").strip() == "1")
    return VocAnnotation(size, names, np.array(boxes, dtype=np.float64).reshape(-1, 4),
                         np.array(difficult, dtype=bool))


def _files_by_stem(folder: Path, keep) -> dict[str, Path]:
    """stem -> file of the folder (the first by name when two files share a stem)."""
    if not folder.is_dir():
        return {}
    files = sorted((e.name for e in os.scandir(folder) if e.is_file() and keep(e.name)), reverse=True)
    return {Path(n).stem: folder / n for n in files}


def _flat_folders(spec: DataSpec) -> tuple[Path, Path]:
    opts, root = spec.voc, spec.path
    images = opts.images or root / "images"
    candidates = [opts.annotations] if opts.annotations else [root / d for d in FLAT_ANNOTATION_DIRS]
    annotations = next((c for c in candidates if c.is_dir()), None)
    if not images.is_dir() or annotations is None:
        looked = images if not images.is_dir() else " or ".join(str(c) for c in candidates)
        raise FileNotFoundError(f"{spec.source_file}: the flat VOC layout needs image and xml folders; {looked} "
                                f"is not a folder (set `images:` / `annotations:` relative to `path`)")
    return images, annotations


def _items(stems: list[str], images_dir: Path, xml_dir: Path, listed_in: Path | None) -> list[VocItem]:
    images = _files_by_stem(images_dir, lambda n: is_image_file(Path(n)))
    xmls = _files_by_stem(xml_dir, lambda n: n.endswith(".xml"))
    every = sorted(images_dir / e.name for e in os.scandir(images_dir) if e.is_file() and is_image_file(
        Path(e.name))) if images_dir.is_dir() else []
    shared = shared_labels(every, [xml_dir / f"{p.stem}.xml" for p in every])  # x.jpg and x.png: one x.xml
    by_stem = {label.stem: tuple(group) for label, group in shared.items()}
    return [VocItem(s, images.get(s), xmls.get(s), listed_in, images_dir, by_stem.get(s, ()))
            for s in dict.fromkeys(stems)]


def _listed_stem(line: str) -> str:
    name = Path(line).name
    return Path(name).stem if is_image_file(Path(name)) else name


def _entry_items(spec: DataSpec, split: str, entry: str) -> list[VocItem]:
    """A VOCdevkit `YEAR/split` entry, or a list file of the flat layout."""
    year = spec.path / Path(entry).parent
    set_file = year / "ImageSets" / "Main" / f"{Path(entry).name}.txt"
    if set_file.is_file():
        stems = [ln.split()[0] for ln in set_file.read_text().splitlines() if ln.strip()]
        return _items(stems, year / "JPEGImages", year / "Annotations", set_file)
    folder = spec.path / entry
    if folder.is_dir():  # Roboflow's VOC export: each image beside its xml
        stems = sorted({Path(e.name).stem for e in os.scandir(folder) if e.is_file() and (
            is_image_file(Path(e.name)) or e.name.endswith(".xml"))})
        return _items(stems, folder, folder, None)
    list_file = spec.path / entry
    if list_file.is_file():
        stems = [_listed_stem(ln.strip()) for ln in list_file.read_text().splitlines() if ln.strip()]
        return _items(stems, *_flat_folders(spec), list_file)
    raise FileNotFoundError(f"{spec.source_file}: {split} entry {entry!r} is neither a VOCdevkit split ({set_file} "
                            f"does not exist), a list file of image names nor a folder of images beside their xml "
                            f"({list_file} does not exist)")


def is_val_stem(stem: str, fraction: float) -> bool:
    """Whether `val_fraction` puts this image in val: depends on its stem alone."""
    return int.from_bytes(hashlib.sha1(stem.encode()).digest()[:8], "big") < fraction * 2 ** 64


def split_items(spec: DataSpec, split: str) -> list[VocItem]:
    """The images of a split (with their xml), in the order the spec lists them (sorted stems for folders)."""
    opts = spec.voc
    if opts.val_fraction is None or split == "test":
        return [it for entry in getattr(opts, split) for it in _entry_items(spec, split, entry)]
    if opts.train:
        pool = [it for entry in opts.train for it in _entry_items(spec, "train", entry)]
    else:
        images, annotations = _flat_folders(spec)
        stems = sorted(set(_files_by_stem(images, lambda n: is_image_file(Path(n))))
                       | set(_files_by_stem(annotations, lambda n: n.endswith(".xml"))))
        test = {it.stem for it in split_items(spec, "test")}  # every image but the test split's
        pool = _items([s for s in stems if s not in test], images, annotations, None)
    return [it for it in pool if is_val_stem(it.stem, opts.val_fraction) == (split == "val")]


def all_xml_files(spec: DataSpec) -> list[Path]:
    """The xml files of every split (class names are collected from all of them, so the splits agree)."""
    return sorted({it.xml for split in ("train", "val", "test") for it in split_items(spec, split) if it.xml})


def fingerprint(items: list[VocItem], names, xml_files: list[Path]) -> str:
    fp = Fingerprint("voc", names or "names from the xml files")
    for it in items:
        fp.add(it.stem).add(it.listed_in).add(",".join(map(str, it.shared)))
        for f in (it.image, it.xml):
            if f is None:
                fp.add("none")
            else:
                fp.add_file_stat(f)
    if not names:  # another split's xml can add a class
        for f in xml_files:
            fp.add_file_stat(f)
    return fp.hexdigest()


def collect_names(xml_files: list[Path]) -> tuple[str, ...]:
    stats = tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size) for f in xml_files)
    return _collect_names(stats)


@functools.lru_cache(maxsize=4)  # train and val of one spec ask for the same names: read and log them once
def _collect_names(stats: tuple) -> tuple[str, ...]:
    names = set()
    for path, _, _ in stats:
        try:
            names.update(parse_annotation(Path(path)).names)
        except ValueError:
            pass  # reported with its split
    names = tuple(sorted(names))
    log.info(f"{len(names)} class names collected from {len(stats)} xml files (sorted): {', '.join(names)}; "
             f"list them as `names:` in the data spec to fix the set and order")
    return names


def _labels(ann: VocAnnotation, class_index: dict, width: int, height: int, xml: Path,
            report: BadInputReport) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(boxes, classes, difficult) of one image, validated against its real size."""
    known = np.array([n in class_index for n in ann.names], dtype=bool)
    unknown = sorted({n for n in ann.names if n not in class_index})
    if unknown:
        report.add("unknown_class", xml, f"{int((~known).sum())} object(s) of class {', '.join(unknown[:5])}, not "
                                         f"in `names`; add the class to `names` or fix the xml",
                   count=int((~known).sum()))
    inverted = known & (ann.boxes[:, 2:] <= ann.boxes[:, :2]).any(1)
    if inverted.any():
        report.add("zero_area", xml, f"{int(inverted.sum())} box(es) with xmin >= xmax or ymin >= ymax",
                   count=int(inverted.sum()))
    keep = known & ~inverted
    xyxy = ann.boxes[keep] - np.array([1.0, 1.0, 0.0, 0.0])  # 1-based inclusive -> corners
    classes = np.array([class_index[n] for n, k in zip(ann.names, keep) if k], dtype=np.float64)
    boxes, classes, kept = validate_boxes_kept(xyxy, classes, width, height, len(class_index), str(xml), report)
    return boxes, classes, ann.difficult[keep][kept]


def _record(item: VocItem, image_id: int, width: int, height: int, class_index: dict,
            report: BadInputReport) -> ImageRecord | None:
    """The record of one readable image, or None when its xml is unusable (reported)."""
    none = np.zeros((0, 4), dtype=np.float32), np.zeros(0, dtype=np.int64)
    if item.xml is None:
        report.add("background", item.image, "no xml: kept as a background image (no boxes)")
        return ImageRecord(str(item.image), width, height, *none, image_id)
    try:
        ann = parse_annotation(item.xml)
    except (ValueError, OSError) as e:
        report.add("label_syntax", item.xml, str(e))
        return None
    if ann.size is not None and ann.size != (width, height):
        report.add("size_mismatch", item.xml, f"<size> says {ann.size[0]}x{ann.size[1]} but {item.image.name} is "
                                              f"{width}x{height}; the image's size is used")
    boxes, classes, difficult = _labels(ann, class_index, width, height, item.xml, report)
    return ImageRecord(str(item.image), width, height, boxes, classes, image_id, difficult)


def scan(items: list[VocItem], names, xml_files: list[Path]) -> SplitLabels:
    """Validated records of a split; `names` None collects them from `xml_files` (all splits)."""
    names = tuple(names) if names else collect_names(xml_files)
    if not names:
        raise ValueError(f"no <object> with a <name> in {len(xml_files)} xml file(s): nothing to learn; "
                         f"check the annotation folder or give `names:` in the data spec")
    class_index = {n: i for i, n in enumerate(names)}
    report = BadInputReport()
    ids = image_ids_for([it.stem for it in items])
    shared = [(image, it.xml or it.images_dir / f"{it.stem}.xml") for it in items for image in it.shared]
    skip_shared([image for image, _ in shared], [xml for _, xml in shared], report)
    probes = iter(probe_images([it.image for it in items if it.image is not None and not it.shared], report))
    records, dropped = [], []
    for item, image_id in zip(items, ids):
        if item.shared:
            continue  # reported as shared_label
        if item.image is None:
            if item.listed_in is None:  # an xml found by listing the folder: not an image of the dataset
                report.add("no_image", item.xml, f"no image {item.stem}.* in {item.images_dir}; xml skipped")
                continue
            report.add("missing", item.images_dir / item.stem,
                       f"listed in {item.listed_in} but no image {item.stem}.* in {item.images_dir}")
            dropped.append(image_id)
            continue
        probe = next(probes)
        record = None if probe is None else _record(item, image_id, probe.width, probe.height, class_index, report)
        if record is None:
            dropped.append(image_id)
        else:
            records.append(record)
    return SplitLabels(records, names, list(range(len(names))), dropped, report)
