"""detect.plots: matching and confusion counts on constructed cases, pycocotools' summary text, and every
picture written as a readable file of the expected size."""

import contextlib
import io

import cv2
import numpy as np
import pytest
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

from detect.evaluation.coco import coco_evaluate, format_summary
from detect.plots.matching import ImageTruth, confusion_matrix, match_detections, normalise_columns, pr_curves

NAMES = ["cat", "dog", "bird"]


def _truth(boxes, classes, ignore=None):
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    ignore = np.zeros(len(boxes), bool) if ignore is None else np.asarray(ignore, bool)
    return ImageTruth(boxes, np.asarray(classes, np.int64), ignore)


def _det(*rows):
    return np.asarray(rows, dtype=np.float64).reshape(-1, 6)


def test_confusion_matrix_counts_on_a_constructed_case():
    truths = {
        # a cat found as a cat, a dog found as a bird, a bird missed
        1: _truth([[0, 0, 10, 10], [20, 20, 40, 40], [50, 50, 60, 60]], [0, 1, 2]),
        # two detections on one cat: the better overlap pairs, the other is a false alarm; a crowd box
        2: _truth([[0, 0, 20, 20], [100, 100, 150, 150]], [0, 0], ignore=[False, True]),
        3: _truth([], []),  # background only
    }
    detections = {
        1: _det([0, 0, 10, 10, 0.9, 0], [21, 21, 40, 40, 0.8, 2], [50, 50, 60, 60, 0.2, 2]),  # last: below 0.25
        2: _det([0, 0, 20, 20, 0.9, 0], [1, 1, 20, 20, 0.95, 0], [100, 100, 150, 150, 0.9, 1]),  # on the crowd
        3: _det([5, 5, 30, 30, 0.5, 1]),
    }
    counts = confusion_matrix(detections, truths, 3, conf_thres=0.25, iou_thres=0.5)
    expected = np.zeros((4, 4), np.int64)
    expected[0, 0] = 2  # cats found (image 1, image 2's best overlap)
    expected[2, 1] = 1  # the dog predicted as a bird
    expected[3, 2] = 1  # the missed bird (its only detection scores below the threshold)
    expected[0, 3] = 1  # the second detection on image 2's cat
    expected[1, 3] = 1  # the dog on an empty image (the one on the crowd box is not counted)
    np.testing.assert_array_equal(counts, expected)
    share = normalise_columns(counts)
    np.testing.assert_allclose(share[:, 3], [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(share.sum(axis=0), [1, 1, 1, 1])


def test_pr_and_f1_curves_of_a_constructed_case_agree_with_cocoeval():
    # cats: two boxes in two images; detections by score: hit, miss, hit
    truths = {1: _truth([[0, 0, 50, 50]], [0]), 2: _truth([[10, 10, 60, 60]], [0])}
    detections = {1: _det([0, 0, 50, 50, 0.9, 0], [100, 100, 150, 150, 0.8, 0]), 2: _det([10, 10, 60, 60, 0.7, 0])}
    scores, classes, hits, truth_counts = match_detections(detections, truths, 3)
    assert truth_counts.tolist() == [2, 0, 0]
    assert sorted(zip(scores.tolist(), hits.tolist())) == [(0.7, True), (0.8, False), (0.9, True)]
    curves = pr_curves(scores, classes, hits, truth_counts)
    assert curves.has_truth.tolist() == [True, False, False]
    # precision 1 up to recall 0.5 (51 grid points), then 2/3 up to recall 1 (50 points)
    assert curves.ap50[0] == pytest.approx((51 + 50 * 2 / 3) / 101)
    f1_at = {c: curves.f1[0][np.searchsorted(curves.confidence_grid, c)] for c in (0.5, 0.75, 0.85, 0.95)}
    assert f1_at[0.85] == pytest.approx(2 / 3)  # P 1, R 0.5
    assert f1_at[0.75] == pytest.approx(0.5)  # P 0.5, R 0.5
    assert f1_at[0.5] == pytest.approx(0.8)  # P 2/3, R 1
    assert f1_at[0.95] == 0.0
    # the same 101-point interpolation as COCOeval's AP@0.5
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "width": 200, "height": 200}, {"id": 2, "width": 200, "height": 200}],
                  "annotations": [{"id": i + 1, "image_id": i + 1, "category_id": 1, "bbox": b, "area": 2500,
                                   "iscrowd": 0} for i, b in enumerate([[0, 0, 50, 50], [10, 10, 50, 50]])],
                  "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}, {"id": 3, "name": "bird"}]}
    gt.createIndex()
    results = [{"image_id": i, "category_id": 1, "bbox": [r[0], r[1], r[2] - r[0], r[3] - r[1]], "score": r[4]}
               for i, rows in detections.items() for r in rows.tolist()]
    stats, _ = coco_evaluate(gt, results, [1, 2], NAMES, [1, 2, 3])
    assert stats[1] == pytest.approx(curves.ap50[0])


def test_summary_lines_are_pycocotools_own(tmp_path):
    gt = COCO()
    gt.dataset = {"images": [{"id": 1, "width": 300, "height": 300}],
                  "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [10, 10, 120, 100],
                                   "area": 12000, "iscrowd": 0}],
                  "categories": [{"id": 1, "name": "cat"}]}
    gt.createIndex()
    results = [{"image_id": 1, "category_id": 1, "bbox": [12, 10, 118, 104], "score": 0.9}]
    lines = []
    coco_evaluate(gt, results, [1], ["cat"], [1], summary_lines=lines)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        evaluator = COCOeval(gt, gt.loadRes(results), "bbox")
        evaluator.evaluate()
        evaluator.accumulate()
        printed.truncate(0), printed.seek(0)
        evaluator.summarize()
    assert lines == printed.getvalue().splitlines() and len(lines) == 12
    assert lines[0].startswith(" Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = ")
    assert "-1.000" in lines[3]  # no small object: pycocotools' -1 stays in its own text
    # re-created from the stats (when COCOeval cannot run) in the same characters
    assert format_summary(evaluator.stats) == "\n".join(lines)


def _png_size(path):
    image = cv2.imread(str(path))
    assert image is not None, path
    return image.shape[1], image.shape[0]


def test_results_labels_and_evaluation_plots_are_written(tmp_path):
    from detect.data.records import ImageRecord
    from detect.plots import (
        label_statistics,
        plot_confusion_matrix,
        plot_f1_curves,
        plot_labels,
        plot_pr_curves,
        plot_results,
        read_results_csv,
    )

    csv_path = tmp_path / "results.csv"
    csv_path.write_text("epoch,box,obj,lr,map50\n1,0.5,0.3,0.01,\n2,0.4,0.2,0.005,0.61\n")
    columns = read_results_csv(csv_path)
    assert np.isnan(columns["map50"][0]) and columns["map50"][1] == pytest.approx(0.61)
    assert _png_size(plot_results(columns, tmp_path / "results.png")) == (1920, 390)  # 4 panels of 3.2 x 2.6 inches, 150 dpi

    records = [ImageRecord("a.jpg", 100, 50, np.array([[0, 0, 50, 50], [50, 0, 100, 25]], np.float32),
                           np.array([0, 2]), 1),
               ImageRecord("b.jpg", 80, 80, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), 2)]
    stats = label_statistics(records)
    np.testing.assert_allclose(stats["centres"], [[0.25, 0.5], [0.75, 0.25]])
    np.testing.assert_allclose(stats["sizes"], [[0.5, 1.0], [0.5, 0.5]])
    assert stats["per_image"].tolist() == [2, 0]
    assert _png_size(plot_labels(stats, NAMES, tmp_path / "labels.png")) == (1800, 1350)

    curves = pr_curves(np.array([0.9, 0.4]), np.array([0, 1]), np.array([True, False]), np.array([1, 2, 0]))
    assert _png_size(plot_pr_curves(curves, NAMES, tmp_path / "PR_curve.png")) == (1350, 900)
    assert _png_size(plot_f1_curves(curves, NAMES, tmp_path / "F1_curve.png")) == (1350, 900)
    counts = np.array([[3, 0, 0, 1], [0, 1, 0, 2], [0, 0, 0, 0], [1, 1, 0, 0]])
    assert _png_size(plot_confusion_matrix(counts, NAMES, tmp_path / "cm.png", 0.25, 0.5)) == (1125, 900)
    with pytest.raises(ValueError, match="do not fit 2 class names"):
        plot_confusion_matrix(counts, NAMES[:2], tmp_path / "bad.png", 0.25, 0.5)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["F1_curve.png", "PR_curve.png", "cm.png", "labels.png",
                                                           "results.csv", "results.png"]  # no temp file left


def test_batch_mosaic_draws_the_boxes_where_they_are(tmp_path):
    from detect.plots import batch_tiles, draw_mosaic

    images = np.full((2, 3, 64, 64), 255, np.uint8)
    targets = np.array([[0, 1, 0.5, 0.5, 0.5, 0.5], [1, 0, 0.25, 0.25, 0.25, 0.25]], np.float32)
    tiles = batch_tiles(images, targets, ["x/one.jpg", "x/two.jpg"])
    np.testing.assert_allclose(tiles[0].boxes, [[16, 16, 48, 48]])
    assert tiles[1].classes.tolist() == [0] and tiles[1].title == "two.jpg"
    path = draw_mosaic(tiles, NAMES, tmp_path / "train_batch0.jpg")
    mosaic = cv2.imread(str(path))
    assert mosaic.shape == (400, 800, 3)  # two 400-pixel tiles side by side
    # the box edge of tile 0 (64 px scaled by 400/64: x from 100 to 300) is drawn in the dog's colour, not white
    assert mosaic[200, 100].tolist() != [255, 255, 255] and mosaic[200, 200].tolist() == [255, 255, 255]
    with pytest.raises(ValueError, match="at least one image"):
        draw_mosaic([], NAMES, tmp_path / "empty.jpg")
