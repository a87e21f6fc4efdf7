"""Where the YOLO label file of an image lies: the one rule table every reader goes through.

| rule          | tool                                    | label of `d/images/x.jpg` | of `V/JPEGImages/x.jpg` |
|---------------|-----------------------------------------|---------------------------|-------------------------|
| `alexeyab`    | AlexeyAB's Darknet replace_image_to_label | `d/images/x.txt`        | `V/labels/x.txt`        |
| `darknet`     | pjreddie's Darknet fill_truth_detection | `d/labels/x.txt` (first)  | `V/labels/x.txt`        |
| `ultralytics` | ultralytics img2label_paths             | `d/labels/x.txt` (last)   | none: beside            |
| `beside`      | labelImg, Label Studio, CVAT            | `d/images/x.txt`          | `V/JPEGImages/x.txt`    |

`alexeyab` (src/utils.c) replaces, first occurrence only and in Darknet's order, COCO's
`/images/{train,val}{2014,2017}/` and VOC's `/JPEGImages/` (and their Windows spellings) by `labels`, trims spaces
and tabs, then the image extension at the end by `.txt`; any other path keeps its folder. `darknet` renames the
first `images` folder and the first `JPEGImages` folder (whole folder names: `myimages/` stays). `ultralytics`
renames the last `images` folder. Where a rule renames no folder, the label lies beside the image. Each rule ends
in `.txt`, so two images of one stem in one folder (`x.jpg`, `x.png`) map to one label file under every rule:
`shared_labels` finds such images and `skip_shared` reports and skips both (the file holds the boxes of at most
one of them, and nothing says which). The readers' orders: YOLO folders and lists (detect.data.formats.label_layouts)
`YOLO_RULES`; Darknet image lists (detect.data.formats.darknet_source) `DARKNET_RULES`; VOC's xml is `<stem>.xml`
(detect.data.formats.voc) and is checked for sharing the same way.
"""

from __future__ import annotations

import logging
from pathlib import Path

from detect.data.records.records import BadInputReport, first_few

log = logging.getLogger(__name__)

# src/utils.c replace_image_to_label: (find, replace) in Darknet's order, each the first occurrence only
ALEXEYAB_REPLACEMENTS = (
    ("/images/train2017/", "/labels/train2017/"),
    ("/images/val2017/", "/labels/val2017/"),
    ("/JPEGImages/", "/labels/"),
    ("\\images\\train2017\\", "\\labels\\train2017\\"),
    ("\\images\\val2017\\", "\\labels\\val2017\\"),
    ("\\images\\train2014\\", "\\labels\\train2014\\"),
    ("\\images\\val2014\\", "\\labels\\val2014\\"),
    ("/images/train2014/", "/labels/train2014/"),
    ("/images/val2014/", "/labels/val2014/"),
    ("\\JPEGImages\\", "\\labels\\"),
)
# the extensions find_replace_extension turns into .txt, in Darknet's order (case-sensitive: .Jpg is none)
DARKNET_EXTENSIONS = (".jpg", ".JPG", ".jpeg", ".JPEG", ".png", ".PNG", ".bmp", ".BMP", ".ppm", ".PPM", ".tiff",
                      ".TIFF")
RULE_WORDS = {
    "alexeyab": "Darknet's replace_image_to_label (AlexeyAB): /JPEGImages/ and COCO's /images/<split>/ -> "
                "/labels/, else beside the image",
    "darknet": "images/ -> labels/ (pjreddie's Darknet layout: the first images/ or JPEGImages/ folder)",
    "ultralytics": "images/ -> labels/ (ultralytics layout: the last images/ folder)",
    "beside": "beside the images (labelImg/Darknet layout)",
}
YOLO_RULES = ("darknet", "ultralytics", "beside")  # a YOLO split: the first rule with any label file
DARKNET_RULES = ("alexeyab", "darknet")  # a Darknet image list: AlexeyAB's, else pjreddie's


def replace_image_to_label(path: str) -> str:
    """The label path Darknet (AlexeyAB) reads for the image `path`, as a string."""
    for find, replace in ALEXEYAB_REPLACEMENTS:
        path = path.replace(find, replace, 1)
    path = path.strip(" \t")
    for ext in DARKNET_EXTENSIONS:
        if path.endswith(ext):
            return path[: -len(ext)] + ".txt"
    return path  # Darknet says "Failed to infer label file name"; label_file reads <stem>.txt instead


def rule_path(image: Path | str, rule: str) -> Path | None:
    """The label file of `image` under `rule`; None where the rule renames no folder of the path (`darknet`,
    `ultralytics`). `alexeyab` works on the path as written (a str keeps Darknet's string replacements exact)."""
    if rule == "alexeyab":
        label = replace_image_to_label(str(image))
        # an extension Darknet does not know (.tif, .webp, .Jpg): <stem>.txt, its folders replaced as its siblings'
        return Path(label) if label.endswith(".txt") else Path(label).with_suffix(".txt")
    image = Path(image)
    if rule == "beside":
        return image.with_suffix(".txt")
    parts = list(image.parts)
    folders = parts[:-1]
    if rule == "darknet":
        renamed = [folders.index(name) for name in ("images", "JPEGImages") if name in folders]
    elif rule == "ultralytics":
        renamed = [max(i for i, name in enumerate(folders) if name == "images")] if "images" in folders else []
    else:
        raise ValueError(f"unknown label rule {rule!r}; one of {', '.join(RULE_WORDS)}")
    if not renamed:
        return None
    for i in renamed:
        parts[i] = "labels"
    return Path(*parts).with_suffix(".txt")


def label_path(image: Path | str, rule: str) -> Path:
    """The label file of `image` under `rule`: beside the image where the rule renames no folder."""
    return rule_path(image, rule) or Path(image).with_suffix(".txt")


def label_file(listed: str, base: Path, rule: str) -> Path:
    """The label file of an image written as `listed` in a list (relative to `base` unless absolute): the rule is
    applied to the path as written, as Darknet applies it."""
    return base / label_path(listed, rule)


def shared_labels(images: list[Path], labels: list[Path | None]) -> dict[Path, list[Path]]:
    """label file -> the images (two or more) that would all read it."""
    by_label: dict[Path, list[Path]] = {}
    for image, label in zip(images, labels):
        if label is not None:
            by_label.setdefault(Path(label), []).append(Path(image))
    return {label: group for label, group in by_label.items() if len(group) > 1}


def skip_shared(images: list[Path], labels: list[Path | None], report: BadInputReport, what: str = "") -> list[bool]:
    """Which images to read (False: an image sharing its label file with another); each shared label file is one
    `shared_label` entry naming its images, and one warning names the first."""
    shared = shared_labels(images, labels)
    if not shared:
        return [True] * len(images)
    for label, group in shared.items():
        report.add("shared_label", label, f"{' and '.join(p.name for p in group)} (in {group[0].parent}) would both "
                   f"read this label file; {len(group)} images skipped: rename all but one of them (each image "
                   f"needs its own stem) and give each its own label file", count=len(group))
    label, group = next(iter(shared.items()))
    log.warning(f"{what + ': ' if what else ''}{sum(len(g) for g in shared.values())} images share a label file "
                f"with another image of the same name and are skipped, e.g. {' and '.join(map(str, group))} both "
                f"map to {label}; shared: {first_few(shared)}. Give each image its own stem")
    skipped = {image for group in shared.values() for image in group}
    return [Path(image) not in skipped for image in images]


__all__ = ["DARKNET_RULES", "RULE_WORDS", "YOLO_RULES", "label_file", "label_path", "replace_image_to_label",
           "rule_path", "shared_labels", "skip_shared"]
