"""Darknet's own dataset description, `--data obj.data`: `key = value` lines read as Darknet reads them.

`read_data_cfg` (src/option_list.c): every space, tab, CR and LF of a line is removed (`strip`, so no path can
hold a space), empty lines and lines starting with `#` or `;` are skipped, a line is split at its first `=`, and
`option_find` returns the first line of a key. Lines that are no `key=value` and repeated keys are said in a
warning naming the line; Darknet skips them silently.
Keys (src/detector.c `train_detector`, `validate_detector_map`, `validate_detector`):
- `train`, `valid`: image list files (one image path per line; detect.data.formats.darknet_source). `valid` missing:
  Darknet's training evaluates the train list, and so does this project (with a warning).
- `names` (pjreddie's `get_metadata` also takes `labels`): one class name per line; blank lines at the end are
  ignored, a blank line among the names is an error naming it. `classes`, where given, must equal their count
  (Darknet trains with the cfg's `classes=`; train.py and detect.val compare the model with the names).
- `eval = coco`: Darknet's `detector valid` then writes COCO json (COCO's category ids `coco_ids[class]`,
  image ids from the file names); detect.val --save-json writes results.json with the same ids (80 classes).
- `backup`: the folder Darknet saves weights in; train.py writes its run folder instead (said in an info line).
Relative paths are Darknet's (the current directory), else relative to the obj.data's folder
(detect.data.formats.darknet_paths); one info line says which.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from detect.data.formats.darknet_paths import NamedPath, locate

log = logging.getLogger(__name__)

USED_KEYS = ("classes", "train", "valid", "names", "labels", "backup", "eval")
# keys Darknet reads elsewhere (classifier, `detector valid` output, difficult-box lists): accepted, not used
OTHER_KEYS = ("results", "map", "difficult", "test", "top", "leaves", "hierarchy", "tree", "hier")
DARKNET_WHITESPACE = re.compile(r"[ \t\r\n]")  # what src/utils.c strip() removes
YAML_KEY = re.compile(r"^[\w-]+:")  # `train:` starts a YAML spec


@dataclass(frozen=True)
class DataLine:
    value: str
    line: int  # 1-based; 0 for a value given as an override


@dataclass(frozen=True)
class DarknetOptions:
    """What an obj.data says beyond the spec's fields (DataSpec.darknet)."""

    data_file: Path
    train: NamedPath | None
    valid: NamedPath | None
    names_file: Path
    classes: int | None
    eval: str  # Darknet's default is voc
    backup: str | None

    def split_file(self, split: str) -> Path:
        """The image list of a split (val: `valid`), or an error naming the line and the places tried."""
        if split == "test":
            raise ValueError(f"{self.data_file}: a Darknet .data file has no test split (Darknet reads train= and "
                             f"valid=); evaluate its valid list with --split val, or write a data/*.yaml spec "
                             f"with a `test:` entry")
        key = "valid" if split == "val" else "train"
        entry = self.valid if split == "val" else self.train
        if entry is None:
            raise ValueError(f"{self.data_file}: no `{key} = ` line; add one naming the image list file of the "
                             f"{split} split (one image path per line)")
        return entry.require(f"{key} list")


def is_darknet_data(path: Path) -> bool:
    """A `.data` file, or a file (not .yaml) with a `train=`, `valid=` or `names=` line (spaces aside) and no
    line of YAML's `key:` form."""
    path = Path(path)
    if path.suffix == ".data":
        return True
    if path.suffix in (".yaml", ".yml") or not path.is_file():
        return False
    try:
        lines = [DARKNET_WHITESPACE.sub("", ln) for ln in path.read_text(encoding="utf-8-sig").splitlines()]
    except (OSError, UnicodeDecodeError):
        return False
    lines = [ln for ln in lines if ln and ln[0] not in "#;"]
    return any(ln.startswith(("train=", "valid=", "names=")) for ln in lines) and \
        not any(YAML_KEY.match(ln) for ln in lines)


def read_data_lines(path: Path) -> dict[str, DataLine]:
    """key -> (value, line) of an obj.data, as `read_data_cfg` and `option_find` read it."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file ({e}); a Darknet .data file holds `key = value` lines") from None
    options: dict[str, DataLine] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = DARKNET_WHITESPACE.sub("", raw)
        if not line or line[0] in "#;":
            continue
        key, eq, value = line.partition("=")
        if not eq or not value or not key:
            log.warning(f"{path}:{number}: {raw.strip()!r} is not `key = value` with a value; skipped (as Darknet "
                        f"skips it)")
        elif key in options:
            log.warning(f"{path}:{number}: `{key}` is given again; Darknet reads the first, line "
                        f"{options[key].line}, and so does this reader: delete one of them")
        else:
            options[key] = DataLine(value, number)
    unknown = [k for k in options if k not in USED_KEYS + OTHER_KEYS]
    for key in unknown:
        log.warning(f"{path}:{options[key].line}: `{key}` is no key Darknet's detector reads ({', '.join(USED_KEYS)}"
                    f"); ignored (a typo?)")
    return options


def read_names(path: Path) -> tuple[str, ...]:
    """The class names of a .names file: one per line, blank lines at its end ignored."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a text file of class names ({e})") from None
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        raise ValueError(f"{path}: no class name in the file; write one class name per line, class 0 first")
    blank = [n for n, text in enumerate(lines, 1) if not text.strip()]
    if blank:
        raise ValueError(f"{path}:{blank[0]}: line {blank[0]} is blank, between class names: Darknet would read it as "
                         f"class {blank[0] - 1} with no name; write that class's name there, or delete the line")
    return tuple(text.strip() for text in lines)


def check_classes(entry: DataLine | None, names: tuple[str, ...], names_file: Path, data_file: Path) -> int | None:
    """`classes = N`, which must equal the number of names."""
    if entry is None:
        return None
    where = f"{data_file}:{entry.line}" if entry.line else f"{data_file} (override)"
    try:
        classes = int(entry.value)
    except ValueError:
        raise ValueError(f"{where}: classes = {entry.value!r} is not a whole number; write classes = {len(names)} "
                         f"(the number of names in {names_file})") from None
    if classes != len(names):
        raise ValueError(f"{where}: classes = {classes} but {names_file} lists {len(names)} class name(s); if the "
                         f"names file is complete set classes = {len(names)}, else add the missing names to it")
    return classes


def _names_entry(options: Mapping[str, DataLine], data_file: Path) -> DataLine:
    entry = options.get("names") or options.get("labels")
    if entry is None:
        raise ValueError(f"{data_file}: no `names = ` line; add names = path/to/obj.names (a file with one class "
                         f"name per line)")
    return entry


def read_darknet_names(data_file: Path) -> tuple[str, ...]:
    """The class names an obj.data points at (detect.predict --data / --names, export --names)."""
    entry = _names_entry(read_data_lines(data_file), data_file)
    return read_names(locate(entry.value, data_file, entry.line).require("names file"))


def darknet_spec_fields(data_file: str | Path, overrides: Mapping | None = None) -> dict:
    """The DataSpec fields of an obj.data (detect.data.formats.spec.load_data_spec makes the spec: this module sits below
    it); `overrides` replace keys (values as written in the file)."""
    data_file = Path(data_file)
    options = read_data_lines(data_file)
    options.update({str(k): DataLine(str(v), 0) for k, v in (overrides or {}).items()})
    names_entry = _names_entry(options, data_file)
    names_at = locate(names_entry.value, data_file, names_entry.line)
    names = read_names(names_at.require("names file"))
    classes = check_classes(options.get("classes"), names, names_at.found, data_file)
    lists = {key: locate(options[key].value, data_file, options[key].line) for key in ("train", "valid")
             if key in options}
    if not lists:
        raise ValueError(f"{data_file}: neither `train = ` nor `valid = `; add the image list files (one image "
                         f"path per line) of the splits")
    if "valid" not in lists:
        log.warning(f"{data_file}: no `valid = ` line: the train list is evaluated, as Darknet's training does; add "
                    f"valid = path/to/valid.txt to evaluate images the model does not train on")
    train, valid = lists.get("train"), lists.get("valid", lists.get("train"))
    eval_mode = options["eval"].value if "eval" in options else "voc"
    darknet = DarknetOptions(data_file, train, valid, names_at.found, classes, eval_mode,
                             options["backup"].value if "backup" in options else None)
    log.info(describe(darknet, names, [names_at, *lists.values()]))
    _log_eval_and_backup(darknet, len(names))
    return {"path": data_file.absolute().parent, "format": "darknet", "train": _split_path(train),
            "val": _split_path(valid), "names": names, "source_file": str(data_file), "darknet": darknet}


def _split_path(entry: NamedPath | None) -> Path | None:
    """The list file found, else where Darknet would open it (DarknetOptions.split_file says what is wrong)."""
    if entry is None:
        return None
    return entry.found or entry.tried[0]


def describe(darknet: DarknetOptions, names: tuple[str, ...], paths: list[NamedPath]) -> str:
    """The one info line of an obj.data: its files and the folder its relative paths were read from."""
    def shown(entry: NamedPath | None) -> str:
        return "-" if entry is None else str(entry.found or entry.value)

    files = (f"train {shown(darknet.train)}, valid {shown(darknet.valid)}, names {darknet.names_file} "
             f"({len(names)} class{'es' if len(names) != 1 else ''})")
    by_file = [p.value for p in paths if p.base in ("file", "data")]
    relative = [p for p in paths if not Path(p.value).is_absolute()]
    if by_file:
        base = (f"relative paths read from {darknet.data_file.absolute().parent} (the obj.data's folder): "
                f"{', '.join(dict.fromkeys(by_file))} are not under the current directory {Path.cwd()}, where "
                f"Darknet opens them")
    elif relative:
        base = f"relative paths read from the current directory {Path.cwd()} (Darknet's rule)"
    else:
        base = "absolute paths"
    return f"{darknet.data_file}: Darknet .data: {files}; {base}"


def _log_eval_and_backup(darknet: DarknetOptions, num_classes: int) -> None:
    if darknet.eval == "coco":
        ids = ("COCO's category ids and the image ids in the file names, as Darknet's coco_results.json"
               if num_classes == 80 else
               f"category ids 0..{num_classes - 1} (COCO's own ids need its 80 classes)")
        log.info(f"{darknet.data_file}: eval = coco: detect.val --save-json writes results.json with {ids}")
    elif darknet.eval != "voc":
        log.info(f"{darknet.data_file}: eval = {darknet.eval} selects the output of Darknet's `detector valid`; "
                 f"not used here (detect.val writes metrics.json, and results.json with --save-json)")
    if darknet.backup is not None:
        log.info(f"{darknet.data_file}: backup = {darknet.backup} is where Darknet saves weights; train.py writes "
                 f"them to its run folder instead (runs/train/<name>: --project, --name)")


__all__ = ["DarknetOptions", "darknet_spec_fields", "is_darknet_data", "read_darknet_names", "read_names"]
