"""Which rule of the label table (detect.data.formats.label_location) a YOLO split's labels follow.

The rules `darknet`, `ultralytics` and `beside` are tried in this order; the first under which any label file
exists is used for the whole split. A split with images and no label file under any rule is refused, unless the
spec allows it (`background_only`), since training on it would learn that nothing is ever there.
"""

from __future__ import annotations

import logging
from pathlib import Path

from detect.data.formats.label_location import RULE_WORDS, YOLO_RULES, rule_path
from detect.data.formats.label_location import label_path as location_label_path
from detect.data.records.images import BadImage, probe_image
from detect.data.records.records import first_few

log = logging.getLogger(__name__)

RULES = YOLO_RULES
NO_LABELS = "none"  # a split the spec allows to be all background: no label file is read
DESCRIPTIONS = {**{rule: RULE_WORDS[rule] for rule in RULES},
                NO_LABELS: "none: every image is background (`background_only` in the spec)"}


def label_path(image: Path, layout: str) -> Path | None:
    """The label file of `image` in a split whose layout is `layout`; None when the split reads no labels."""
    if layout == NO_LABELS:
        return None
    return location_label_path(image, layout)


def find_layout(files: list[Path]) -> tuple[str, Path, Path] | None:
    """(rule, image, its label file) of the first rule under which a label file exists; None when none does."""
    for rule in RULES:
        for image in files:
            candidate = rule_path(image, rule)
            if candidate is not None and candidate.is_file():
                return rule, image, candidate
    return None


def describe(rule: str, example: Path | None = None) -> str:
    """The rule in words; Darknet's and ultralytics' rules are one when the image's path has one images/."""
    if rule == "darknet" and example is not None and rule_path(example, "ultralytics") == rule_path(example, rule):
        return "images/ -> labels/ (Darknet and ultralytics layout)"
    return DESCRIPTIONS[rule]


def searched_folders(files: list[Path]) -> list[Path]:
    """Every folder the rules looked in for the split's labels, in rule order, each once."""
    folders: dict[Path, None] = {}
    for rule in RULES:
        for image in files:
            candidate = rule_path(image, rule)
            if candidate is not None:
                folders.setdefault(candidate.parent)
    return list(folders)


def choose_layout(files: list[Path], images_dir: Path, what: str, spec_file: str, split: str,
                  background_allowed: bool) -> str:
    """The layout of a split's labels, said in one info line; a ValueError for a split without any label file
    unless `background_allowed` (the spec's `background_only`)."""
    found = find_layout(files)
    if found is not None:
        rule, image, example = found
        log.info(f"{what}: labels {describe(rule, image)}, e.g. {example}")
        return rule
    if background_allowed:
        log.info(f"{what}: labels {DESCRIPTIONS[NO_LABELS]}")
        return NO_LABELS
    if not _any_usable_image(files):  # the label cache refuses the split, naming every bad file
        return NO_LABELS
    raise ValueError(no_labels_message(files, images_dir, what, spec_file, split))


def _any_usable_image(files: list[Path]) -> bool:
    """Whether any file is an image that can be read; probes up to the first that is (usually the first file)."""
    for path in files:
        try:
            probe_image(path)
            return True
        except BadImage:
            continue
    return False


def no_labels_message(files: list[Path], images_dir: Path, what: str, spec_file: str, split: str) -> str:
    folders = searched_folders(files)
    xml = sum(f.suffix.lower() == ".xml" for f in files)
    voc = (f" The split holds {xml} .xml file(s): Pascal VOC annotations are read by `format: voc` "
           f"(data/README.md)." if xml else "")
    return (f"{what}: {len(files)} file(s) in {images_dir} but not one label file. Looked for <image name>.txt in "
            f"{first_few(folders, 6)} (Darknet's images/ -> labels/, ultralytics' last images/ -> labels/, then "
            f"beside the images). Put the label files in one of these folders, or add `background_only: [{split}]` "
            f"to {spec_file} if no image of this split holds an object.{voc}")


__all__ = ["NO_LABELS", "RULES", "choose_layout", "describe", "find_layout", "label_path", "rule_path"]
