"""COCO jsons as Roboflow, Label Studio and CVAT export them: a superclass category is no class, an image listed
twice is read once and reported, and either way evaluation scores each image once (detect.data.formats.coco_exports)."""


import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict
from detect.data.records.cache import issues_log_for
from tests.support.coco_jsons import box, image, perfect_map, roboflow_json, write_coco
from tests.support.log_lines import log_lines


def test_roboflow_superclass_is_no_class_in_every_split(tmp_path):
    images, annotations = roboflow_json()
    root = tmp_path / "ds"
    write_coco(root, images, annotations)
    write_coco(root, images, [a for a in annotations if a["category_id"] == 1], name="val.json")  # no wallaby
    spec = spec_from_dict({"format": "coco", "path": str(root), "train": "images", "val": "images",
                           "train_annotations": "data.json", "val_annotations": "val.json"}, str(root / "rf.yaml"))
    with log_lines("detect.data.formats.coco_exports") as lines:
        train = open_source(spec, "train", tmp_path / "cache")
        val = open_source(spec, "val", tmp_path / "cache")
    for source in (train, val):  # class indices match between the splits
        assert (source.names, source.category_ids) == (["kangaroo", "wallaby"], [1, 2])
        assert [c["id"] for c in source.coco_ground_truth().dataset["categories"]] == [1, 2]
    assert sum(len(r.classes) for r in train.records) == 7 and sum(len(r.classes) for r in val.records) == 4
    superclass = [ln for ln in lines if "'kangaroos'" in ln]
    assert len(superclass) == 2  # one per split's json
    assert superclass[0].endswith("data.json: category 0 'kangaroos' is not a class: it is the supercategory of "
                                  "'kangaroo', 'wallaby', and no box is of it")
    (empty,) = [ln for ln in lines if "no annotation" in ln]
    assert empty.endswith("val.json: 1 class(es) with no annotation in this file: 2 'wallaby'; kept as classes "
                          "(another split may have their boxes)")


def test_spec_names_count_the_classes_or_every_category(tmp_path):
    images, annotations = roboflow_json()
    source = open_source(write_coco(tmp_path / "a", images, annotations, names=["roo", "wal"]), "val",
                         tmp_path / "cache")
    assert (source.names, source.category_ids) == (["roo", "wal"], [1, 2])
    every = open_source(write_coco(tmp_path / "b", images, annotations, names=["all", "roo", "wal"]), "val",
                        tmp_path / "cache")
    assert (every.names, every.category_ids) == (["all", "roo", "wal"], [0, 1, 2])
    with pytest.raises(ValueError, match=r"has 2 classes \(category ids 1, 2\) but the spec lists 1 names; "
                                         r"category 0 'kangaroos' left out as superclasses \(list 3 names"):
        open_source(write_coco(tmp_path / "c", images, annotations, names=["roo"]), "val", tmp_path / "cache")


def test_image_listed_twice_with_the_same_boxes_is_read_once(tmp_path):
    """A merged CVAT export: k1.jpg is image 1 and image 7, with the same boxes under both ids."""
    images, annotations = roboflow_json(first_id=1)
    copies = [dict(a, id=100 + a["id"], image_id=7) for a in annotations if a["image_id"] == 2]
    spec = write_coco(tmp_path / "ds", images + [image(7, "k1.jpg")], annotations + copies)
    cache = tmp_path / "cache"
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "val", cache)
    assert [r.image_id for r in source.records] == [1, 2, 3]
    assert sum(len(r.classes) for r in source.records) == len(annotations) == 7
    assert dict(source.report.counts) == {"duplicate_image": 1}
    (summary,) = [ln for ln in lines if "skipped images" in ln]
    assert "3 images, 7 boxes; skipped images: 1 duplicate_image; dropped boxes: none" in summary
    log_text = issues_log_for(next((cache / "labels").glob("*.npz"))).read_text()
    assert (f"duplicate_image\t{tmp_path / 'ds' / 'images' / 'k1.jpg'}\tdata.json lists 'k1.jpg' twice, as image "
            f"id 2 and 7: kept id 2; the 2 annotation(s) of id 7 (annotation id(s) 102, 105) are dropped with "
            f"it: the same boxes as id 2's\n") in log_text
    assert [im["id"] for im in source.coco_ground_truth().dataset["images"]] == [1, 2, 3]
    assert perfect_map(source).map == pytest.approx(1.0)


def test_duplicate_entry_with_other_boxes_says_so(tmp_path):
    images, annotations = roboflow_json(first_id=1)
    other = [box(200, 7, [30, 30, 12, 12])]
    spec = write_coco(tmp_path / "ds", images + [image(7, "k1.jpg")], annotations + other)
    source = open_source(spec, "val", tmp_path / "cache")
    assert sum(len(r.classes) for r in source.records) == 7  # image 7's box is dropped with it
    ((path, kind, detail),) = source.report.entries
    assert (path.rsplit("/", 1)[1], kind) == ("k1.jpg", "duplicate_image")
    assert detail == ("data.json lists 'k1.jpg' twice, as image id 2 and 7: kept id 2; the 1 annotation(s) of id 7 "
                      "(annotation id(s) 200) are dropped with it, and they are NOT the same boxes as the 2 of id 2: "
                      "check which entry is right")


@pytest.mark.parametrize("backend", ["pycocotools", "faster-coco-eval", "ultrafast-pycocotools"])
def test_image_id_listed_twice_is_read_once_and_evaluated(tmp_path, backend):
    """The same entry twice: the evaluation saw the image twice and blamed the loader."""
    images, annotations = roboflow_json(first_id=1)
    spec = write_coco(tmp_path / "ds", images + [dict(images[1])], annotations)
    source = open_source(spec, "val", tmp_path / "cache")
    assert [r.image_id for r in source.records] == [1, 2, 3]
    assert sum(len(r.classes) for r in source.records) == 7
    ((path, kind, detail),) = source.report.entries
    assert (path.rsplit("/", 1)[1], kind) == ("k1.jpg", "duplicate_image")
    assert detail == "data.json lists image id 2 ('k1.jpg') twice: read once, with the 2 annotation(s) of that id"
    result = perfect_map(source, backend)
    assert (result.map, result.num_images) == (pytest.approx(1.0), 3)


def test_boxes_of_a_superclass_are_reported(tmp_path):
    images, annotations = roboflow_json()
    spec = write_coco(tmp_path / "ds", images, annotations + [box(7, 2, [10, 10, 30, 30], category_id=0)])
    with log_lines("detect.data.formats.coco_exports") as lines:
        source = open_source(spec, "val", tmp_path / "cache")
    assert source.names == ["kangaroo", "wallaby"] and sum(len(r.classes) for r in source.records) == 7
    assert lines[0].endswith("category 0 'kangaroos' is not a class: it is the supercategory of 'kangaroo', "
                             "'wallaby' (its annotations are dropped)")
    ((path, kind, detail),) = source.report.entries
    assert (path.rsplit("/", 1)[1], kind) == ("k2.jpg", "unknown_class")
    assert detail == ("1 annotation(s) of category 0 'kangaroos', the supercategory of others in data.json and so "
                      "not a class (a spec whose `names` list every category keeps it one): annotation id(s) 7")
