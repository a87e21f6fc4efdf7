"""Paths as Darknet reads them: a relative path named in a file, and an image's label file.

Darknet fopen()s every path as it is written, so a relative one is relative to the folder Darknet runs from
(the paths of an obj.data, `read_data_cfg` in src/option_list.c; the lines of an image list, `get_paths` in
src/data.c). Users often run this project from another folder, so a relative path is looked up in the current
directory first (Darknet's rule) and then in the folder of the file that names it; which one was used is said
in an info line by the caller, and when neither holds it the error names the file, the line and both places.

The label file of an image is `replace_image_to_label` of AlexeyAB's src/utils.c, applied to the path as listed:
first-occurrence substring replacements (`find_replace`) of COCO's `/images/{train,val}{2014,2017}/` and VOC's
`/JPEGImages/` (and their Windows spellings) by `labels`, surrounding spaces and tabs trimmed (`trim`), then the
image extension at the end replaced by `.txt` (`find_replace_extension`). Any other path keeps its folder: the
label lies beside the image. pjreddie's Darknet (`fill_truth_detection` in its src/data.c) renamed the first
`images` and `JPEGImages` to `labels` instead; that layout (data/obj/images + data/obj/labels) is read too, as
the rule `pjreddie`, when no label file lies where AlexeyAB's rule says.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from detect.data.label_layouts import rule_path

# src/utils.c replace_image_to_label: (find, replace) in Darknet's order, each the first occurrence only
LABEL_REPLACEMENTS = (
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
IMAGE_EXTENSIONS = (".jpg", ".JPG", ".jpeg", ".JPEG", ".png", ".PNG", ".bmp", ".BMP", ".ppm", ".PPM", ".tiff",
                    ".TIFF")
LABEL_RULES = ("alexeyab", "pjreddie")
RULE_WORDS = {
    "alexeyab": "Darknet's replace_image_to_label (AlexeyAB): /JPEGImages/ and COCO's /images/<split>/ -> "
                "/labels/, else beside the image",
    "pjreddie": "images/ -> labels/ (pjreddie's Darknet; AlexeyAB's rule finds no label file beside these images)",
}


def replace_image_to_label(path: str) -> str:
    """The label path Darknet (AlexeyAB) reads for the image `path`, as a string."""
    for find, replace in LABEL_REPLACEMENTS:
        path = path.replace(find, replace, 1)
    path = path.strip(" \t")
    for ext in IMAGE_EXTENSIONS:
        if path.endswith(ext):
            return path[: -len(ext)] + ".txt"
    return path  # Darknet says "Failed to infer label file name"; label_file reads <stem>.txt instead


@dataclass(frozen=True)
class NamedPath:
    """A relative or absolute path as written in `named_in` at `line`, and where it was found (None: nowhere)."""

    value: str
    named_in: Path
    line: int
    found: Path | None
    base: str  # "absolute", "cwd" (Darknet's rule), "file" (the folder of named_in), or "" when not found
    tried: tuple[Path, ...]

    def require(self, what: str) -> Path:
        """The path found, else a FileNotFoundError naming the file, the line and every place tried."""
        if self.found is not None:
            return self.found
        raise FileNotFoundError(not_found_message(self, what))


def locate(value: str, named_in: Path, line: int) -> NamedPath:
    """`value` as Darknet opens it (relative: the current directory), else relative to `named_in`'s folder."""
    p = Path(value)
    if p.is_absolute():
        return NamedPath(value, named_in, line, p if p.exists() else None, "absolute" if p.exists() else "", (p,))
    places = ((Path.cwd() / p, "cwd"), (Path(named_in).absolute().parent / p, "file"))
    for candidate, base in places:
        if candidate.exists():
            return NamedPath(value, named_in, line, candidate, base, tuple(c for c, _ in places))
    return NamedPath(value, named_in, line, None, "", tuple(dict.fromkeys(c for c, _ in places)))


def not_found_message(named: NamedPath, what: str) -> str:
    where = f"{named.named_in}:{named.line}" if named.line else str(named.named_in)
    fix = f"Correct line {named.line} of {named.named_in}" if named.line else "Correct it"
    if Path(named.value).is_absolute():
        return f"{where}: {what} {named.value} does not exist. {fix}."
    folder = Path(named.named_in).absolute().parent
    holders = [d for d in folder.parents if (d / named.value).exists()]
    hint = (f" It exists under {holders[0]}: run from there (the folder Darknet ran from), or write the path "
            f"relative to {folder}." if holders else "")
    return (f"{where}: {what} {named.value!r} not found: looked in the current directory, where Darknet opens it "
            f"({named.tried[0]}), and in the folder of {named.named_in.name} ({named.tried[-1]}). {fix}, or run "
            f"from the folder the path is relative to.{hint}")


def label_file(listed: str, base: Path, rule: str) -> Path:
    """The label file of the image listed as `listed` (relative to `base` unless absolute) under `rule`."""
    if rule == "alexeyab":
        label = replace_image_to_label(listed)
        if not label.endswith(".txt"):  # an extension Darknet does not know (.tif, .webp, .Jpg): <stem>.txt,
            return base / Path(label).with_suffix(".txt")  # its folders replaced as its siblings' are
        return base / label
    if rule == "pjreddie":
        return base / (rule_path(Path(listed), "darknet") or Path(listed).with_suffix(".txt"))
    raise ValueError(f"unknown Darknet label rule {rule!r}; one of {', '.join(LABEL_RULES)}")


__all__ = ["LABEL_RULES", "RULE_WORDS", "NamedPath", "label_file", "locate", "replace_image_to_label"]
