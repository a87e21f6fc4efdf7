"""Paths as Darknet reads them: a relative path named in a file, and an image's label file.

Darknet fopen()s every path as it is written, so a relative one is relative to the folder Darknet runs from
(the paths of an obj.data, `read_data_cfg` in src/option_list.c; the lines of an image list, `get_paths` in
src/data.c). Users often run this project from another folder, so a relative path is looked up in the current
directory first (Darknet's rule) and then in the folder of the file that names it; which one was used is said
in an info line by the caller, and when neither holds it the error names the file, the line and both places.
A path `data/x` is also looked up as `x` in that folder: exports meant to be unzipped into Darknet's `data/`
folder (CVAT's YOLO 1.1: obj.data with `train = data/train.txt`, lines `data/obj_train_data/x.jpg`) are read
where they were unzipped.

The label file of an listed image is the label rule table's (detect.data.formats.label_location: AlexeyAB's
`replace_image_to_label`, else pjreddie's images/ -> labels/).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class NamedPath:
    """A relative or absolute path as written in `named_in` at `line`, and where it was found (None: nowhere)."""

    value: str
    named_in: Path
    line: int
    found: Path | None
    # "absolute", "cwd" (Darknet's rule), "file" (the folder of named_in), "data" (that folder taken as Darknet's
    # data/ folder: `data/x` is its `x`), or "" when not found
    base: str
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
    folder = Path(named_in).absolute().parent
    places = [(Path.cwd() / p, "cwd"), (folder / p, "file")]
    if len(p.parts) > 1 and p.parts[0] == "data":  # CVAT's YOLO 1.1 export, read where it was unzipped
        places.append((folder / Path(*p.parts[1:]), "data"))
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
    data = f"; as Darknet's data/ folder: {named.tried[2]}" if len(named.tried) > 2 else ""
    holders = [d for d in folder.parents if (d / named.value).exists()]
    hint = (f" It exists under {holders[0]}: run from there (the folder Darknet ran from), or write the path "
            f"relative to {folder}." if holders else "")
    return (f"{where}: {what} {named.value!r} not found: looked in the current directory, where Darknet opens it "
            f"({named.tried[0]}), and in the folder of {named.named_in.name} "
            f"({named.tried[min(1, len(named.tried) - 1)]}{data}). {fix}, or run from the folder the path is "
            f"relative to.{hint}")


__all__ = ["NamedPath", "locate", "not_found_message"]
