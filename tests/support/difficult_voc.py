"""A real VOC split with difficult boxes: kangaroo (../shared) with every second object marked difficult."""

from tests.conftest import shared_path


def kangaroo_with_difficult_boxes(root):
    """The kangaroo VOC split (real images) with every second object of every xml marked difficult."""
    kangaroo = shared_path("data/kangaroo")
    (root / "annots").mkdir(parents=True)
    (root / "images").symlink_to(kangaroo / "images")
    for xml in sorted((kangaroo / "annots").glob("*.xml")):
        parts = xml.read_text().split("<difficult>0</difficult>")
        text = "".join(part + (("<difficult>1</difficult>" if k % 2 else "<difficult>0</difficult>")
                               if k < len(parts) - 1 else "") for k, part in enumerate(parts))
        (root / "annots" / xml.name).write_text(text)
    for name in ("train.txt", "val.txt"):
        (root / name).write_text((kangaroo / name).read_text())
    spec = root / "kangaroo.yaml"
    spec.write_text(f"path: {root}\nformat: voc\nimages: images\nannotations: annots\ntrain: train.txt\n"
                    f"val: val.txt\nnames: [kangaroo]\n")
    return spec
