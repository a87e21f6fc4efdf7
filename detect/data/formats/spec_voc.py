"""Format voc in a data spec: each split's entries and the flat layout's folders (detect.data.formats.voc reads them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

VOC_KEYS = ("train", "val", "test", "val_fraction", "images", "annotations")


@dataclass(frozen=True)
class VocOptions:
    """Format voc: each split's entries as written in the spec, and the flat layout's folders."""

    train: tuple[str, ...] = ()  # empty with val_fraction: every image of the flat layout
    val: tuple[str, ...] = ()
    test: tuple[str, ...] = ()
    val_fraction: float | None = None  # share of the train entries drawn as val
    images: Path | None = None  # flat layout: the `images:` key resolved; None = <path>/images
    annotations: Path | None = None  # flat layout: the `annotations:` key; None = the first default that exists


def _voc_entries(raw, key: str, source: str) -> tuple[str, ...]:
    if raw in (None, ""):
        return ()
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise ValueError(f"{source}: `{key}` must be an entry such as VOC2007/trainval or train.txt, or a list "
                         f"of them; got {raw!r}")
    return tuple(e.strip() for e in entries)


def voc_options(raw: Mapping, root: Path, source: str) -> VocOptions:
    train, val = _voc_entries(raw.get("train"), "train", source), _voc_entries(raw.get("val"), "val", source)
    test = _voc_entries(raw.get("test"), "test", source)
    fraction = raw.get("val_fraction")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
            raise ValueError(f"{source}: `val_fraction` must be a number between 0 and 1 (e.g. 0.2), "
                             f"got {fraction!r}")
        if val:
            raise ValueError(f"{source}: give either `val` or `val_fraction`, not both")
    elif not train and not val:  # one of them is enough: detect.val evaluates a val-only spec
        raise ValueError(f"{source}: format voc needs `train` or `val` (entries such as VOC2007/trainval, "
                         f"train.txt or a folder of images with their xml), or `val_fraction` to draw val from "
                         f"train")
    folders = {k: root / str(raw[k]) if raw.get(k) else None for k in ("images", "annotations")}
    return VocOptions(train, val, test, None if fraction is None else float(fraction), **folders)


__all__ = ["VOC_KEYS", "VocOptions", "voc_options"]
