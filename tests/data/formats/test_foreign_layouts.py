"""A dataset as another tool exports it gives the mAP of the same boxes in the project's own spec.

Built from 24 coco-tiny val images and their official annotations: a Roboflow COCO export (image, annotation
and category ids from 0, the dataset's superclass as category 0), a merged CVAT json (an image listed twice), a
Roboflow YOLO export with its data.yaml (`../valid/images`), labelImg's labels beside the images, an ultralytics
yaml (a names dict, `path`, no `format`); each evaluated with the official yolov3-tiny weights by detect.val.
"""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

N_IMAGES = 24
NAMES = [n.strip() for n in (ROOT / "cfg" / "coco.names").read_text().splitlines() if n.strip()]


@pytest.fixture(scope="module")
def coco_subset(tmp_path_factory):
    """(folder of the images, the official json cut to them) of the first N_IMAGES coco-tiny val images."""
    from tests.conftest import shared_path

    root = shared_path("data", "coco-tiny")
    shared_path("weights", "yolov3-tiny.weights")
    data = json.loads((root / "annotations" / "instances_val2017.json").read_text())
    images = sorted(data["images"], key=lambda im: im["id"])[:N_IMAGES]
    keep = {im["id"] for im in images}
    out = tmp_path_factory.mktemp("coco-subset")
    (out / "images").mkdir()
    for im in images:
        shutil.copy(root / "val2017" / im["file_name"], out / "images" / im["file_name"])
    subset = {**data, "images": images, "annotations": [a for a in data["annotations"] if a["image_id"] in keep]}
    return out / "images", subset


def _write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content) if path.suffix == ".json" else yaml.safe_dump(content, sort_keys=False))
    return path


def _val(spec: Path, tmp: Path):
    from detect.val import parse_args, run

    args = ["--cfg", str(ROOT / "cfg" / "yolov3-tiny.cfg"), "--weights", str(ROOT.parent / "shared" / "weights" /
            "yolov3-tiny.weights"), "--data", str(spec), "--img", "416", "--workers", "0", "--project",
            str(tmp / "runs"), "--cache-dir", str(tmp / "cache")]
    result = run(parse_args(args))
    return round(result.map, 6), round(result.map50, 6), result.num_images


def _roboflow_coco(subset: dict) -> dict:
    """Ids from 0 everywhere, categories renumbered 1..80 under a superclass category 0 (Roboflow's export)."""
    cats = sorted(subset["categories"], key=lambda c: c["id"])
    new_cat = {c["id"]: i + 1 for i, c in enumerate(cats)}
    new_image = {im["id"]: i for i, im in enumerate(subset["images"])}
    categories = [{"id": 0, "name": "coco-objects", "supercategory": "none"}] + [
        {"id": new_cat[c["id"]], "name": c["name"], "supercategory": "coco-objects"} for c in cats]
    images = [{**im, "id": new_image[im["id"]]} for im in subset["images"]]
    anns = [{**a, "id": i, "image_id": new_image[a["image_id"]], "category_id": new_cat[a["category_id"]]}
            for i, a in enumerate(subset["annotations"])]
    return {"images": images, "annotations": anns, "categories": categories}


def _cvat_merged(subset: dict) -> dict:
    """The first image listed again under a new id, its annotations repeated (two exports merged)."""
    first = subset["images"][0]
    again = {**first, "id": max(im["id"] for im in subset["images"]) + 1}
    next_id = max(a["id"] for a in subset["annotations"]) + 1
    repeated = [{**a, "id": next_id + i, "image_id": again["id"]}
                for i, a in enumerate(a for a in subset["annotations"] if a["image_id"] == first["id"])]
    return {**subset, "images": subset["images"] + [again], "annotations": subset["annotations"] + repeated}


def test_coco_jsons_of_other_tools_score_as_the_official_json(coco_subset, tmp_path):
    images, subset = coco_subset
    own = _write(tmp_path / "own" / "data.yaml", {
        "path": str(images.parent), "format": "coco", "train": "images", "val": "images",
        "train_annotations": str(_write(tmp_path / "own" / "ann.json", subset)),
        "val_annotations": str(tmp_path / "own" / "ann.json")})
    roboflow = tmp_path / "roboflow"
    shutil.copytree(images, roboflow / "valid")
    _write(roboflow / "valid" / "_annotations.coco.json", _roboflow_coco(subset))
    roboflow_spec = _write(roboflow / "data.yaml", {  # no format, no path: the keys and the yaml's folder say it
        "train": "valid", "train_annotations": "valid/_annotations.coco.json",
        "val": "valid", "val_annotations": "valid/_annotations.coco.json"})
    cvat = _write(tmp_path / "cvat" / "data.yaml", {
        "path": str(images.parent), "format": "coco", "train": "images", "val": "images",
        "train_annotations": str(_write(tmp_path / "cvat" / "instances_default.json", _cvat_merged(subset))),
        "val_annotations": str(tmp_path / "cvat" / "instances_default.json")})
    expected = _val(own, tmp_path)
    assert expected[2] == N_IMAGES and expected[0] > 0.1
    assert _val(roboflow_spec, tmp_path) == expected  # before: the box with id 0 could never match
    assert _val(cvat, tmp_path) == expected  # before: the image was evaluated twice (a failure)


def _yolo_lines(subset: dict) -> dict[str, str]:
    """file name -> YOLO label text of the json's non-crowd boxes (class = index among the sorted category ids)."""
    index = {c["id"]: i for i, c in enumerate(sorted(subset["categories"], key=lambda c: c["id"]))}
    sizes = {im["id"]: (im["file_name"], im["width"], im["height"]) for im in subset["images"]}
    lines = {name: [] for name, _, _ in sizes.values()}
    for a in subset["annotations"]:
        if a.get("iscrowd"):
            continue
        name, w, h = sizes[a["image_id"]]
        x, y, bw, bh = a["bbox"]
        lines[name].append(f"{index[a['category_id']]} {(x + bw / 2) / w:.6f} {(y + bh / 2) / h:.6f} "
                           f"{bw / w:.6f} {bh / h:.6f}")
    return {name: "\n".join(rows) + "\n" for name, rows in lines.items()}


def _yolo_tree(images: Path, labels: dict, image_dir: Path, label_dir: Path) -> None:
    image_dir.mkdir(parents=True, exist_ok=True)
    label_dir.mkdir(parents=True, exist_ok=True)
    for name, text in labels.items():
        shutil.copy(images / name, image_dir / name)
        (label_dir / (Path(name).stem + ".txt")).write_text(text)


def test_yolo_layouts_of_other_tools_score_as_the_projects_yolo_spec(coco_subset, tmp_path):
    images, subset = coco_subset
    labels = _yolo_lines(subset)
    own = tmp_path / "own"
    _yolo_tree(images, labels, own / "images" / "val", own / "labels" / "val")
    own_spec = _write(own / "data.yaml", {"path": str(own), "format": "yolo", "train": "images/val",
                                          "val": "images/val", "names": NAMES})
    roboflow = tmp_path / "roboflow"
    _yolo_tree(images, labels, roboflow / "valid" / "images", roboflow / "valid" / "labels")
    roboflow_spec = _write(roboflow / "data.yaml", {"train": "../valid/images", "val": "../valid/images",
                                                    "nc": len(NAMES), "names": NAMES})
    labelimg = tmp_path / "labelimg"
    _yolo_tree(images, labels, labelimg / "photos", labelimg / "photos")  # x.txt beside x.jpg
    labelimg_spec = _write(labelimg / "data.yaml", {"train": "photos", "val": "photos", "names": NAMES})
    ultralytics_spec = _write(tmp_path / "ultralytics.yaml", {"path": "own", "train": "images/val",
                                                              "val": "images/val", "names": dict(enumerate(NAMES))})
    expected = _val(own_spec, tmp_path)
    assert expected[2] == N_IMAGES and expected[0] > 0.1
    for spec in (roboflow_spec, labelimg_spec, ultralytics_spec):
        assert _val(spec, tmp_path) == expected, spec
