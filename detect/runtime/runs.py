"""Run folders: `<project>/<name>`, or `<name>2`, `<name>3`, ... so an earlier run is never overwritten."""

from __future__ import annotations

from pathlib import Path


def next_run_dir(project, name: str, exist_ok: bool = False) -> Path:
    """project/name, or the first free project/name2, name3, ... (project/name itself with `exist_ok`)."""
    base = Path(project) / name
    path, n = base, 2
    while path.exists() and not exist_ok:
        path, n = base.with_name(f"{name}{n}"), n + 1
    return path
