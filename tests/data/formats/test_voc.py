"""Pascal VOC xml (format voc): VOCdevkit and flat layouts, bad input, difficult boxes in evaluation,
the deterministic val_fraction split, class names, and the kangaroo dataset in ../shared."""

import logging
import random
from pathlib import Path

import cv2
import numpy as np
import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import load_data_spec, spec_from_dict
from detect.data.records.images import load_image, load_image_for_size
from tests.conftest import ROOT, shared_path
from tests.support.coco_oracles import coco_evaluate
from tests.support.log_lines import log_lines


def write_image(path, width=64, height=48, seed=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    assert cv2.imwrite(str(path), rng.integers(0, 255, (height, width, 3), dtype=np.uint8))


def write_xml(path, objects, size=(64, 48)):
    """objects: (name, xmin, ymin, xmax, ymax) or (..., difficult); VOC 1-based inclusive pixels."""
    parts = [f"<annotation><filename>{path.stem}.jpg</filename>"]
    if size is not None:
        parts.append(f"<size><width>{size[0]}</width><height>{size[1]}</height><depth>3</depth></size>")
    for name, *box in objects:
        difficult = box[4] if len(box) > 4 else 0
        parts.append(f"<object><name>{name}</name><truncated>1</truncated><difficult>{difficult}</difficult>"
                     "<bndbox>" + "".join(f"<{t}>{v}</{t}>" for t, v in zip(("xmin", "ymin", "xmax", "ymax"), box))
                     + "</bndbox></object>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(parts) + "</annotation>")


def voc_spec(root, **keys):
    return spec_from_dict({"format": "voc", "path": str(root), **keys}, str(root / "voc.yaml"))


def file_names(records):
    return [r.path.rsplit("/", 1)[1] for r in records]


@pytest.fixture
def info_logs():
    """Let INFO lines of the data modules reach the handlers of `log_lines`."""
    loggers = [logging.getLogger(n) for n in ("detect.data.formats.voc", "detect.data.records.cache")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
    yield
    for lg, level in zip(loggers, levels):
        lg.setLevel(level)


def write_devkit(root):
    """VOC2007 (trainval 000001 000002, test 000003) and VOC2012 (trainval 2008_000001 2008_000002)."""
    layout = {
        "VOC2007": {"000001": [("dog", 11, 6, 40, 30)], "000002": [("cat", 1, 1, 64, 48), ("dog", 5, 5, 20, 20, 1)],
                    "000003": [("bird", 21, 11, 50, 40)]},
        "VOC2012": {"2008_000001": [("cat", 2, 3, 30, 33)], "2008_000002": [("dog", 31, 9, 60, 44)]},
    }
    sets = {"VOC2007": {"trainval": ["000001", "000002"], "test": ["000003"]},
            "VOC2012": {"trainval": ["2008_000001", "2008_000002"]}}
    for seed, (year, images) in enumerate(layout.items()):
        for i, (stem, objects) in enumerate(images.items()):
            write_image(root / year / "JPEGImages" / f"{stem}.jpg", seed=10 * seed + i)
            write_xml(root / year / "Annotations" / f"{stem}.xml", objects)
        for name, stems in sets[year].items():
            (root / year / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
            (root / year / "ImageSets" / "Main" / f"{name}.txt").write_text("\n".join(stems) + "\n")


def test_devkit_years_combined_with_names_from_every_split(tmp_path, info_logs):
    write_devkit(tmp_path / "VOCdevkit")
    spec = voc_spec(tmp_path / "VOCdevkit", train=["VOC2007/trainval", "VOC2012/trainval"], val="VOC2007/test")
    with log_lines("detect.data.formats.voc") as lines:
        train = open_source(spec, "train", tmp_path / "cache")
        val = open_source(spec, "val", tmp_path / "cache")
    # the names come from the xml of both splits (bird only in val), sorted, logged once
    assert train.names == val.names == ["bird", "cat", "dog"]
    assert [ln for ln in lines if "class names collected" in ln] == [
        ("3 class names collected from 5 xml files (sorted): bird, cat, dog; list them as `names:` in the data "
         "spec to fix the set and order")]
    assert file_names(train.records) == ["000001.jpg", "000002.jpg", "2008_000001.jpg", "2008_000002.jpg"]
    assert [r.image_id for r in train.records] == [0, 1, 2, 3]  # stems not all numeric: positions
    assert [r.classes.tolist() for r in train.records] == [[2], [1, 2], [1], [2]]
    # 1-based inclusive VOC pixels -> corners: xmin 11 is x1 10, xmax 40 is x2 40
    np.testing.assert_array_equal(train.records[0].boxes, [[10, 5, 40, 30]])
    np.testing.assert_array_equal(train.records[1].boxes, [[0, 0, 64, 48], [4, 4, 20, 20]])
    # the difficult dog is trained on, and flagged for evaluation
    assert train.records[1].difficult.tolist() == [False, True]
    assert file_names(val.records) == ["000003.jpg"] and val.records[0].image_id == 3
    assert not train.report.entries and not val.report.entries
    gt = val.coco_ground_truth()
    assert gt.dataset["images"] == [{"id": 3, "file_name": "000003.jpg", "width": 64, "height": 48}]
    assert [a["bbox"] for a in gt.dataset["annotations"]] == [[20.0, 10.0, 30.0, 30.0]]


def test_flat_layout_with_list_files_of_names_and_stems(tmp_path):
    root = tmp_path / "flat"
    for i, stem in enumerate(["a", "b", "c"]):
        write_image(root / "images" / f"{stem}.jpg", seed=i)
        write_xml(root / "Annotations" / f"{stem}.xml", [("cat", 1 + i, 1, 20, 20 + i)])
    (root / "train.txt").write_text("a.jpg\nimages/b.jpg\n")  # names, with or without the folder
    (root / "val.txt").write_text("c\n")  # stems
    spec = voc_spec(root, train="train.txt", val="val.txt", names=["dog", "cat"])
    train, val = open_source(spec, "train", tmp_path / "cache"), open_source(spec, "val", tmp_path / "cache")
    assert file_names(train.records) == ["a.jpg", "b.jpg"] and file_names(val.records) == ["c.jpg"]
    assert train.names == ["dog", "cat"]  # as given, in that order: cat is class 1
    assert [r.classes.tolist() for r in train.records] == [[1], [1]]
    np.testing.assert_array_equal(val.records[0].boxes, [[2, 0, 20, 22]])


def test_bad_input_is_reported_and_skipped(tmp_path):
    root = tmp_path / "flat"
    xml = root / "annots"
    for i, stem in enumerate(["good", "broken", "background", "size", "edges", "unknown"]):
        write_image(root / "images" / f"{stem}.jpg", seed=i)
    write_xml(xml / "good.xml", [("cat", 11, 11, 30, 30)])
    (xml / "broken.xml").write_text("<annotation><object><name>cat</name></annotation>")
    write_xml(xml / "size.xml", [("cat", 101, 101, 200, 200), ("dog", 6, 6, 20, 20)], size=(640, 480))
    write_xml(xml / "edges.xml", [("cat", 0, 5, 64, 20),  # x1 = -1: within tolerance, clipped
                                  ("cat", 30, 10, 200, 40),  # far outside the 64 x 48 image: dropped
                                  ("dog", 20, 20, 20, 30), ("dog", 25, 30, 10, 40)])  # min >= max
    write_xml(xml / "unknown.xml", [("horse", 5, 5, 20, 20), ("cat", 5, 5, 20, 20), ("horse", 1, 1, 9, 9)])
    write_xml(xml / "ghost.xml", [("cat", 5, 5, 20, 20)])  # listed, with xml, but no image
    names = ["good", "broken", "background", "size", "edges", "unknown", "ghost"]
    (root / "train.txt").write_text("".join(f"{n}.jpg\n" for n in names))
    (root / "val.txt").write_text("good.jpg\n")
    spec = voc_spec(root, train="train.txt", val="val.txt", names=["cat", "dog"])
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "train", tmp_path / "cache")
    assert dict(source.report.counts) == {"label_syntax": 1, "background": 1, "size_mismatch": 1,
                                          "outside_image": 2, "clipped": 1, "zero_area": 2, "unknown_class": 2,
                                          "missing": 1}
    entries = {(p.rsplit("/", 1)[1], kind): detail for p, kind, detail in source.report.entries}
    assert entries[("broken.xml", "label_syntax")].startswith("not well-formed xml: mismatched tag: line 1")
    assert entries[("background.jpg", "background")] == "no xml: kept as a background image (no boxes)"
    assert entries[("size.xml", "size_mismatch")] == ("<size> says 640x480 but size.jpg is 64x48; "
                                                      "the image's size is used")
    assert entries[("size.xml", "outside_image")] == ("1 box(es): coordinates more than 10% of the image's side "
                                                      "beyond the 64x48 image (up to 10% is clipped)")
    assert entries[("edges.xml", "zero_area")] == "2 box(es) with xmin >= xmax or ymin >= ymax"
    assert entries[("unknown.xml", "unknown_class")] == ("2 object(s) of class horse, not in `names`; add the "
                                                         "class to `names` or fix the xml")
    assert entries[("ghost", "missing")] == f"listed in {root / 'train.txt'} but no image ghost.* in {root / 'images'}"
    # broken (position 1) and ghost (6) are dropped; the others are kept with their good boxes
    assert source.dropped_image_ids == [1, 6]
    by_name = {n: r for n, r in zip(file_names(source.records), source.records)}
    assert list(by_name) == ["good.jpg", "background.jpg", "size.jpg", "edges.jpg", "unknown.jpg"]
    assert len(by_name["background.jpg"].classes) == 0
    np.testing.assert_array_equal(by_name["size.jpg"].boxes, [[5, 5, 20, 20]])
    assert by_name["size.jpg"].classes.tolist() == [1]
    np.testing.assert_array_equal(by_name["edges.jpg"].boxes, [[0, 4, 64, 20]])
    assert by_name["unknown.jpg"].classes.tolist() == [0]
    summary = [ln for ln in lines if "skipped images" in ln]
    issues_log = next((tmp_path / "cache" / "labels").glob("voc-train-*.issues.log"))
    assert summary == [(f"voc train: 5 images, 4 boxes; skipped images: 1 missing, 1 label_syntax; dropped "
                        f"boxes: 2 unknown_class, 2 outside_image, 2 zero_area; converted/fixed: 1 clipped, "
                        f"1 size_mismatch; info: 1 background (offending files listed in {issues_log})")]


def test_xml_without_image_in_a_flat_folder_is_reported_not_dropped(tmp_path):
    root = tmp_path / "flat"
    write_image(root / "images" / "a.jpg")
    write_xml(root / "annotations" / "a.xml", [("cat", 5, 5, 20, 20)])
    write_xml(root / "annotations" / "orphan.xml", [("cat", 5, 5, 20, 20)])
    write_image(root / "images" / "bg.png", seed=1)  # no xml: background
    # val_fraction 0.01 leaves these three stems in train (checked below), so the folder listing is the split
    source = open_source(voc_spec(root, val_fraction=0.01), "train", tmp_path / "cache")
    assert file_names(source.records) == ["a.jpg", "bg.png"] and source.dropped_image_ids == []
    assert source.report.entries == [
        (str(root / "images" / "bg.png"), "background", "no xml: kept as a background image (no boxes)"),
        (str(root / "annotations" / "orphan.xml"), "no_image", f"no image orphan.* in {root / 'images'}; xml skipped")]


def test_difficult_boxes_are_ignored_in_evaluation(tmp_path):
    """Two images, each with a cat and a difficult cat. A detection on image 1's difficult cat is no false
    positive and the missed difficult cat of image 2 no false negative: AP exactly 1.0, where counting them
    as ordinary boxes gives 76/101 (recall 3/4 of COCO's 101 recall points)."""
    root = tmp_path / "flat"
    for i, stem in enumerate(["1", "2"]):
        write_image(root / "images" / f"{stem}.jpg", 100, 80, seed=i)
        write_xml(root / "annots" / f"{stem}.xml", [("cat", 11, 11, 40, 50), ("cat", 61, 11, 90, 60, 1)],
                  size=(100, 80))
    (root / "all.txt").write_text("1\n2\n")
    source = open_source(voc_spec(root, train="all.txt", val="all.txt"), "val", tmp_path / "cache")
    gt = source.coco_ground_truth()
    assert [(a["bbox"], a["iscrowd"], a["difficult"]) for a in gt.dataset["annotations"]] == [
        ([10.0, 10.0, 30.0, 40.0], 0, 0), ([60.0, 10.0, 30.0, 50.0], 1, 1)] * 2

    def evaluate(results):
        stats, per_class = coco_evaluate(gt, results, [1, 2], source.names, source.category_ids)
        return stats[0], stats[1], per_class[0].instances

    def det(image_id, bbox, score):
        return {"image_id": image_id, "category_id": 0, "bbox": bbox, "score": score}

    found = [det(1, [60, 10, 30, 50], 0.95), det(1, [10, 10, 30, 40], 0.9), det(2, [10, 10, 30, 40], 0.9)]
    assert evaluate(found) == (1.0, 1.0, 2)  # 2 instances: difficult boxes are not counted
    # as ordinary boxes the same detections reach a recall of 3/4 only
    for a in gt.dataset["annotations"]:
        a["iscrowd"] = a["difficult"] = 0
    ordinary = evaluate(found)
    assert ordinary[:2] == pytest.approx((76 / 101, 76 / 101)) and ordinary[2] == 4


def test_small_detection_inside_a_difficult_box_is_a_false_positive(tmp_path):
    """VOC matches difficult boxes by IoU: a small box inside one (IoU 0.08) is a false positive, where a COCO
    crowd region (intersection over the detection's area = 1) would swallow it. At the top score it halves
    the precision at the first recall point and costs a third of it after: AP 2/3."""
    root = tmp_path / "flat"
    write_image(root / "images" / "1.jpg", 100, 80)
    write_xml(root / "annots" / "1.xml", [("cat", 11, 11, 40, 50), ("cat", 61, 11, 90, 60, 1),
                                          ("cat", 11, 61, 30, 80)], size=(100, 80))
    (root / "all.txt").write_text("1\n")
    source = open_source(voc_spec(root, train="all.txt", val="all.txt"), "val", tmp_path / "cache")
    results = [{"image_id": 1, "category_id": 0, "bbox": b, "score": s} for b, s in
               [([65, 20, 10, 10], 0.99), ([10, 10, 30, 40], 0.9), ([10, 60, 20, 20], 0.8)]]
    stats, _ = coco_evaluate(source.coco_ground_truth(), results, [1], source.names, source.category_ids)
    assert stats[:2] == pytest.approx([2 / 3, 2 / 3])


def make_flat(root, stems, order_seed):
    """One xml and one tiny image per stem, written in a shuffled order."""
    stems = list(stems)
    random.Random(order_seed).shuffle(stems)
    for stem in stems:
        write_image(root / "images" / f"{stem}.png", 8, 8)
        write_xml(root / "annots" / f"{stem}.xml", [("cat", 2, 2, 7, 7)], size=(8, 8))


def test_val_fraction_is_deterministic_and_stable(tmp_path):
    def split(root):
        spec = voc_spec(root, val_fraction=0.25)
        cache = tmp_path / "cache" / root.name
        return [file_names(open_source(spec, s, cache).records) for s in ("train", "val")]

    stems = [f"img{i:03d}" for i in range(40)]
    make_flat(tmp_path / "one", stems, order_seed=0)
    make_flat(tmp_path / "two", reversed(stems), order_seed=1)
    train, val = split(tmp_path / "one")
    assert val == ["img002.png", "img004.png", "img007.png", "img011.png", "img016.png", "img021.png",
                   "img022.png", "img023.png", "img024.png", "img029.png", "img031.png"]  # 11 of 40
    assert len(train) == 29 and not set(train) & set(val)
    assert split(tmp_path / "one") == split(tmp_path / "two") == [train, val]
    # ten more images: the earlier ones stay where they were (one of the new ones joins val)
    make_flat(tmp_path / "two", [f"img{i:03d}" for i in range(40, 50)], order_seed=2)
    train2, val2 = split(tmp_path / "two")
    assert set(train) <= set(train2) and set(val) <= set(val2) and len(val2) == 12 and len(train2) == 38


def test_spec_errors_name_the_key(tmp_path):
    (tmp_path / "ds").mkdir()
    with pytest.raises(ValueError, match="either `val` or `val_fraction`"):
        voc_spec(tmp_path / "ds", train="a.txt", val="b.txt", val_fraction=0.2)
    with pytest.raises(ValueError, match=r"`val_fraction` must be a number between 0 and 1 \(e.g. 0.2\), got 20"):
        voc_spec(tmp_path / "ds", val_fraction=20)
    with pytest.raises(ValueError, match="needs `train` or `val`"):
        voc_spec(tmp_path / "ds")
    spec = voc_spec(tmp_path / "ds", train="VOC2007/trainval", val="VOC2007/test")
    with pytest.raises(FileNotFoundError, match=r"train entry 'VOC2007/trainval' is neither a VOCdevkit split "
                                                r"\(.*VOC2007/ImageSets/Main/trainval.txt does not exist\)"):
        open_source(spec, "train", tmp_path / "cache")


def test_kangaroo(tmp_path):
    root = shared_path("data", "kangaroo")
    spec = load_data_spec(ROOT / "data" / "kangaroo.yaml", {"path": str(root)})
    with log_lines("detect.data.records.images") as warnings:
        train = open_source(spec, "train", tmp_path / "cache")
        val = open_source(spec, "val", tmp_path / "cache")
    assert (len(train.records), len(val.records)) == (132, 32)
    assert train.names == val.names == ["kangaroo"]
    assert not val.dropped_image_ids and dict(val.report.counts) == {"truncated": 1}
    # the truncated 00090.jpg is used, with one warning naming it
    assert [Path(w.split(":")[0]).resolve() for w in warnings] == [(root / "images" / "00090.jpg").resolve()]
    record = next(r for r in val.records if r.path.endswith("00090.jpg"))
    assert (record.width, record.height, record.image_id, len(record.classes)) == (590, 393, 90, 3)
    np.testing.assert_array_equal(load_image(record.path), cv2.imread(record.path))
    image, scale = load_image_for_size(record.path, 590, 393, 256)
    assert scale == 0.5 and image.shape == (197, 295, 3)
    gt = val.coco_ground_truth()
    assert len(gt.getImgIds()) == 32 and gt.imgs[90]["file_name"] == "00090.jpg"

