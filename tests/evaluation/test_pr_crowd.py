"""PR_curve.png's AP is COCOeval's AP@0.5 per class, crowd regions included: a detection on a crowd region is
ignored (the region matched by intersection over the detection's area, any number of times), a free non-crowd
box is preferred, crowd regions are no positives; VOC difficult boxes (crowd-flagged) are matched by IoU."""

import numpy as np
import pytest
from pycocotools.coco import COCO

from detect.evaluation.matching import match_detections
from detect.evaluation.per_image import truths_from_coco
from detect.evaluation.pr_curves import pr_curves
from detect.evaluation.split_match import detections_from_rows
from tests.support.coco_oracles import coco_evaluate

NAMES = ["person", "car"]
CATEGORY_IDS = [1, 3]


def _ground_truth(images: dict) -> COCO:
    """image id -> [(category id, [x, y, w, h], iscrowd, difficult)] as a pycocotools COCO."""
    anns = []
    for image_id, boxes in images.items():
        for cid, box, crowd, difficult in boxes:
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": cid, "bbox": list(box),
                         "area": box[2] * box[3], "iscrowd": crowd, **({"difficult": 1} if difficult else {})})
    gt = COCO()
    gt.dataset = {"images": [{"id": i, "width": 640, "height": 480} for i in images], "annotations": anns,
                  "categories": [{"id": c, "name": n} for c, n in zip(CATEGORY_IDS, NAMES)]}
    gt.createIndex()
    return gt


def _constructed_case() -> tuple[COCO, list[dict]]:
    """Image 1: two persons and a crowd region; detections on the persons, small ones inside the crowd (IoU
    with it below 0.5, intersection over their own area 1), one on a person inside the crowd, a second one on
    that person. Image 2: a car, a VOC difficult car with a small detection inside it and a false alarm."""
    crowd = (200, 100, 300, 300)
    gt = _ground_truth({
        1: [(1, (10, 10, 50, 100), 0, 0), (1, (220, 120, 40, 90), 0, 0), (1, crowd, 1, 0)],
        2: [(3, (100, 100, 120, 60), 0, 0), (3, (300, 50, 200, 200), 1, 1)],
    })
    person = [((10, 10, 50, 100), 0.9), ((222, 121, 40, 90), 0.6), ((221, 120, 40, 88), 0.55),
              ((560, 420, 20, 40), 0.85), ((250, 250, 30, 60), 0.8), ((490, 150, 30, 50), 0.7),
              ((500, 420, 30, 40), 0.75), ((600, 20, 30, 30), 0.5)]
    car = [((400, 100, 30, 30), 0.95), ((102, 101, 118, 60), 0.8), ((0, 400, 40, 40), 0.7)]
    results = [{"image_id": 1, "category_id": 1, "bbox": list(b), "score": s} for b, s in person]
    results += [{"image_id": 2, "category_id": 3, "bbox": list(b), "score": s} for b, s in car]
    return gt, results


def _random_case(seed: int) -> tuple[COCO, list[dict]]:
    """Images with persons and cars, crowd regions, detections near the boxes, inside the regions and anywhere,
    scores with ties; one image with more than COCOeval's 100 detections of a class."""
    rng = np.random.default_rng(seed)
    images, results = {}, []

    def box(x, y, w, h):
        return [float(x), float(y), float(max(w, 2)), float(max(h, 2))]

    for image_id in range(1, 13):
        boxes = [(int(rng.choice(CATEGORY_IDS)), box(*rng.uniform(0, 500, 2), *rng.uniform(10, 120, 2)), 0, 0)
                 for _ in range(rng.integers(1, 6))]
        boxes += [(int(rng.choice(CATEGORY_IDS)), box(*rng.uniform(0, 400, 2), *rng.uniform(80, 240, 2)), 1, 0)
                  for _ in range(rng.integers(0, 3))]
        images[image_id] = boxes
        for cid, (x, y, w, h), crowd, _ in boxes:
            for _ in range(rng.integers(1, 6 if crowd else 3)):  # near a box, or small inside a region
                scale = rng.uniform(0.1, 0.5) if crowd else rng.uniform(0.7, 1.2)
                bx, by = x + rng.uniform(0, w * (1 - min(scale, 1))), y + rng.uniform(0, h * (1 - min(scale, 1)))
                results.append({"image_id": image_id, "category_id": cid, "score": round(rng.uniform(), 2),
                                "bbox": box(bx + rng.normal(0, 3), by + rng.normal(0, 3), w * scale, h * scale)})
        count = 130 if image_id == 5 else int(rng.integers(0, 8))
        for _ in range(count):  # false alarms (and chance hits) anywhere
            results.append({"image_id": image_id, "category_id": 1 if count > 100 else int(rng.choice(CATEGORY_IDS)),
                            "score": round(rng.uniform(), 2),
                            "bbox": box(*rng.uniform(0, 560, 2), *rng.uniform(5, 150, 2))})
    return _ground_truth(images), results


def _plot_ap50(gt: COCO, results: list[dict]) -> np.ndarray:
    """Per-class AP@0.5 as PR_curve.png gets it (detect.plots.evaluation.write_eval_plots' path)."""
    rows = np.array([[r["image_id"], *r["bbox"], r["score"], r["category_id"]] for r in results]).reshape(-1, 7)
    detections = detections_from_rows(rows, CATEGORY_IDS)
    truths = truths_from_coco(gt, sorted(gt.getImgIds()), CATEGORY_IDS)
    return pr_curves(*match_detections(detections, truths, len(NAMES))).ap50


@pytest.mark.parametrize("backend", ["pycocotools", "faster-coco-eval"])
@pytest.mark.parametrize("case", ["constructed", 0, 1, 2])
def test_pr_curve_ap_is_cocoevals_ap50_with_crowd_regions(case, backend):
    gt, results = _constructed_case() if case == "constructed" else _random_case(case)
    stats, per_class = coco_evaluate(gt, results, sorted(gt.getImgIds()), NAMES, CATEGORY_IDS, backend=backend)
    ap50 = _plot_ap50(gt, results)
    expected = {c.name: c.ap50 for c in per_class}
    assert {n: ap50[k] for k, n in enumerate(NAMES) if n in expected} == pytest.approx(expected, abs=1e-3)
    assert ap50[[NAMES.index(n) for n in expected]].mean() == pytest.approx(stats[1], abs=1e-3)


def test_the_constructed_case_exercises_every_crowd_rule():
    """The case above is one a union IoU or a missing preference would get wrong: its figures, by hand."""
    gt, results = _constructed_case()
    ap50 = _plot_ap50(gt, results)
    # person: 2 positives. By score: TP .9, FP .85, ignored .8 (inside the crowd), FP .75, FP .7 (a third of it
    # inside the crowd), TP .6 (the free person beats the crowd), ignored .55 (its person is taken: the crowd
    # absorbs it), FP .5. Precision 1 to recall .5, then 2/5.
    assert ap50[0] == pytest.approx((51 + 50 * 2 / 5) / 101)
    # car: 1 positive. FP .95 (small, inside the difficult car: matched by IoU as VOC does, not ignored as on a
    # crowd region), TP .8: precision 1/2 at every recall
    assert ap50[1] == pytest.approx(0.5)


@pytest.mark.parametrize("backend", ["pycocotools", "faster-coco-eval"])
def test_ties_are_broken_as_cocoeval_breaks_them(backend):
    """Equal scores in two images: COCOeval takes the images in id order (image 3's false alarm first, then
    image 33's hit: precision 1/2 at recall 1/2, where the other order has 1). A person detection overlapping two
    free boxes equally takes the later one, which leaves the earlier one to the next detection (AP 1, where
    taking the earlier one leaves the next a false positive)."""
    # ids 3 and 33: a Python set of them iterates 33 first
    gt = _ground_truth({3: [(3, (200, 200, 20, 20), 0, 0)], 33: [(3, (0, 0, 20, 20), 0, 0)],
                        4: [(1, (0, 0, 10, 10), 0, 0), (1, (5, 0, 10, 10), 0, 0)]})
    results = [{"image_id": 33, "category_id": 3, "bbox": [0, 0, 20, 20], "score": 0.5},
               {"image_id": 3, "category_id": 3, "bbox": [100, 100, 20, 20], "score": 0.5},
               {"image_id": 4, "category_id": 1, "bbox": [2.5, 0, 10, 10], "score": 0.9},  # IoU 0.6 with both
               {"image_id": 4, "category_id": 1, "bbox": [0, 0, 10, 10], "score": 0.8}]  # the first box only
    _, per_class = coco_evaluate(gt, results, sorted(gt.getImgIds()), NAMES, CATEGORY_IDS, backend=backend)
    assert [c.ap50 for c in per_class] == pytest.approx([1.0, 51 * 0.5 / 101], abs=1e-9)
    assert _plot_ap50(gt, results) == pytest.approx([c.ap50 for c in per_class], abs=1e-9)
