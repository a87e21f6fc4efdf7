"""A YOLO-format copy of a COCO json split (images linked, labels/*.txt written) with its class list in any order,
as Label Studio's YOLO export writes it (classes.txt in alphabetical order): what the class-identity tests
evaluate."""

import json
import os
from pathlib import Path


def write_yolo_copy(images_dir: Path, ann_file: Path, out_root: Path, order: str = "coco", limit: int | None = None,
                    keep: set[str] | None = None) -> Path:
    """The first `limit` images of the json (by file name) under out_root/images, their boxes (crowd regions left
    out) under out_root/labels, and a spec whose `names` are the json's in `order` ("coco": category id order,
    "alphabetical"); `keep`: only these classes (the others' boxes dropped). Returns the spec's path."""
    data = json.loads(Path(ann_file).read_text())
    cats = sorted(data["categories"], key=lambda c: c["id"])
    names = [c["name"] for c in cats if keep is None or c["name"] in keep]
    if order == "alphabetical":
        names = sorted(names)
    index = {c["id"]: names.index(c["name"]) for c in cats if c["name"] in names}
    images = sorted(data["images"], key=lambda im: im["file_name"])[:limit]
    lines = {im["id"]: [] for im in images}
    sizes = {im["id"]: (im["width"], im["height"]) for im in images}
    for a in data["annotations"]:
        if a.get("iscrowd") or a["image_id"] not in lines or a["category_id"] not in index:
            continue
        w, h = sizes[a["image_id"]]
        x, y, bw, bh = a["bbox"]
        lines[a["image_id"]].append(f"{index[a['category_id']]} {(x + bw / 2) / w:.10f} {(y + bh / 2) / h:.10f} "
                                    f"{bw / w:.10f} {bh / h:.10f}")
    (out_root / "images").mkdir(parents=True)
    (out_root / "labels").mkdir(parents=True)
    for im in images:
        os.symlink(Path(images_dir) / im["file_name"], out_root / "images" / im["file_name"])
        stem = im["file_name"].rsplit(".", 1)[0]
        (out_root / "labels" / f"{stem}.txt").write_text("\n".join(lines[im["id"]]) + "\n")
    (out_root / "classes.txt").write_text("\n".join(names) + "\n")
    spec = out_root / "data.yaml"
    spec.write_text(json.dumps({"path": str(out_root), "format": "yolo", "train": "images", "val": "images",
                                "names": names}))
    return spec
