"""Spec files (clear errors naming the file and key), the synthetic dataset and multi-scale sizes."""

import json
import time

import numpy as np
import pytest
import torch

from detect.data.augmentation.multiscale import MultiScale
from detect.data.formats.spec import load_data_spec, spec_from_dict
from detect.data.formats.synthetic import CLASS_NAMES, SyntheticConfig, ensure_synthetic
from detect.data.loader import resolve_spec
from tests.conftest import ROOT


def test_spec_errors_name_the_file_and_key(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("format: coco\npath: .\ntrain: images\nval: images\n")
    with pytest.raises(ValueError, match=r"bad.yaml: format coco takes `train` and `train_annotations` together \(the "
                                         r"image folder and its json\), got only `train`; add `train_annotations`"):
        load_data_spec(f)
    f.write_text("format: pascal\n")
    with pytest.raises(ValueError, match="bad.yaml: `format` must be one of coco, yolo, voc, synthetic, got 'pascal'"):
        load_data_spec(f)
    f.write_text("format: yolo\npath: /nowhere/at/all\ntrain: a\nval: b\nnames: [x]\n")
    with pytest.raises(FileNotFoundError, match="bad.yaml: path '/nowhere/at/all' does not exist"):
        load_data_spec(f)
    spec = load_data_spec(f, {"path": str(tmp_path)})  # an override fixes it; the split is checked on use
    with pytest.raises(FileNotFoundError, match="bad.yaml: train = .* does not exist"):
        spec.images("train")
    with pytest.raises(FileNotFoundError, match="not found"):
        load_data_spec(tmp_path / "absent.yaml")


def test_shipped_specs_load():
    coco = load_data_spec(ROOT / "data" / "coco.yaml", {"path": str(ROOT)})
    assert coco.format == "coco" and coco.train_annotations.name == "instances_train2017.json"
    synthetic = load_data_spec(ROOT / "data" / "synthetic.yaml")
    assert synthetic.format == "synthetic" and synthetic.options["train_images"] == 400
    names = spec_from_dict({"format": "yolo", "path": str(ROOT), "train": "a", "val": "b",
                            "names": {0: "cat", 1: "dog"}})
    assert names.names == ("cat", "dog")


def test_synthetic_dataset_is_deterministic_fast_and_clean(tmp_path):
    cfg = SyntheticConfig(seed=5, train_images=60, val_images=20)
    start = time.perf_counter()
    a = ensure_synthetic(cfg, tmp_path / "a")
    assert time.perf_counter() - start < 10
    b = ensure_synthetic(cfg, tmp_path / "b")
    for split in ("train", "val"):
        ja = (a / "annotations" / f"instances_{split}.json").read_text()
        assert ja == (b / "annotations" / f"instances_{split}.json").read_text()
    assert (a / "images" / "train" / "000007.jpg").read_bytes() == (b / "images" / "train" / "000007.jpg").read_bytes()
    data = json.loads((a / "annotations" / "instances_train.json").read_text())
    assert len(data["images"]) == 60 and [c["name"] for c in data["categories"]] == list(CLASS_NAMES)
    sizes = {im["id"]: (im["width"], im["height"]) for im in data["images"]}
    per_image, per_class = {}, np.zeros(4)
    for ann in data["annotations"]:
        x, y, w, h = ann["bbox"]
        iw, ih = sizes[ann["image_id"]]
        assert min(w, h) >= 15 and max(w, h) <= 82 and x >= 0 and y >= 0 and x + w <= iw and y + h <= ih
        per_image.setdefault(ann["image_id"], []).append([x, y, x + w, y + h])
        per_class[ann["category_id"] - 1] += 1
    assert all(1 <= len(v) <= 5 for v in per_image.values()) and len(per_image) == 60
    assert per_class.min() > 0.5 * per_class.mean()  # classes roughly balanced
    for boxes in per_image.values():  # shapes never overlap: every object fully visible
        b = np.array(boxes)
        ix = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
        iy = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
        overlap = (ix > 0) & (iy > 0)
        assert not overlap[~np.eye(len(b), dtype=bool)].any()


def test_synthetic_spec_resolves_to_coco_in_the_cache(tmp_path):
    spec = spec_from_dict({"format": "synthetic", "seed": 1, "train_images": 5, "val_images": 3}, "s.yaml")
    resolved = resolve_spec(spec, tmp_path)
    assert resolved.format == "coco" and resolved.val_annotations.exists()
    assert resolved.path.parent == tmp_path and resolved.path.name.startswith("synthetic-")
    assert resolve_spec(spec, tmp_path).path == resolved.path  # generated once


def test_multiscale_sizes_are_stride_multiples_and_agree_across_ranks():
    a, b = MultiScale(320, 32, seed=7), MultiScale(320, 32, seed=7)
    sizes = [a.size_for(step) for step in range(200)]
    assert sizes == [b.size_for(step) for step in range(200)]  # what another rank computes
    assert set(sizes) == set(a.sizes) == {160, 192, 224, 256, 288, 320, 352, 384, 416, 448, 480}
    images = torch.rand(2, 3, 320, 320)
    assert MultiScale.resize(images, 224).shape == (2, 3, 224, 224)
    assert MultiScale.resize(images, 320) is images
    with pytest.raises(ValueError):
        MultiScale(320, 32, low=1.2)
