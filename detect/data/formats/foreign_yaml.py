"""Data yaml files as Roboflow and ultralytics write them, read by detect.data.formats.spec.

They carry no `format` key (it is told from the keys and files), often no `path` (the yaml's own folder is the
root), split paths such as Roboflow's `train: ../train/images`, and `nc` beside `names`.

ultralytics reads a split path under the root and, when a path starting with `../` does not exist there, the
same path without that `../`; a Roboflow export (data.yaml beside train/ and valid/) relies on it. So does this
module, and it says so in an info line.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

ANNOTATION_KEYS = ("train_annotations", "val_annotations", "test_annotations")
VOC_ONLY_KEYS = ("val_fraction", "images", "annotations")  # keys no other format has


def _is_voc_entry(root: Path, entry) -> bool:
    """Whether `entry` is a VOCdevkit split (`VOC2007/trainval`: VOC2007/ImageSets/Main/trainval.txt exists) or a
    folder of images beside their .xml."""
    if isinstance(entry, list):
        entry = entry[0] if entry else ""
    if isinstance(entry, str) and entry and (root / entry).is_dir():  # Roboflow's VOC export: x.jpg beside x.xml
        files = [p for p in (root / entry).iterdir() if p.is_file()]
        return any(p.suffix == ".xml" for p in files) and not any(p.suffix == ".txt" and p.name != "classes.txt"
                                                                   for p in files)  # YOLO labels beside: yolo
    if not isinstance(entry, str) or "/" not in entry.strip("/"):
        return False
    year, _, split = entry.strip("/").rpartition("/")
    return (root / year / "ImageSets" / "Main" / f"{split}.txt").is_file()


def infer_format(raw: Mapping, root: Path | None, source: str) -> str:
    """The format of a spec without a `format` key: coco with an annotation json, voc by its own keys or a
    VOCdevkit split, else yolo (train / val name image folders or .txt lists of images); one info line says why."""
    voc_keys = [k for k in VOC_ONLY_KEYS if raw.get(k) not in (None, "")]
    entry = raw.get("train") or raw.get("val")
    if any(raw.get(k) for k in ANNOTATION_KEYS):
        fmt, why = "coco", "it has a COCO json (*_annotations)"
    elif voc_keys:
        fmt, why = "voc", f"key(s) {', '.join(voc_keys)} belong to Pascal VOC specs"
    elif entry and root is not None and _is_voc_entry(root, entry):
        fmt, why = "voc", f"{entry} is a VOCdevkit split"
    elif entry:
        fmt, why = "yolo", "train / val name image folders or lists, and no COCO json is given"
    else:
        raise ValueError(f"{source}: no `format` key, and no `train` / `val` to tell it from; add `format: yolo` "
                         f"(or coco, voc, synthetic) with the keys data/README.md lists for it")
    log.info(f"{source}: format {fmt} (no `format` key: {why}; add `format:` to choose another)")
    return fmt


def split_path(root: Path, value: str, key: str, source: str) -> Path:
    """`root / value`, except that a `../x` which does not exist there while `x` does is read as `x` (as
    ultralytics reads Roboflow's exports)."""
    path = root / value
    if value.startswith("../") and not path.exists():
        inside = root / value[3:]
        if inside.exists():
            log.info(f"{source}: {key} = {value!r}: {path} does not exist; using {inside} (Roboflow's ../ paths, "
                     f"read as ultralytics reads them)")
            return inside
    return path


def check_split_value(raw: Mapping, key: str, source: str) -> None:
    """A split is one folder or one list file; ultralytics also takes a list of them, this project does not."""
    value = raw.get(key)
    if isinstance(value, (list, tuple)):
        raise ValueError(f"{source}: `{key}` lists {len(value)} entries; give one image folder, or one .txt file "
                         f"listing every image of the split (one path per line)")
    if isinstance(value, Mapping):
        raise ValueError(f"{source}: `{key}` must be a folder or a .txt list of images, got a mapping {value!r}")


def check_class_count(raw: Mapping, names: tuple[str, ...] | None, source: str) -> None:
    """`nc`, where given, must be a class count that agrees with `names`."""
    nc = raw.get("nc")
    if nc is None:
        return
    if isinstance(nc, bool) or not isinstance(nc, int) or nc < 1:
        raise ValueError(f"{source}: `nc` must be a whole number of classes (1 or more), got {nc!r}")
    if names is not None and len(names) != nc:
        raise ValueError(f"{source}: `nc` is {nc} but `names` lists {len(names)} classes; make them agree (or "
                         f"remove `nc`: the names say how many classes there are)")


__all__ = ["check_class_count", "check_split_value", "infer_format", "split_path"]
