"""Class identity: whether two lists of class names name the same classes, and which index of one is which of the
other. The one owner of that question: fine-tuning transfer (detect.darknet.transfer), the COCO names assumed for a
model file that carries none (detect.inference.loading) and detect.val's model-vs-dataset check all go through it.

Two names are one class when their keys are equal: case-insensitive, `_` and spaces alike, and Darknet's
spellings of six COCO classes (cfg/coco.names of the Darknet repository) taken as COCO's own (the instances
jsons'), so the official .weights meet COCO jsons, Roboflow and Label Studio exports as the same 80 classes.
"""

from __future__ import annotations

from collections.abc import Sequence

from detect.runtime.assets import asset

# the COCO names of the official Darknet .weights, in their class order, as the COCO 2017 instances jsons spell them
COCO_NAMES = asset("cfg", "coco.names")

# Darknet's spelling -> COCO's: the same classes (Darknet's coco.names took them from Pascal VOC's names)
DARKNET_SYNONYMS = {
    "motorbike": "motorcycle",
    "aeroplane": "airplane",
    "sofa": "couch",
    "pottedplant": "potted plant",
    "diningtable": "dining table",
    "tvmonitor": "tv",
}


def _plain(name) -> str:
    return " ".join(str(name).replace("_", " ").lower().split())


_SYNONYM_KEYS = {_plain(darknet): _plain(coco) for darknet, coco in DARKNET_SYNONYMS.items()}


def name_key(name) -> str:
    """The key two names of one class share: lower case, `_` as a space, runs of spaces as one, Darknet's
    spellings as COCO's ("Potted_Plant", "pottedplant" and "potted plant" are one key)."""
    plain = _plain(name)
    return _SYNONYM_KEYS.get(plain, plain)


def read_coco_names() -> list[str] | None:
    """The 80 COCO names of cfg/coco.names (None when the file is missing)."""
    if not COCO_NAMES.is_file():
        return None
    return [line.strip() for line in COCO_NAMES.read_text().splitlines() if line.strip()]


def match_names(source: Sequence[str], target: Sequence[str]) -> list[int | None]:
    """For each name of `target`, the index of the same class in `source` (the first, if `source` repeats a
    class), or None where `source` has none."""
    index: dict[str, int] = {}
    for i, name in enumerate(source):
        index.setdefault(name_key(name), i)
    return [index.get(name_key(name)) for name in target]


def map_names(source: Sequence[str], target: Sequence[str], source_what: str = "the model",
              target_what: str = "the dataset") -> list[int]:
    """For each name of `target`, the index of the same class in `source`; ValueError naming the first name of
    `target` that `source` lacks (with `source`'s names, shortened), in one line."""
    found = match_names(source, target)
    for k, i in enumerate(found):
        if i is None:
            raise ValueError(f"{target_what}'s class {k} {target[k]!r} is not a class of {source_what} "
                             f"({shown_names(source)})")
    return found  # type: ignore[return-value]


def is_identity(order: Sequence[int | None], count: int) -> bool:
    """Whether `order` (match_names / map_names) maps every class of a `count`-class source to itself."""
    return list(order) == list(range(count))


def are_class_ids(names: Sequence[str]) -> bool:
    """Whether `names` are only the class ids "0", "1", ... (a model file without names): no names to match."""
    return list(names) == [str(k) for k in range(len(names))]


def shown_names(names: Sequence[str], limit: int = 8) -> str:
    """Up to `limit` names for a message, with the count when there are more."""
    head = ", ".join(str(n) for n in names[:limit])
    return head + (f", ... ({len(names)} in all)" if len(names) > limit else "")
