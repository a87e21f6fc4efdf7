"""The ground truth evaluation scores is what the bad-input report kept: a COCO json's dropped boxes are not
scored, clipped boxes are scored clipped, crowd regions stay ignore regions; annotations of an unknown category
or of no image of the json are reported by id, never silently."""

import json
import shutil

import numpy as np
import pytest
import torch
from pycocotools.coco import COCO

from benchmarks.scale_data import fake_detections
from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict
from detect.data.records.cache import CACHE_VERSION, issues_log_for
from detect.evaluation.coco import (
    detections_to_rows,
    ground_truth_counts,
    rows_to_results,
)
from detect.evaluation.evaluator import CocoEvaluator
from tests.conftest import shared_path
from tests.support.coco_oracles import coco_evaluate
from tests.support.corpus import jpeg_bytes
from tests.support.log_lines import log_lines

FIRST_IMAGES = 4  # of coco-tiny val by id: 5001 (18 boxes, one a crowd person), 10764, 20992, 25603


def _spec(root, ann_name):
    return spec_from_dict({"format": "coco", "path": str(root), "train": "images", "val": "images",
                           "train_annotations": ann_name, "val_annotations": ann_name}, str(root / f"{ann_name}.yaml"))


def _bad(ann_id, image_id, bbox, category_id=1):
    return {"id": ann_id, "image_id": image_id, "category_id": category_id, "bbox": bbox, "area": 1600.0,
            "iscrowd": 0}


@pytest.fixture
def coco_subset(tmp_path):
    """(root, clean json dict, first image dict): a few coco-tiny val images copied into tmp_path with their
    official annotations as clean.json, and bad.json = clean.json plus bad annotations."""
    src = shared_path("data", "coco-tiny")
    data = json.loads((src / "annotations" / "instances_val2017.json").read_text())
    data["images"] = sorted(data["images"], key=lambda im: im["id"])[:FIRST_IMAGES]
    ids = {im["id"] for im in data["images"]}
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] in ids]
    root = tmp_path / "ds"
    (root / "images").mkdir(parents=True)
    for im in data["images"]:
        shutil.copy(src / "val2017" / im["file_name"], root / "images" / im["file_name"])
    (root / "clean.json").write_text(json.dumps(data))
    first = data["images"][0]
    w = first["width"]
    bad = dict(data, annotations=data["annotations"] + [
        _bad(900001, first["id"], [50, 60, -30, 40]),  # negative width: zero_area
        _bad(900002, first["id"], [100, 100, 0, 0]),  # zero size: zero_area
        _bad(900003, first["id"], [w + 50, 10, 40, 40]),  # right of the image: outside_image
        _bad(900004, first["id"], [-200, -200, 50, 50]),  # above left of it: outside_image
    ])
    (root / "bad.json").write_text(json.dumps(bad))
    return root, data, first


def _fake_rows(source, seed=0):
    """Detections near the kept boxes plus false positives (fixed seed), as coco rows."""
    rng = np.random.default_rng(seed)
    return np.concatenate([detections_to_rows(torch.from_numpy(fake_detections(r.boxes, r.classes, 24,
                                                                               len(source.names), rng)),
                                              r.image_id, source.category_ids) for r in source.records])


def _evaluate(source, rows):
    evaluator = CocoEvaluator(source, backend="pycocotools")
    for image_id in [r.image_id for r in source.records]:
        evaluator.add_rows(rows[rows[:, 0] == image_id], image_id)
    return evaluator.compute()


def test_dropped_boxes_are_not_scored(coco_subset, tmp_path):
    root, clean, _ = coco_subset
    cache = tmp_path / "cache"
    with log_lines("detect.data.records.cache") as lines:
        built = open_source(_spec(root, "bad.json"), "val", cache)
    loaded = open_source(_spec(root, "bad.json"), "val", cache)  # the same from the label cache
    assert dict(built.report.counts) == {"zero_area": 2, "outside_image": 2}
    official = [a for a in clean["annotations"] if not a["iscrowd"]]
    kept = sum(len(r.classes) for r in built.records)
    assert kept == len(official) == 44
    summary = [ln for ln in lines if "dropped boxes" in ln]
    assert len(summary) == 1 and "44 boxes" in summary[0] and "2 outside_image, 2 zero_area" in summary[0]
    clean_gt = COCO()
    clean_gt.dataset = clean
    clean_gt.createIndex()
    image_ids = [im["id"] for im in clean["images"]]
    want_counts = ground_truth_counts(clean_gt, image_ids)
    kept_per_class = np.bincount(np.concatenate([r.classes for r in built.records]), minlength=80)
    for source in (built, loaded):
        gt = source.coco_ground_truth()
        assert ground_truth_counts(gt, image_ids) == want_counts
        assert {source.category_ids[k]: n for k, n in enumerate(kept_per_class) if n} == \
            {cid: n for cid, (_, n) in want_counts.items()}
        # the crowd person of image 5001 is still an ignore region, with its own id and area
        crowd = [a for a in gt.dataset["annotations"] if a["iscrowd"]]
        want_crowd = [a for a in clean["annotations"] if a["iscrowd"]]
        assert [(a["id"], a["image_id"], a["category_id"], a["bbox"], a["area"]) for a in crowd] == \
            [(a["id"], a["image_id"], a["category_id"], a["bbox"], a["area"]) for a in want_crowd]
        # kept boxes keep the json's id, bbox and area (COCO's segment area decides small / medium / large)
        by_id = {a["id"]: a for a in gt.dataset["annotations"]}
        for a in official:
            assert (by_id[a["id"]]["bbox"], by_id[a["id"]]["area"]) == (a["bbox"], a["area"])

    rows = _fake_rows(built)
    result = _evaluate(loaded, rows)
    want_stats, want_classes = coco_evaluate(clean_gt, rows_to_results(rows), image_ids, built.names,
                                             built.category_ids, backend="pycocotools")
    assert [(c.name, c.images, c.instances) for c in result.per_class] == \
        [(c.name, c.images, c.instances) for c in want_classes]
    person = next(c for c in result.per_class if c.name == "person")
    assert person.instances == 19
    np.testing.assert_allclose(result.stats, want_stats, rtol=0, atol=1e-12)
    np.testing.assert_allclose([(c.ap50, c.ap) for c in result.per_class],
                               [(c.ap50, c.ap) for c in want_classes], rtol=0, atol=1e-12)
    assert result.map50 > 0.1


def _generated(root, annotations, sizes=((48, 64), (40, 64))):
    """Two generated images (h, w) with ids 1 and 2 and the given annotations in data.json; the spec."""
    (root / "images").mkdir(parents=True)
    images = []
    for i, (h, w) in enumerate(sizes, 1):
        (root / "images" / f"im{i}.jpg").write_bytes(jpeg_bytes(h, w, seed=i))
        images.append({"id": i, "file_name": f"im{i}.jpg", "width": w, "height": h})
    categories = [{"id": 3, "name": "cat"}, {"id": 7, "name": "dog"}]
    (root / "data.json").write_text(json.dumps({"images": images, "annotations": annotations,
                                                "categories": categories}))
    return _spec(root, "data.json")


def _ann(ann_id, image_id, bbox, category_id=3, **extra):
    return {"id": ann_id, "image_id": image_id, "category_id": category_id, "bbox": bbox, "iscrowd": 0, **extra}


def test_clipped_boxes_are_scored_as_clipped(tmp_path):
    spec = _generated(tmp_path / "ds", [
        _ann(11, 1, [-0.4, 10.25, 20.5, 12.0], area=200.5),  # sticks out 0.4 px on the left: clipped
        _ann(12, 1, [40.0, 30.0, 24.5, 18.3], category_id=7),  # 0.5 px past the right, 0.3 past the bottom
        _ann(13, 2, [1.5, 2.25, 10.125, 7.75]),  # inside: as written, area from the box (none given)
        _ann(14, 2, [-0.5, -0.5, 30.0, 20.0], iscrowd=1, area=321.0),  # a crowd region, clipped
    ])
    source = open_source(spec, "val", tmp_path / "cache")
    assert dict(source.report.counts) == {"clipped": 3}
    np.testing.assert_allclose(source.records[0].boxes, [[0, 10.25, 20.1, 22.25], [40, 30, 64, 48]], atol=1e-5)
    anns = {a["id"]: a for a in source.coco_ground_truth().dataset["annotations"]}
    assert sorted(anns) == [11, 12, 13, 14]
    np.testing.assert_allclose(anns[11]["bbox"], [0.0, 10.25, 20.1, 12.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(anns[12]["bbox"], [40.0, 30.0, 24.0, 18.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(anns[14]["bbox"], [0.0, 0.0, 29.5, 19.5], rtol=0, atol=1e-12)
    assert anns[13]["bbox"] == [1.5, 2.25, 10.125, 7.75]  # exactly the json's numbers
    assert [anns[i]["area"] for i in (11, 13, 14)] == [200.5, 10.125 * 7.75, 321.0]
    assert [anns[i]["iscrowd"] for i in (11, 12, 13, 14)] == [0, 0, 0, 1]


def test_unknown_category_is_reported_with_its_id_annotation_and_image(tmp_path):
    spec = _generated(tmp_path / "ds", [
        _ann(21, 1, [5, 5, 20, 20]),
        _ann(22, 1, [10, 10, 20, 20], category_id=999),
        _ann(23, 2, [10, 10, 20, 20], category_id=5),
        _ann(24, 2, [1, 1, 20, 20], category_id=5, iscrowd=1),  # a crowd region of no category either
    ])
    cache = tmp_path / "cache"
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "val", cache)
    assert dict(source.report.counts) == {"unknown_class": 3}
    assert "dropped boxes: 3 unknown_class" in next(ln for ln in lines if "dropped boxes" in ln)
    entries = sorted((p.rsplit("/", 1)[1], kind, detail) for p, kind, detail in source.report.entries)
    assert entries == [
        ("im1.jpg", "unknown_class", "1 annotation(s) with category_id 999, not among the 2 categories of "
                                     "data.json (ids 3, 7): annotation id(s) 22"),
        ("im2.jpg", "unknown_class", "2 annotation(s) with category_id 5, not among the 2 categories of "
                                     "data.json (ids 3, 7): annotation id(s) 23, 24"),
    ]
    log_text = issues_log_for(next((cache / "labels").glob("*.npz"))).read_text()
    assert "[-1" not in log_text and "annotation id(s) 22" in log_text
    assert [a["id"] for a in source.coco_ground_truth().dataset["annotations"]] == [21]


def test_annotation_of_no_image_is_reported(tmp_path):
    spec = _generated(tmp_path / "ds", [_ann(31, 1, [5, 5, 20, 20])] +
                      [_ann(40 + k, 77 + k % 2, [5, 5, 20, 20]) for k in range(7)])
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "val", tmp_path / "cache")
    assert dict(source.report.counts) == {"unknown_image": 7}
    summary = next(ln for ln in lines if "dropped boxes" in ln)
    assert "2 images, 1 boxes" in summary and "dropped boxes: 7 unknown_image" in summary
    ((path, kind, detail),) = source.report.entries
    assert (path.rsplit("/", 1)[1], kind) == ("data.json", "unknown_image")
    assert detail == ("7 annotation(s) whose image_id is not among the 2 images of the file: annotation id(s) "
                      "40, 41, 42, 43, 44 and 2 more (image_id 77, 78)")
    assert [a["id"] for a in source.coco_ground_truth().dataset["annotations"]] == [31]


def test_label_cache_of_the_previous_format_is_rebuilt(tmp_path):
    """A version 3 cache holds no ground-truth index: it is rebuilt, not read as a split without one."""
    spec = _generated(tmp_path / "ds", [_ann(51, 1, [5, 5, 20, 20]), _ann(52, 1, [5, 5, 0, 20]),
                                        _ann(53, 2, [1, 1, 9, 9], iscrowd=1)])
    cache = tmp_path / "cache"
    open_source(spec, "val", cache)
    cache_file = next((cache / "labels").glob("*.npz"))
    with np.load(cache_file) as z:
        arrays = {name: z[name] for name in z.files if name not in ("annotation_index", "crowd_index")}
    meta = json.loads(str(arrays["meta"]))
    arrays["meta"] = np.array(json.dumps({**meta, "version": 3}))
    with open(cache_file, "wb") as f:
        np.savez(f, **arrays)
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "val", cache)
    assert sum(f"format version 3 != {CACHE_VERSION}: rebuilding" in line for line in lines) == 1
    assert source.annotation_index.tolist() == [0] and source.crowd_index.tolist() == [2]
    assert [(a["id"], a["iscrowd"]) for a in source.coco_ground_truth().dataset["annotations"]] == [(51, 0), (53, 1)]
