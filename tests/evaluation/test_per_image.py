"""detect.evaluation.per_image: one ground truth for every metric outside COCOeval. By class index for the plots
(other categories left out), by category id for VOC (every box kept); crowd and difficult boxes ignored, crowd
regions flagged for the matching's intersection-over-detection rule."""

import numpy as np
from pycocotools.coco import COCO

from detect.evaluation.per_image import (
    ImageTruth,
    truths_from_coco,
)
from detect.evaluation.split_match import detections_from_rows


def _ground_truth() -> COCO:
    anns = [(1, 3, [10, 20, 30, 40], 0, 0), (1, 7, [0, 0, 5, 5], 1, 0), (1, 9, [1, 1, 2, 2], 0, 0),
            (1, 3, [50, 50, 10, 10], 0, 1)]
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "width": 100, "height": 100}, {"id": 2, "width": 100, "height": 100}],
                  "annotations": [{"id": i + 1, "image_id": image, "category_id": cid, "bbox": box,
                                   "area": box[2] * box[3], "iscrowd": crowd, **({"difficult": 1} if hard else {})}
                                  for i, (image, cid, box, crowd, hard) in enumerate(anns)],
                  "categories": [{"id": c, "name": str(c)} for c in (3, 7, 9)]}
    gt.createIndex()
    return gt


def test_by_class_index_leaves_other_categories_out():
    truths = truths_from_coco(_ground_truth(), [1, 2], category_ids=[7, 3])
    one = truths[1]
    np.testing.assert_array_equal(one.boxes, [[10, 20, 40, 60], [0, 0, 5, 5], [50, 50, 60, 60]])
    assert one.classes.tolist() == [1, 0, 1]  # category 9 is in no class
    assert one.ignore.tolist() == [False, True, True]  # the crowd region and the difficult box
    assert one.crowd.tolist() == [False, True, False]  # a difficult box is no crowd region
    assert truths[2].boxes.shape == (0, 4) and truths[2].classes.dtype == np.int64


def test_by_category_id_keeps_every_box():
    one = truths_from_coco(_ground_truth(), [1])[1]
    assert one.classes.tolist() == [3, 7, 9, 3]
    assert one.ignore.tolist() == [False, True, False, True]


def test_detections_and_the_empty_truth():
    results = [{"image_id": 4, "category_id": 7, "bbox": [1, 2, 3, 4], "score": 0.5},
               {"image_id": 4, "category_id": 3, "bbox": [0, 0, 1, 1], "score": 0.25}]
    rows = np.array([[r["image_id"], *r["bbox"], r["score"], r["category_id"]] for r in results])
    np.testing.assert_array_equal(detections_from_rows(rows, [7, 3])[4], [[1, 2, 4, 6, 0.5, 0], [0, 0, 1, 1, 0.25, 1]])
    empty = ImageTruth.empty()
    assert empty.boxes.shape == (0, 4) and empty.crowd_mask().shape == (0,)
