"""A folder given as `--data`: the export of an annotation tool read where it was unzipped.

What the folder holds decides how it is read (the first that fits; one info line says which):
- a Darknet `.data` file (CVAT's "YOLO 1.1": obj.data, obj.names, train.txt listing `data/obj_train_data/x.jpg`,
  obj_train_data/ with each image's .txt beside it): read as that file (detect.data.formats.darknet_data; the paths'
  leading `data/` is the folder itself, detect.data.formats.darknet_paths);
- one data yaml (Roboflow's and ultralytics' `data.yaml`): read as that spec;
- Label Studio's YOLO export (`classes.txt`, `images/`, `labels/`): format yolo, names from classes.txt;
- Roboflow's Pascal VOC export (`train/`, `valid/`, `test/`, each image beside its .xml): format voc, one split
  per folder;
- a folder of images beside their .xml (one split of that export): format voc.
An export with one set of images (Label Studio, one split folder) is both the train and the val split, with a
warning: the metrics are then those of images trained on.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from detect.data.records.images import is_image_file

log = logging.getLogger(__name__)

ROBOFLOW_SPLITS = {"train": ("train",), "val": ("valid", "val"), "test": ("test",)}


def _has(folder: Path, keep) -> bool:
    return folder.is_dir() and any(e.is_file() and keep(e.name) for e in os.scandir(folder))


def _xml_with_images(folder: Path) -> bool:
    return _has(folder, lambda n: n.endswith(".xml")) and _has(folder, lambda n: is_image_file(Path(n)))


def _one_split(folder: Path, what: str) -> None:
    log.warning(f"{folder}: {what} has one set of images, used as both the train and the val split: its metrics "
                f"are those of images the model trains on; write a data spec with a `val:` of other images to "
                f"measure it")


def _single(files: list[Path], folder: Path, what: str) -> Path | None:
    if len(files) > 1:
        raise ValueError(f"--data {folder}: the folder holds {len(files)} {what} ({', '.join(f.name for f in files)})"
                         f"; give the one to read as --data")
    return files[0] if files else None


def read_export_folder(folder: Path) -> Path | tuple[dict, str]:
    """A spec file inside `folder` to read instead (a Darknet .data, a data yaml), or (spec keys, why) of an export
    read as it lies; a ValueError saying what a folder given as --data must hold when it is none of these."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    inner = (_single([p for p in files if p.suffix == ".data"], folder, "Darknet .data files")
             or _single([p for p in files if p.suffix in (".yaml", ".yml")], folder, "data yaml files"))
    if inner is not None:
        log.info(f"--data {folder}: reading {inner.name} (the folder's dataset description)")
        return inner
    if (folder / "classes.txt").is_file() and (folder / "images").is_dir() and (folder / "labels").is_dir():
        from detect.data.formats.darknet_data import read_names

        _one_split(folder, "a Label Studio YOLO export")
        raw = {"format": "yolo", "path": str(folder), "train": "images", "val": "images",
               "names": list(read_names(folder / "classes.txt"))}
        return raw, "a Label Studio YOLO export (classes.txt, images/, labels/)"
    splits = {split: next((n for n in names if _xml_with_images(folder / n)), None)
              for split, names in ROBOFLOW_SPLITS.items()}
    if any(splits.values()):
        raw = {"format": "voc", "path": str(folder), **{k: v for k, v in splits.items() if v}}
        shown = ", ".join(f"{k} {v}/" for k, v in splits.items() if v)
        return raw, f"a Roboflow Pascal VOC export (each image beside its .xml): {shown}"
    if _xml_with_images(folder):
        _one_split(folder, "a folder of images beside their .xml")
        return {"format": "voc", "path": str(folder), "train": ".", "val": "."}, "images beside their .xml (VOC)"
    raise ValueError(f"--data {folder}: a folder, but not one of the exports read as they lie: a Darknet .data "
                     f"file (CVAT YOLO 1.1's obj.data), a data.yaml (Roboflow YOLO, ultralytics), classes.txt with "
                     f"images/ and labels/ (Label Studio YOLO), train/ and valid/ with each image beside its .xml "
                     f"(Roboflow Pascal VOC). Give a data spec file (data/README.md) instead")


__all__ = ["read_export_folder"]
