"""The audit's files: issues.csv (one row per suspected error, most likely first), issues.json (the same rows with
the figures each score came from), and the summary printed at the end."""

from __future__ import annotations

import csv
import io
import json
import os
from collections import Counter
from pathlib import Path

from detect.audit.label_lines import LabelFiles
from detect.audit.scoring import KINDS, Issue
from detect.runtime.files import atomic_write_text

COLUMNS = ("rank", "image", "kind", "class", "x1", "y1", "x2", "y2", "score", "suggested_class", "suggested_box",
           "label_file", "line")


def listed_name(path: str, root: Path | None) -> str:
    """An image's file name as its spec lists it: relative to the split's image folder (or list file's folder)."""
    if root is not None:
        try:
            relative = os.path.relpath(path, root)
        except ValueError:
            return path
        if not relative.startswith(".."):
            return relative
    return path


def split_root(source) -> Path | None:
    try:
        images = source.spec.images(source.split)
    except (ValueError, FileNotFoundError):
        return None
    return images if images.is_dir() else images.parent


def issue_rows(issues: list[Issue], source) -> list[dict]:
    """The rows of issues.csv / issues.json, in rank order."""
    root, files = split_root(source), LabelFiles(source)
    names = source.names
    rows = []
    for rank, issue in enumerate(issues, 1):
        record = source.records[issue.image]
        label_file = files.file(issue.image)
        line = files.line(issue.image, issue.box) if issue.label is not None else None
        rows.append({
            "rank": rank, "image": listed_name(record.path, root), "kind": issue.kind, "class": names[issue.cls],
            **dict(zip(("x1", "y1", "x2", "y2"), issue.box)), "score": issue.score,
            "suggested_class": names[issue.suggested_class] if issue.suggested_class is not None else "",
            "suggested_box": " ".join(f"{v:g}" for v in issue.suggested_box) if issue.suggested_box else "",
            "label_file": str(label_file) if label_file is not None else "", "line": line if line else "",
            "evidence": issue.evidence})
    return rows


def write_issues(rows: list[dict], run_dir: Path) -> tuple[Path, Path]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(run_dir / "issues.csv", buffer.getvalue())
    atomic_write_text(run_dir / "issues.json", json.dumps(rows, indent=1))
    return run_dir / "issues.csv", run_dir / "issues.json"


def summary(rows: list[dict], num_images: int, num_labels: int, top: int = 10) -> str:
    counts = Counter(r["kind"] for r in rows)
    lines = [f"{len(rows)} suspected label errors in {num_images} images ({num_labels} labels): " +
             ", ".join(f"{counts[k]} {k}" for k in KINDS)]
    width = max((len(r["image"]) for r in rows[:top]), default=5)
    for r in rows[:top]:
        where = f"  {r['label_file']}:{r['line']}" if r["line"] else ""
        suggestion = f" -> {r['suggested_class']}" if r["kind"] == "class" else ""
        lines.append(f"  {r['rank']:>4d}  {r['score']:.2f}  {r['image']:{width}s}  {r['kind']:8s} "
                     f"{r['class']}{suggestion} [{r['x1']:g}, {r['y1']:g}, {r['x2']:g}, {r['y2']:g}]{where}")
    return "\n".join(lines)
