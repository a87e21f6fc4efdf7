"""Dataset spec files (`data/*.yaml`): where a dataset lives and in which format.

Keys: `path` (root; relative split paths resolve under it), `format` (coco | yolo | voc | synthetic), `train`
and `val` (an image folder or a .txt list of image paths), `train_annotations` / `val_annotations` (COCO json,
format coco), `names` (required for yolo; optional for coco, where the json has them). Every format takes an
optional `test` split the same way (`test_annotations` for coco; `test_images` for synthetic), evaluated by
`detect.val --split test`. A spec may give `val` alone: detect.val evaluates it, and training says that `train`
is missing.
`classes` (a list of class names or indices) trains and evaluates on those classes only
(detect.data.formats.class_selection). A relative `path` resolves against the spec file's folder, else the current
directory, else the repository root (so `../shared/...` works from each).
Files as Roboflow and ultralytics write them (detect.data.formats.foreign_yaml): without `format` it is told from the keys
and files; without `path` the spec file's folder is the root; `train: ../train/images` that does not exist under
the root is read as `train/images`; `nc`, where given, must equal the number of `names`.
`background_only: true` (or a list of splits) lets a yolo split have no label file at all; without it such a
split is refused (detect.data.formats.label_layouts), since it would train as all background.
A Darknet obj.data (`key = value` lines) is read by detect.data.formats.darknet_data as format `darknet`; a folder, as the
export it holds (detect.data.formats.export_folders).
Format `synthetic` takes `seed`, `train_images`, `val_images`, `test_images` (default 0: no test split) and an
optional `path` (the generation folder).

Format `voc` (Pascal VOC xml, detect.data.formats.voc): `train` / `val` are one entry or a list of entries, each either
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
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from detect.data.formats.class_selection import ClassSelection, parse_classes
from detect.data.formats.foreign_yaml import (
    check_class_count,
    check_split_value,
    infer_format,
    split_path,
)
from detect.data.formats.spec_voc import VOC_KEYS, VocOptions, voc_options
from detect.runtime.assets import find_user_file, missing_file_hint

if TYPE_CHECKING:
    from detect.data.formats.darknet_data import DarknetOptions

log = logging.getLogger(__name__)

FORMATS = ("coco", "yolo", "voc", "synthetic")
# and `train` or `val` for coco and yolo: a spec with only a val split is evaluated by detect.val; training on it
# stops at DataSpec.images("train"), which says that `train` is missing
REQUIRED_KEYS = {
    "coco": ("path",),  # each split given takes its image folder and its json together
    "yolo": ("path", "names"),
    "voc": ("path",),
    "synthetic": (),
}
SPLITS = ("train", "val", "test")


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
    background_only: tuple[str, ...] = ()  # yolo splits allowed to have no label file at all
    darknet: DarknetOptions | None = None  # format darknet: what the obj.data says (detect.data.formats.darknet_data)

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
        if self.darknet is not None and not suffix:  # the obj.data's line and both places tried
            return self.darknet.split_file(split)
        key = split + suffix
        value = getattr(self, key)
        if value is None and split == "train" and not suffix:
            raise ValueError(f"{self.source_file}: no `train` split (format {self.format}): training needs the "
                             f"images to train on; add `train:` to {self.source_file} (detect.val evaluates a "
                             f"spec with only `val:` as it is)")
        if value is None:
            hint = " (an optional split: add it to the spec to evaluate it)" if split == "test" else ""
            raise ValueError(f"{self.source_file}: key {key!r} is missing (format {self.format}){hint}")
        if not value.exists():
            under = f" (`{key}` is relative to `path`, {self.path})" if self.path is not None else ""
            raise FileNotFoundError(f"{self.source_file}: {key} = {value} does not exist; correct `{key}` or "
                                    f"`path` in {self.source_file}{under}")
        return value


def default_cache_dir() -> Path:
    """$DETECT_CACHE, else the user's cache folder ($XDG_CACHE_HOME or ~/.cache) /detect: label caches and generated
    data belong to the user, wherever the tools run from (never inside the source tree or site-packages)."""
    if os.environ.get("DETECT_CACHE"):
        return Path(os.environ["DETECT_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "detect"


def _resolve_root(value: str, source: str, base: Path | None = None) -> Path:
    """`path` as written: absolute, or relative to the spec file's folder (`base`, as the user sees it: `..` is
    taken from the folder's own path, not through a link to it) or the current directory, the first that exists."""
    p = Path(value).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = ([Path(os.path.normpath(base / p))] if base is not None else []) + [Path.cwd() / p]
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


def _dataset_root(raw: Mapping, source: str, base: Path | None) -> Path | None:
    """The dataset root: `path` resolved, else the spec file's folder (None for a spec that is no file)."""
    if raw.get("path") not in (None, ""):
        return _resolve_root(str(raw["path"]), source, base)
    return base.resolve() if base is not None else None


def _background_splits(raw, source: str) -> tuple[str, ...]:
    """`background_only`: true (every split) or the splits whose images may all be background."""
    if raw in (None, False):
        return ()
    if raw is True:
        return SPLITS
    entries = [raw] if isinstance(raw, str) else raw
    if not isinstance(entries, list) or not entries or not all(e in SPLITS for e in entries):
        raise ValueError(f"{source}: `background_only` must be true or a list of the splits ({', '.join(SPLITS)}) "
                         f"that may have no label file at all, got {raw!r}")
    return tuple(entries)


SPLIT_KEYS = ("train", "val", "test", "train_annotations", "val_annotations", "test_annotations")
COMMON_KEYS = {"path", "format", "names", "classes", "nc", "background_only"}


def spec_from_dict(raw: Mapping, source: str = "<dict>", base: Path | None = None) -> DataSpec:
    """A spec from its keys. `base` is the folder of the spec file (None for a spec that is no file): a relative
    `path` is looked up there first, and without `path` that folder is the dataset root."""
    fmt, root = raw.get("format"), None
    if fmt in (None, ""):
        root = _dataset_root(raw, source, base)
        fmt = infer_format(raw, root, source)
    if fmt not in FORMATS:
        raise ValueError(f"{source}: `format` must be one of {', '.join(FORMATS)}, got {fmt!r}")
    missing = [k for k in REQUIRED_KEYS[fmt] if raw.get(k) in (None, "") and not (k == "path" and base is not None)]
    if missing:
        raise ValueError(f"{source}: missing key(s) {', '.join(missing)} for format {fmt}")
    names = _parse_names(raw.get("names"), source)
    check_class_count(raw, names, source)
    common = {"names": names, "source_file": source,
              "selection": ClassSelection(parse_classes(raw.get("classes"), source)),
              "background_only": _background_splits(raw.get("background_only"), source)}
    if fmt == "synthetic":  # `path`, when given, is the generation folder, relative to the current directory
        root = Path(raw["path"]).expanduser() if raw.get("path") else None
    elif root is None:
        root = _dataset_root(raw, source, base)
    if fmt == "voc":
        voc = voc_options(raw, root, source)
        options = {k: v for k, v in raw.items() if k not in COMMON_KEYS | set(VOC_KEYS)}
        drawn = voc.val_fraction is not None  # val drawn from train, or both from the flat folders
        return DataSpec(root, fmt, train=root if voc.train or drawn else None, val=root if voc.val or drawn else None,
                        test=root if voc.test else None, options=options, voc=voc, **common)
    return DataSpec(root, fmt, options={k: v for k, v in raw.items() if k not in COMMON_KEYS | set(SPLIT_KEYS)},
                    **_split_paths(raw, fmt, root, source), **common)


def _split_paths(raw: Mapping, fmt: str, root: Path | None, source: str) -> dict[str, Path | None]:
    """The split keys of a coco, yolo or synthetic spec as paths under the root."""
    if fmt in ("coco", "yolo") and not raw.get("train") and not raw.get("val"):
        raise ValueError(f"{source}: missing key(s) train, val for format {fmt}: give `val` (what detect.val "
                         f"evaluates), and `train` to train")
    for split in SPLITS if fmt == "coco" else ():
        if bool(raw.get(split)) != bool(raw.get(f"{split}_annotations")):
            given, missing = (split, f"{split}_annotations") if raw.get(split) else (f"{split}_annotations", split)
            raise ValueError(f"{source}: format coco takes `{split}` and `{split}_annotations` together (the image "
                             f"folder and its json), got only `{given}`; add `{missing}`")
    for key in SPLIT_KEYS:
        check_split_value(raw, key, source)
    return {k: (split_path(root, str(raw[k]), k, source) if root is not None else Path(str(raw[k])))
            if raw.get(k) else None for k in SPLIT_KEYS}


def load_data_spec(path: str | Path, overrides: Mapping | None = None) -> DataSpec:
    """Read a spec file; `overrides` (e.g. {"path": "/data/coco"}) replace keys before validation."""
    path = find_user_file(path, "data")  # a spec shipped with the package, named by its file name
    if path.is_dir():  # an annotation tool's export as it was unzipped (detect.data.formats.export_folders)
        from detect.data.formats.export_folders import read_export_folder

        found = read_export_folder(path)
        if isinstance(found, Path):
            return load_data_spec(found, overrides)
        raw, what = found
        log.info(f"--data {path}: read as {what}")
        return spec_from_dict({**raw, **dict(overrides or {})}, str(path), base=path.absolute())
    if not path.is_file():
        raise FileNotFoundError(f"data spec {path} not found; {missing_file_hint('data', ('.yaml',))} "
                                f"(data/README.md says what each holds)")
    from detect.data.formats.darknet_data import darknet_spec_fields, is_darknet_data
    if is_darknet_data(path):
        return DataSpec(**darknet_spec_fields(path, overrides))
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping of keys (path, format, train, val, ...)")
    raw.update(dict(overrides or {}))
    return spec_from_dict(raw, str(path), base=Path(os.path.abspath(path)).parent)


def read_class_names(path: str | Path) -> list[str]:
    """Class names from a .names file (one per line), a Darknet obj.data or a data spec (names, else COCO json)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--names {path}: file not found (give a .names file or a data spec)")
    from detect.data.formats.darknet_data import is_darknet_data, read_darknet_names, read_names
    if is_darknet_data(path):
        return list(read_darknet_names(path))
    if path.suffix not in (".yaml", ".yml"):  # a .names file, read as training reads it (a BOM, a blank line)
        return list(read_names(path))
    spec = load_data_spec(path)
    if spec.names:
        return list(spec.names)
    if spec.format == "coco":  # the classes training makes of the json (a Roboflow superclass is none)
        from detect.data.formats.coco_exports import class_categories

        ann_file = spec.annotations("val" if spec.has_split("val") else "train")
        data = json.loads(ann_file.read_text())
        classes, _ = class_categories(data["categories"], data.get("annotations", []), ann_file, None)
        return [c["name"] for c in classes]
    raise ValueError(f"--names {path}: the spec lists no `names` and has no COCO json to take them from")
