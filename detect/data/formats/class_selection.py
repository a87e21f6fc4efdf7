"""Training or evaluating on some of a dataset's classes: `classes:` in a data spec, `--single-cls`.

A selection gives the dataset's classes new contiguous indices (the order `classes:` lists them; -1 for a class
not chosen). Boxes of classes not chosen leave the records and are counted in the bad-input report as
`class_not_chosen`, information rather than an error; their images stay, as background where nothing chosen is
left. `--single-cls` then makes every chosen class one class. The label cache holds the whole dataset: a
selection is applied to it on every open, so changing one never rebuilds the cache.

Evaluation scores only the chosen classes: the ground truth of a COCO json keeps its own annotations (ids, areas,
crowd regions) of the chosen categories, their category ids mapped as the classes are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from detect.data.records.record_table import RecordTable
from detect.data.records.records import BadInputReport, first_few

if TYPE_CHECKING:  # the label cache imports torch (ranks); data specs, which import this module, must not
    from detect.data.records.cache import SplitLabels

log = logging.getLogger(__name__)

SINGLE_CLASS_NAME = "object"  # the one class of --single-cls when more than one class is merged
SINGLE_CLASS_ID = 0  # its category id in results.json and the ground truth


@dataclass(frozen=True)
class ClassSelection:
    classes: tuple[str | int, ...] | None = None  # names or indices as the spec lists them; None: every class
    single_cls: bool = False

    @property
    def active(self) -> bool:
        return self.classes is not None or self.single_cls


@dataclass(frozen=True)
class ClassMap:
    """Old class index -> new one (-1: not chosen), the new names and category ids, and old -> new category id."""

    index: np.ndarray  # int64 [old nc]
    names: tuple[str, ...]
    category_ids: list[int]
    category_map: dict[int, int]  # original category id -> new category id, for the chosen ones only


def selection_advice(names: Sequence[str], wanted: int, spec_file: str) -> str:
    """What to write when a dataset has more classes than wanted (a model's, a spec's `names`): `classes:` in the
    spec chooses them, e.g. its first `wanted` names. Empty when there are not more."""
    if wanted < 1 or len(names) <= wanted:
        return ""
    example = ", ".join(repr(n) if "," in n or ":" in n else n for n in names[:wanted])
    return (f"to use {wanted} of its {len(names)} classes, list them as `classes:` in {spec_file} (e.g. "
            f"`classes: [{example}]`; detect.data.formats.class_selection)")


def parse_classes(raw, source: str) -> tuple[str | int, ...] | None:
    """The spec's `classes:` value: a non-empty list of class names or indices (None when absent)."""
    if raw is None:
        return None
    entries = [raw] if isinstance(raw, (str, int)) and not isinstance(raw, bool) else raw
    if not isinstance(entries, (list, tuple)) or not entries or \
            not all(isinstance(e, (str, int)) and not isinstance(e, bool) for e in entries):
        raise ValueError(f"{source}: `classes` must be a list of class names or indices (e.g. [person, car]), "
                         f"got {raw!r}")
    return tuple(e.strip() if isinstance(e, str) else e for e in entries)


def class_map(names: Sequence[str], category_ids: Sequence[int], selection: ClassSelection,
              source: str) -> ClassMap:
    """Resolve a selection against the dataset's classes; an unknown or repeated class is refused by name."""
    chosen = list(range(len(names))) if selection.classes is None else \
        [_resolve(entry, names, source) for entry in selection.classes]
    repeated = sorted({names[i] for i in chosen if chosen.count(i) > 1})
    if repeated:
        raise ValueError(f"{source}: `classes` lists {', '.join(repeated)} more than once")
    index = np.full(len(names), -1, dtype=np.int64)
    if selection.single_cls:
        index[chosen] = 0
        new_names = (names[chosen[0]],) if len(chosen) == 1 else (SINGLE_CLASS_NAME,)
        new_ids = [SINGLE_CLASS_ID]
    else:
        index[chosen] = np.arange(len(chosen))
        new_names = tuple(names[i] for i in chosen)
        new_ids = [int(category_ids[i]) for i in chosen]
    category_map = {int(category_ids[i]): new_ids[int(index[i])] for i in chosen}
    return ClassMap(index, new_names, new_ids, category_map)


def _resolve(entry: str | int, names: Sequence[str], source: str) -> int:
    if isinstance(entry, int):
        if 0 <= entry < len(names):
            return entry
        raise ValueError(f"{source}: `classes` entry {entry} is not a class index of this dataset (0..{len(names) - 1})")
    if entry in names:
        return list(names).index(entry)
    raise ValueError(f"{source}: `classes` entry {entry!r} is not a class of this dataset; its classes are "
                     f"{first_few(names, 12)}")


def select_classes(labels: SplitLabels, selection: ClassSelection, source: str,
                   what: str) -> tuple[SplitLabels, dict[int, int]]:
    """The split's labels with the selection applied (the cached labels are left as they are), and the map of
    original to new category ids."""
    from detect.data.records.cache import SplitLabels

    mapping = class_map(labels.names, labels.category_ids, selection, source)
    table = labels.records if isinstance(labels.records, RecordTable) else RecordTable.from_records(labels.records)
    new_classes = mapping.index[table.classes]
    keep = new_classes >= 0
    report = BadInputReport(list(labels.report.entries), labels.report.counts.copy())
    dropped = int((~keep).sum())
    if dropped:
        left_out = sorted({labels.names[c] for c in np.unique(table.classes[~keep]).tolist()})
        report.add("class_not_chosen", source, f"{dropped} box(es) of {len(left_out)} class(es) not chosen: "
                   f"{first_few(left_out, 8)}", count=dropped)
    owner = np.repeat(np.arange(len(table)), np.diff(table.box_offsets))  # the image of every box
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owner[keep], minlength=len(table)))]).astype(np.int64)
    records = RecordTable(table.paths, table.path_offsets, table.sizes, table.image_ids, offsets, table.boxes[keep],
                          new_classes[keep], table.difficult[keep])
    annotation_index = labels.annotation_index[keep] if labels.annotation_index is not None else None
    chosen = [labels.names[i] for i in np.argsort(mapping.index) if mapping.index[i] >= 0] \
        if not selection.single_cls else [n for n, k in zip(labels.names, mapping.index) if k >= 0]
    merged = f" as one class {mapping.names[0]!r}" if selection.single_cls else ""
    log.info("%s: classes %s%s (%d of %d): %d of %d boxes kept, %d of other classes left out (class_not_chosen)",
             what, first_few(chosen, 8), merged, len(chosen), len(labels.names), int(keep.sum()), len(keep), dropped)
    return SplitLabels(records, mapping.names, mapping.category_ids, list(labels.dropped_image_ids), report,
                       annotation_index, labels.crowd_index), mapping.category_map


__all__ = ["ClassMap", "ClassSelection", "class_map", "parse_classes", "select_classes"]
