"""Dataset spec files (`data/*.yaml`): where a dataset lives and in which format.

Keys: `path` (root; relative split paths resolve under it), `format` (coco | yolo | voc | synthetic), `train`
and `val` (an image folder or a .txt list of image paths), `train_annotations` / `val_annotations` (COCO json,
format coco), `names` (required for yolo; optional for coco, where the json has them). Every format takes an
optional `test` split the same way (`test_annotations` for coco; `test_images` for synthetic), evaluated by
`detect.val --split test`.
`classes` (a list of class names or indices) trains and evaluates on those classes only
(detect.data.class_selection). A relative `path`
resolves against the current directory, else against the repository root (so `../shared/...` works from both).
Format `synthetic` takes `seed`, `train_images`, `val_images`, `test_images` (default 0: no test split) and an
optional `path` (the generation folder).

Format `voc` (Pascal VOC xml, detect.data.voc): `train` / `val` are one entry or a list of entries, each either
a VOCdevkit year folder and ImageSets split (`VOC2007/trainval`: `VOC2007/ImageSets/Main/trainval.txt` lists
the stems, `VOC2007/Annotations`, `VOC2007/JPEGImages`) or a list file of image names or stems of a flat
layout (images in `images:`, default `images/`; xml in `annotations:`, default the first of `annotations/`,
`annots/`, `Annotations/`). `test` takes entries as `val` does. `val_fraction: 0.2` instead of `val` draws val
from the train entries (from every image of the flat layout but the test split's when `train` is absent) by a
hash of each stem. `names` is optional: without it the
class names of the xml files of all splits are used, sorted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from detect.data.class_selection import ClassSelection, parse_classes

REPO_ROOT = Path(__file__).resolve().parents[2]
FORMATS = ("coco", "yolo", "voc", "synthetic")
REQUIRED_KEYS = {
    "coco": ("path", "train", "val", "train_annotations", "val_annotations"),  # test, test_annotations optional
    "yolo": ("path", "train", "val", "names"),
    "voc": ("path",),
    "synthetic": (),
}
SPLITS = ("train", "val", "test")
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


@dataclass(frozen=True)
class DataSpec:
    path: Path | None
    format: str
    train: Path | None = None
    val: Path | None = None
    train_annotations: Path | None = None
    val_annotations: Path | None = None
    test: Path | None = None
    test_annotations: Path | None = None
    names: tuple[str, ...] | None = None
    source_file: str = "<dict>"
    options: dict = field(default_factory=dict)  # format-specific extras (synthetic: seed, sizes)
    voc: VocOptions | None = None  # format voc; its `train` / `val` / `test` fields are then `path` when it exists
    # (train and val always: _voc_options requires both, or val_fraction to draw them from one pool)
    selection: ClassSelection = ClassSelection()  # `classes:` of the spec; --single-cls sets single_cls

    def has_split(self, split: str) -> bool:
        if self.format == "synthetic":
            return split != "test" or int(self.options.get("test_images") or 0) > 0
        return getattr(self, split) is not None

    def with_single_cls(self, single_cls: bool = True) -> DataSpec:
        """The spec with --single-cls applied (every chosen class becomes one)."""
        if not single_cls:
            return self
        return replace(self, selection=ClassSelection(self.selection.classes, single_cls=True))

    def images(self, split: str) -> Path:
        return self._split_path(split, "")

    def annotations(self, split: str) -> Path:
        return self._split_path(split, "_annotations")

    def _split_path(self, split: str, suffix: str) -> Path:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        key = split + suffix
        value = getattr(self, key)
        if value is None:
            hint = " (an optional split: add it to the spec to evaluate it)" if split == "test" else ""
            raise ValueError(f"{self.source_file}: key {key!r} is missing (format {self.format}){hint}")
        if not value.exists():
            raise FileNotFoundError(f"{self.source_file}: {key} = {value} does not exist; "
                                    f"set `path` in the spec or override it (e.g. path=/data/coco)")
        return value


def default_cache_dir() -> Path:
    """$DETECT_CACHE, else the user's cache folder ($XDG_CACHE_HOME or ~/.cache) /detect: label caches and generated
    data belong to the user, wherever the tools run from (never inside the source tree or site-packages)."""
    import os

    if os.environ.get("DETECT_CACHE"):
        return Path(os.environ["DETECT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detect"


def _resolve_root(value: str, source: str) -> Path:
    p = Path(value).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [Path.cwd() / p, REPO_ROOT / p]
    for c in candidates:
        if c.exists():
            return c.resolve()
    tried = " or ".join(str(c) for c in dict.fromkeys(candidates))
    raise FileNotFoundError(f"{source}: path {value!r} does not exist (looked at {tried}); "
                            f"point `path` at the dataset root")


def _parse_names(raw, source: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if isinstance(raw, Mapping):  # {0: person, 1: bicycle} style
        try:
            keys = sorted(int(k) for k in raw)
        except ValueError:
            raise ValueError(f"{source}: `names` keys must be class indices, got {list(raw)[:5]}") from None
        if keys != list(range(len(keys))):
            raise ValueError(f"{source}: `names` indices must be 0..{len(keys) - 1} without gaps")
        raw = [raw[k] if k in raw else raw[str(k)] for k in keys]
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ValueError(f"{source}: `names` must be a non-empty list of class names")
    return tuple(str(n) for n in raw)


def _voc_entries(raw, key: str, source: str) -> tuple[str, ...]:
    if raw in (None, ""):
        return ()
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list) or not all(isinstance(e, str) and e.strip() for e in entries):
        raise ValueError(f"{source}: `{key}` must be an entry such as VOC2007/trainval or train.txt, or a list "
                         f"of them; got {raw!r}")
    return tuple(e.strip() for e in entries)


def _voc_options(raw: Mapping, root: Path, source: str) -> VocOptions:
    train, val = _voc_entries(raw.get("train"), "train", source), _voc_entries(raw.get("val"), "val", source)
    test = _voc_entries(raw.get("test"), "test", source)
    fraction = raw.get("val_fraction")
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
            raise ValueError(f"{source}: `val_fraction` must be a number between 0 and 1 (e.g. 0.2), "
                             f"got {fraction!r}")
        if val:
            raise ValueError(f"{source}: give either `val` or `val_fraction`, not both")
    elif not train or not val:
        raise ValueError(f"{source}: format voc needs `train` and `val` (entries such as VOC2007/trainval or "
                         f"train.txt), or `val_fraction` to draw val from train")
    folders = {k: root / str(raw[k]) if raw.get(k) else None for k in ("images", "annotations")}
    return VocOptions(train, val, test, None if fraction is None else float(fraction), **folders)


def spec_from_dict(raw: Mapping, source: str = "<dict>") -> DataSpec:
    fmt = raw.get("format")
    if fmt not in FORMATS:
        raise ValueError(f"{source}: `format` must be one of {', '.join(FORMATS)}, got {fmt!r}")
    missing = [k for k in REQUIRED_KEYS[fmt] if raw.get(k) in (None, "")]
    if missing:
        raise ValueError(f"{source}: missing key(s) {', '.join(missing)} for format {fmt}")
    selection = ClassSelection(parse_classes(raw.get("classes"), source))
    if fmt == "voc":
        root = _resolve_root(str(raw["path"]), source)
        known = {"path", "format", "names", "classes", *VOC_KEYS}
        voc = _voc_options(raw, root, source)
        return DataSpec(root, fmt, train=root, val=root, test=root if voc.test else None,
                        names=_parse_names(raw.get("names"), source), source_file=source,
                        options={k: v for k, v in raw.items() if k not in known}, voc=voc, selection=selection)
    root = _resolve_root(str(raw["path"]), source) if raw.get("path") not in (None, "") and fmt != "synthetic" \
        else (Path(raw["path"]).expanduser() if raw.get("path") else None)
    split_keys = ("train", "val", "test", "train_annotations", "val_annotations", "test_annotations")
    if fmt == "coco" and bool(raw.get("test")) != bool(raw.get("test_annotations")):
        raise ValueError(f"{source}: format coco takes `test` and `test_annotations` together (the image folder and "
                         f"its json), got only {'test' if raw.get('test') else 'test_annotations'}")
    paths = {k: (root / str(raw[k]) if root is not None else Path(str(raw[k]))) if raw.get(k) else None
             for k in split_keys}
    known = set(split_keys) | {"path", "format", "names", "classes"}
    options = {k: v for k, v in raw.items() if k not in known}
    return DataSpec(root, fmt, names=_parse_names(raw.get("names"), source), source_file=source,
                    options=options, selection=selection, **paths)


def load_data_spec(path: str | Path, overrides: Mapping | None = None) -> DataSpec:
    """Read a spec file; `overrides` (e.g. {"path": "/data/coco"}) replace keys before validation."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data spec {path} not found (see data/README.md for the available specs)")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of keys (path, format, train, val, ...)")
    raw.update(dict(overrides or {}))
    return spec_from_dict(raw, str(path))


def read_class_names(path: str | Path) -> list[str]:
    """Class names from a .names file (one per line) or a data spec (its names, else its COCO json)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--names {path}: file not found (give a .names file or a data spec)")
    if path.suffix not in (".yaml", ".yml"):
        return [line.strip() for line in path.read_text().splitlines() if line.strip()]
    spec = load_data_spec(path)
    if spec.names:
        return list(spec.names)
    if spec.format == "coco":
        categories = json.loads(spec.annotations("val").read_text())["categories"]
        return [c["name"] for c in sorted(categories, key=lambda c: c["id"])]
    raise ValueError(f"--names {path}: the spec lists no `names` and has no COCO json to take them from")
