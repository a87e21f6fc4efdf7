"""Datasets in Darknet's layout, written in a tmp folder: obj.data, obj.names, image list files and YOLO labels;
and the Darknet copy of a dataset another spec reads (kangaroo's VOC xml), image for image and box for box."""

import os
from pathlib import Path

import numpy as np


def write_obj_data(path: Path, **keys) -> Path:
    """An obj.data of `key = value` lines (in the order given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k} = {v}\n" for k, v in keys.items()))
    return path


def write_lines(path: Path, lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def yolo_rows(record) -> list[str]:
    """The record's boxes as YOLO label lines (class cx cy w h, normalised), every digit of the float kept."""
    boxes = np.asarray(record.boxes, dtype=np.float64)
    size = np.array([record.width, record.height], dtype=np.float64)
    centres = (boxes[:, :2] + boxes[:, 2:]) / 2 / size
    sides = (boxes[:, 2:] - boxes[:, :2]) / size
    return [f"{int(k)} {cx!r} {cy!r} {w!r} {h!r}"
            for k, (cx, cy), (w, h) in zip(record.classes.tolist(), centres.tolist(), sides.tolist())]


def darknet_copy(splits: dict, names, root: Path) -> Path:
    """Darknet's layout of the opened sources `splits` ({"train": source, "valid": source}) under `root`:
    data/obj/images/<file> (links to the sources' images), data/obj/labels/<stem>.txt, data/<split>.txt listing
    `data/obj/images/<file>` (relative to `root`, as Darknet runs from its own folder) in the sources' order,
    data/obj.names and data/obj.data. Returns the obj.data path."""
    images, labels = root / "data" / "obj" / "images", root / "data" / "obj" / "labels"
    images.mkdir(parents=True, exist_ok=True)
    labels.mkdir(parents=True, exist_ok=True)
    for split, source in splits.items():
        listed = []
        for record in source.records:
            name = Path(record.path).name
            if not (images / name).exists():
                os.symlink(Path(record.path).resolve(), images / name)
            (labels / f"{Path(name).stem}.txt").write_text("".join(f"{row}\n" for row in yolo_rows(record)))
            listed.append(f"data/obj/images/{name}")
        write_lines(root / "data" / f"{split}.txt", listed)
    write_lines(root / "data" / "obj.names", names)
    return write_obj_data(root / "data" / "obj.data", classes=len(names), train="data/train.txt",
                          valid="data/valid.txt", names="data/obj.names", backup="backup/")
