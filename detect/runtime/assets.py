"""The files shipped inside the package: model cfgs, class-name lists and hyperparameter / search-space yamls
(`detect/assets/cfg/`), and dataset specs (`detect/assets/data/`). They are found as package resources, so the
tools work the same from a clone, an editable install or a wheel installed anywhere; a clone's top-level `cfg/`
and `data/` are links to these folders.

A user names a shipped file by its file name (`--cfg yolov3-tiny.cfg`) or as a clone spells it
(`--cfg cfg/yolov3-tiny.cfg`); a file of that name in the current folder comes first.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

KINDS = ("cfg", "data")  # the asset folders: cfg/ (cfg, names, hyp and space yamls), data/ (dataset specs)


def asset_dir(kind: str) -> Path:
    """The folder of shipped files of one kind ("cfg" or "data")."""
    if kind not in KINDS:
        raise ValueError(f"asset kind must be one of {KINDS}, got {kind!r}")
    return Path(str(files("detect") / "assets" / kind))  # a plain folder: installs are never zipped (not zip-safe)


def asset(kind: str, name: str) -> Path:
    """The shipped file `name` of `kind` (it exists: a missing one is a broken install, said by the caller)."""
    return asset_dir(kind) / name


def shipped_names(kind: str, suffixes: tuple[str, ...]) -> list[str]:
    """The file names of `kind` with one of `suffixes`, sorted."""
    return sorted(p.name for p in asset_dir(kind).iterdir() if p.suffix in suffixes)


def find_user_file(value: str | Path, kind: str) -> Path:
    """The file a user means by `value`: itself when it exists; else, for a bare file name or `<kind>/<name>`,
    the shipped file of that name when there is one; else `value` unchanged (the caller says it is missing)."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    parts = path.parts
    if len(parts) == 1 or (len(parts) == 2 and parts[0] == kind):
        shipped = asset(kind, parts[-1])
        if shipped.is_file():
            return shipped
    return path


def missing_file_hint(kind: str, suffixes: tuple[str, ...]) -> str:
    """What to name instead of a missing file: the shipped ones, by file name."""
    return f"shipped {kind} files (name one by its file name): {', '.join(shipped_names(kind, suffixes))}"


def package_dir() -> Path:
    """The installed `detect` package's folder (inside a clone's checkout when installed editable)."""
    return Path(str(files("detect")))
