"""detect.plots: every picture written as a readable file of the expected size, and the mosaics' boxes where they
are. The curves and counts drawn here are tested in tests/evaluation (test_matching)."""

import cv2
import numpy as np
import pytest

from detect.evaluation.pr_curves import pr_curves

NAMES = ["cat", "dog", "bird"]


def _png_size(path):
    image = cv2.imread(str(path))
    assert image is not None, path
    return image.shape[1], image.shape[0]


def test_results_labels_and_evaluation_plots_are_written(tmp_path):
    from detect.data.records.records import ImageRecord
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
