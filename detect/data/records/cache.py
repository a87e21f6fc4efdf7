"""The label cache: one file per split with image sizes and validated labels, built on rank 0 first, then by the
first process of each other node where its cache folder lacks it (`dist.node_leaders_first`).

The file is keyed by a content hash (file list, sizes, modification times, label contents, format version);
a stale, corrupt or foreign cache is rebuilt with one warning line. Writes are atomic (detect.runtime.files), so a
killed build never leaves a half-written cache behind. Storage is a plain `.npz` (no pickle): flat arrays plus
one JSON string for names, category ids and the bad-input report.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from detect.data.records.record_table import RecordTable
from detect.data.records.records import BadInputReport, ImageRecord
from detect.runtime.dist import node_leaders_first
from detect.runtime.files import atomic_write

log = logging.getLogger(__name__)

# 2: per-box `difficult` flags; 3: paths as one UTF-8 buffer (RecordTable); 4: COCO json: the annotations evaluation
# scores (`annotation_index`, `crowd_index`), the report's unknown_class / unknown_image entries
# 5: YOLO label lines with a 6th value (a confidence) are boxes (counted as `confidence_column`), not errors
# 6: COCO json: an image listed twice is read once (`duplicate_image`), a superclass category is no class
# 7: YOLO label files of detect.predict --track --save-conf (class cx cy w h conf id) are boxes, not triangles
# 8: images sharing one label file are skipped (`shared_label`); boxes up to 10% past the image edge clipped
CACHE_VERSION = 8


@dataclass
class SplitLabels:
    records: RecordTable | list[ImageRecord]  # a RecordTable once saved or loaded
    names: tuple[str, ...]
    category_ids: list[int]  # contiguous class index -> original category id
    dropped_image_ids: list[int]  # images of the annotation file that could not be used
    report: BadInputReport
    # COCO json only: the positions in its `annotations` list of every kept box (int64, the records' box order)
    # and of every kept crowd region; the ground truth evaluation scores is made of these (detect.data.formats.sources)
    annotation_index: np.ndarray | None = None
    crowd_index: np.ndarray | None = None


class Fingerprint:
    """Incremental content hash of a split (what the cache key is made of)."""

    def __init__(self, *parts):
        self._h = hashlib.sha256(f"detect-labels-v{CACHE_VERSION}".encode())
        for p in parts:
            self.add(p)

    def add(self, part) -> Fingerprint:
        self._h.update(part if isinstance(part, bytes) else str(part).encode())
        self._h.update(b"\0")
        return self

    def add_file_stat(self, path: Path) -> Fingerprint:
        try:
            st = path.stat()
            return self.add(f"{path}|{st.st_size}|{st.st_mtime_ns}")
        except OSError:
            return self.add(f"{path}|absent")

    def hexdigest(self) -> str:
        return self._h.hexdigest()


def cache_file_for(cache_dir: Path, label: str, split: str, location: str) -> Path:
    """Where the cache of a split lives: one file per (dataset location, split)."""
    tag = hashlib.sha1(location.encode()).hexdigest()[:12]
    return Path(cache_dir) / "labels" / f"{label}-{split}-{tag}.npz"


def save_labels(path: Path, key: str, labels: SplitLabels) -> None:
    table = labels.records if isinstance(labels.records, RecordTable) else RecordTable.from_records(labels.records)
    meta = {"version": CACHE_VERSION, "key": key, "names": list(labels.names),
            "category_ids": list(labels.category_ids), "dropped_image_ids": labels.dropped_image_ids,
            "report": labels.report.to_json()}
    arrays = {name: getattr(table, name) for name in TABLE_ARRAYS}
    arrays.update({name: getattr(labels, name) for name in INDEX_ARRAYS if getattr(labels, name) is not None})
    atomic_write(path, lambda f: np.savez(f, meta=np.array(json.dumps(meta)), **arrays))


TABLE_ARRAYS = ("paths", "path_offsets", "sizes", "image_ids", "box_offsets", "boxes", "classes", "difficult")
INDEX_ARRAYS = ("annotation_index", "crowd_index")  # SplitLabels fields, stored when not None


def load_labels(path: Path, key: str) -> tuple[SplitLabels | None, str]:
    """(labels, "") when the cache is valid for `key`; else (None, why it cannot be used)."""
    if not path.exists():
        return None, "absent"
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("version") != CACHE_VERSION:
                return None, f"format version {meta.get('version')} != {CACHE_VERSION}"
            if meta.get("key") != key:
                return None, "stale (files or labels changed)"
            table = RecordTable(*(z[name] for name in TABLE_ARRAYS))
            index = {name: z[name] for name in INDEX_ARRAYS if name in z.files}
    except Exception as e:  # any damage means: rebuild
        return None, f"unreadable ({type(e).__name__}: {e})"
    return SplitLabels(table, tuple(meta["names"]), list(meta["category_ids"]), meta["dropped_image_ids"],
                       BadInputReport.from_json(meta["report"]), **index), ""


def log_summary(labels: SplitLabels, what: str, log_file: Path, built: bool) -> None:
    n_boxes = len(labels.records.classes) if isinstance(labels.records, RecordTable) else sum(
        len(r.classes) for r in labels.records)
    n_crowd = len(labels.crowd_index) if labels.crowd_index is not None else 0
    line = labels.report.summary(what, len(labels.records), n_boxes, n_crowd)
    if labels.report.entries:
        line += f" (offending files listed in {log_file})"
    if built and labels.report.needs_attention():
        log.warning(line)
    else:
        log.info(line)


def cached_labels(cache_file: Path, key_fn: Callable[[], str], build_fn: Callable[[], SplitLabels],
                  what: str) -> SplitLabels:
    """Load the split's labels from `cache_file`, or build and save them; rank 0 first, then each node's first
    process (which finds the file on a shared folder, or builds its node's copy), the others read."""
    with node_leaders_first():
        key = key_fn()
        labels, why = load_labels(cache_file, key)
        if labels is None:
            if why != "absent":
                log.warning(f"label cache {cache_file} is {why}: rebuilding it")
            labels = build_fn()
            labels.records = RecordTable.from_records(labels.records)
            save_labels(cache_file, key, labels)
            labels.report.write_log(issues_log_for(cache_file))
        log_summary(labels, what, issues_log_for(cache_file), built=why != "")
    if not labels.records:
        raise ValueError(f"{what}: no usable image is left after validation; see "
                         f"{issues_log_for(cache_file)} for what was wrong with each file")
    return labels


def issues_log_for(cache_file: Path) -> Path:
    return cache_file.with_suffix(".issues.log")
