"""detect.evaluation.darknet_map: Darknet's `detector map` on hand-made detections whose figures can be worked
out by hand, and on coco-tiny with the official yolov3-tiny weights against the real Darknet's own output."""

import numpy as np
import pytest
import torch

from detect.evaluation.darknet_map import (
    DarknetDetections,
    darknet_detections,
    darknet_diou,
    darknet_iou,
    darknet_nms,
    darknet_order,
    truths_from_xyxy,
)
from detect.evaluation.darknet_map_score import darknet_map
from tests.conftest import shared_path
from tests.support.darknet_oracles import parse_darknet_map

F = np.float32
NAMES = ["a", "b", "c"]
T1, T2, T3 = [0.3, 0.3, 0.2, 0.2], [0.7, 0.7, 0.2, 0.2], [0.5, 0.5, 0.4, 0.4]


def dets(boxes, probs) -> DarknetDetections:
    probs = np.array(probs, F)
    return DarknetDetections(np.array(boxes, F), probs.max(1), probs)


def one_image():
    """Class a: truths T1, T2; detections on T1 (0.9), nowhere (0.8), T2 at IoU 0.6 (0.7), T1 again (0.6).
    Class b: one truth, no detection. Class c: no truth, one detection (0.5)."""
    found = dets([T1, [0.1, 0.9, 0.1, 0.1], [0.75, 0.7, 0.2, 0.2], [0.31, 0.3, 0.2, 0.2], [0.5, 0.5, 0.1, 0.1]],
                 [[0.9, 0, 0], [0.8, 0, 0], [0.7, 0, 0], [0.6, 0, 0], [0, 0, 0.5]])
    return found, (np.array([0, 0, 1]), np.array([T1, T2, T3], F))


def test_iou_is_box_c_on_centre_boxes():
    others = np.array([[0.4, 0.3, 0.2, 0.2], [0.9, 0.9, 0.1, 0.1]], F)
    iou = darknet_iou(np.array([T1, [0.5, 0.5, 0.2, 0.2]], F), others)
    assert iou.dtype == np.float32 and iou.shape == (2, 2)
    assert iou[0, 0] == pytest.approx(1 / 3, abs=1e-6) and iou[0, 1] == 0 and iou[1, 0] == 0


@pytest.mark.parametrize("points, ap", [(0, 5 / 6), (11, (6 + 5 * 2 / 3) / 11), (101, (51 + 50 * 2 / 3) / 101)])
def test_ap_tp_fp_and_the_mean_over_every_named_class(points, ap):
    # class a, score order TP, FP, TP, FP (a duplicate of T1): precision 1, 1/2, 2/3, 1/2 at recall 1/2, 1/2, 1, 1
    found, truth = one_image()
    result = darknet_map([found], [truth], NAMES, points)
    assert result.ap.tolist() == pytest.approx([ap, 0, 0], abs=1e-12)  # b: no detection; c: no truth
    assert result.map == pytest.approx(ap / 3, abs=1e-12)
    assert (result.tp, result.fp, result.fn) == (2, 3, 1)
    assert result.class_tp.tolist() == [2, 0, 0] and result.class_fp.tolist() == [2, 0, 1]
    assert (result.detections_count, result.unique_truth_count) == (5, 3)
    assert (result.precision, result.recall, result.f1) == pytest.approx((0.4, 2 / 3, 0.5), abs=1e-6)
    assert result.average_iou == pytest.approx((1 + 0.6) / 5, abs=1e-6)  # the TPs' IoUs over TP + FP


def test_a_tp_at_the_threshold_is_the_images_first_detection_of_its_truth_whatever_its_score():
    # in Darknet's detection order a 0.1 box matches the truth first: the 0.9 box on the same truth is then an FP
    # at conf_thresh (and the average IoU 0), though it is the TP of the score-sorted PR curve (AP 1)
    found = dets([[0.5, 0.5, 0.2, 0.2], [0.52, 0.5, 0.2, 0.2]], [[0.1], [0.9]])
    result = darknet_map([found], [(np.array([0]), np.array([[0.5, 0.5, 0.2, 0.2]], F))], ["a"], 0)
    assert (result.tp, result.fp, result.fn, result.average_iou) == (0, 1, 1, 0)
    assert result.ap.tolist() == [1.0]


def test_a_detection_takes_the_truth_of_its_class_with_the_highest_iou():
    found = dets([[0.5, 0.5, 0.2, 0.2]], [[0, 0.9]])
    truth = (np.array([0, 1, 1]), np.array([[0.5, 0.5, 0.2, 0.2], [0.52, 0.5, 0.2, 0.2], [0.51, 0.5, 0.2, 0.2]], F))
    result = darknet_map([found], [truth], ["a", "b"], 0)
    assert result.class_tp.tolist() == [0, 1]
    assert result.average_iou == pytest.approx(0.038 / 0.042, abs=1e-6)  # IoU with the 0.51 box, the best of b's
    assert result.ap.tolist() == pytest.approx([0, 0.5])


def test_nms_sort_zeroes_per_class_and_leaves_the_array_in_the_last_classs_order():
    # A-B and B-C overlap (IoU 0.54 > 0.45), A-C do not (0.25): B falls to A in class 0 and so cannot remove C;
    # in class 1 B alone scores. The zero-objectness row is swapped to the end and left alone.
    a, b, c = [0.30, 0.5, 0.2, 0.2], [0.36, 0.5, 0.2, 0.2], [0.42, 0.5, 0.2, 0.2]
    found = DarknetDetections(np.array([a, a, b, c], F), np.array([0, 0.9, 0.8, 0.7], F),
                              np.array([[0.3, 0.3], [0.9, 0], [0.8, 0.6], [0.7, 0]], F))
    out = darknet_nms(found, 0.45)
    assert out.boxes.tolist() == np.array([b, a, c, a], F).tolist()
    assert out.probs.tolist() == np.array([[0, 0.6], [0.9, 0], [0.7, 0], [0.3, 0.3]], F).tolist()


def test_the_cfgs_nms_kind_decides_the_suppression_as_box_c_says():
    # two boxes side by side: IoU 1/3 against DIoU 1/3 - (0.1^2 / (0.3^2 + 0.2^2))^0.6
    a, b = [0.30, 0.5, 0.2, 0.2], [0.40, 0.5, 0.2, 0.2]
    boxes = np.array([a, b], F)
    expected = 1 / 3 - (0.01 / 0.13) ** 0.6
    assert darknet_iou(boxes, boxes)[0, 1] == pytest.approx(1 / 3, abs=1e-6)
    assert darknet_diou(boxes, boxes, 0.6)[0, 1] == pytest.approx(expected, abs=1e-6)
    assert darknet_diou(boxes, boxes, 0.6)[0, 0] == pytest.approx(1.0)  # the same box: d = 0
    found = DarknetDetections(boxes, np.array([0.9, 0.8], F), np.array([[0.9], [0.8]], F))
    assert darknet_nms(found, 0.3).probs[:, 0].tolist() == pytest.approx([0.9, 0])  # IoU 0.333 > 0.3
    assert darknet_nms(found, 0.3, "greedynms").probs[:, 0].tolist() == pytest.approx([0.9, 0.8])  # 0.118
    assert darknet_nms(found, 0.1, "diounms", 0.6).probs[:, 0].tolist() == pytest.approx([0.9, 0])
    assert darknet_nms(found, 0.1, "diounms", 2.0).probs[:, 0].tolist() == pytest.approx([0.9, 0])  # 0.327 > 0.1
    assert darknet_nms(found, 0.33, "diounms", 2.0).probs[:, 0].tolist() == pytest.approx([0.9, 0.8])  # 0.327


def test_the_map_reads_nms_kind_from_the_last_yolo_layer():
    from detect.darknet.model import Darknet
    from detect.evaluation.darknet_map_run import nms_kind

    cfg = shared_path("darknet-cfg", "yolov4-tiny.cfg")
    if not cfg.is_file():
        pytest.skip("../shared is absent")
    assert nms_kind(Darknet(str(cfg))) == ("greedynms", 0.6)
    assert nms_kind(Darknet(str(shared_path("darknet-cfg", "yolov3-tiny.cfg")))) == ("default", 0.6)


def test_rows_become_darknet_detections_with_its_thresholds_and_box_correction():
    rows = np.array([[208, 208, 104, 52, 0.005, 0.9, 0.9],  # objectness not above 0.005: no detection
                     [208, 208, 104, 52, 0.5, 0.01, 0.5]], F)  # 0.5 * 0.01 is the threshold itself: class dropped
    stretched = darknet_detections(rows, (800, 400), (416, 416))
    assert stretched.boxes.tolist() == [[0.5, 0.5, 0.25, 0.125]] and stretched.probs.tolist() == [[0, 0.25]]
    boxed = darknet_detections(rows, (800, 400), (416, 416), letter_box=True)  # 416 x 208 at row 104
    assert boxed.boxes.tolist() == [[0.5, 0.5, 0.25, 0.25]]
    assert darknet_order([(2, 1, 2), (1, 1, 1)]).tolist() == [0, 2, 1, 3, 4]  # cell outer, anchor inner


def test_truths_convert_as_a_yolo_label_file_reads():
    classes, boxes = truths_from_xyxy([3], [[100, 50, 300, 150]], 400, 200)
    assert classes.tolist() == [3] and boxes.tolist() == [[0.5, 0.5, 0.5, 0.5]]


def test_the_report_has_darknets_layout_and_parses_back():
    found, truth = one_image()
    result = darknet_map([found], [truth], NAMES, 11)
    text = result.report()
    assert "class_id = 0, name = a, ap = 84.85%   \t (TP = 2, FP = 2) \n" in text
    assert " for conf_thresh = 0.25, precision = 0.40, recall = 0.67, F1-score = 0.50 \n" in text
    assert " for conf_thresh = 0.25, TP = 2, FP = 3, FN = 1, average IoU = 32.00 % \n" in text
    assert "\n IoU threshold = 50 %, used 11 Recall-points \n mean average precision (mAP@0.50) = 0.282828, " \
           "or 28.28 % \n" in text
    parsed = parse_darknet_map(text)
    assert parsed["classes"][2] == ("c", 0.0, 0, 1) and parsed["map"] == 0.282828 and parsed["points"] == 11
    summary = result.as_dict()
    assert summary["map50"] == result.map and summary["per_class"]["a"] == {"ap": result.ap[0], "tp": 2, "fp": 2,
                                                                             "truths": 2}
    assert (summary["tp"], summary["fp"], summary["fn"], summary["points"]) == (2, 3, 1, 11)
    with pytest.raises(ValueError, match="not a `darknet detector map` output"):
        parse_darknet_map("rank = 0 of ranks = 10")


def test_bad_arguments_say_what_is_wrong():
    found, truth = one_image()
    with pytest.raises(ValueError, match="1 images of detections but 2 of truths"):
        darknet_map([found], [truth, truth], NAMES)
    with pytest.raises(ValueError, match="points=1"):
        darknet_map([found], [truth], NAMES, points=1)
    with pytest.raises(ValueError, match="truth class 5 out of range for 3 names"):
        darknet_map([found], [(np.array([5]), np.array([T1], F))], NAMES)


# ---- coco-tiny with the official yolov3-tiny weights, against ../shared/darknet-map ---------------------------

@pytest.fixture(scope="module")
def coco_tiny():
    from detect.darknet.load import for_inference, load_model
    from tests.support.darknet_oracles import coco_truths

    model = load_model(shared_path("darknet-cfg", "yolov3-tiny.cfg"), shared_path("weights", "yolov3-tiny.weights"),
                       exact=True).model
    truths = coco_truths(shared_path("data", "coco-tiny", "annotations", "instances_train2017.json"))
    paths = [shared_path("data", "coco-tiny", "train2017") / t.file_name for t in truths]
    names = [n for n in shared_path("darknet-cfg", "coco.names").read_text().splitlines() if n.strip()]
    references = {p: shared_path("darknet-map", f"coco-tiny-train_yolov3-tiny_points{p}.txt").read_text()
                  for p in (0, 11)}
    return for_inference(model, torch.device("cpu")), truths, paths, names, references


def test_coco_tiny_opencv_decoding_gives_darknets_figures_within_tolerance(coco_tiny):
    from detect.evaluation.darknet_map_run import model_detections
    from tests.support.darknet_oracles import coco_darknet_map

    model, truths, paths, names, references = coco_tiny
    found = model_detections(model, paths)
    for points, text in references.items():
        want, got = parse_darknet_map(text), coco_darknet_map(found, truths, names, points)
        ap_diff = np.abs(got.ap * 100 - [want["classes"][i][1] for i in range(len(names))])
        print(f"points {points}: mAP {got.map:.6f} (Darknet {want['map']:.6f}), TP/FP/FN {got.tp}/{got.fp}/{got.fn} "
              f"({want['tp']}/{want['fp']}/{want['fn']}), avg IoU {got.average_iou * 100:.2f} "
              f"({want['average_iou']:.2f}), worst class {names[ap_diff.argmax()]} by {ap_diff.max():.2f} points")
        assert abs(got.map - want["map"]) <= 0.003
        assert ap_diff.max() <= 2.0  # AP within 0.02
        assert abs(got.tp - want["tp"]) <= 3 and abs(got.fp - want["fp"]) <= 3 and abs(got.fn - want["fn"]) <= 3
        assert abs(got.average_iou * 100 - want["average_iou"]) <= 1
        assert got.unique_truth_count == want["unique_truth_count"] == 699


def test_coco_tiny_with_stb_decoding_prints_darknets_output_to_the_byte(coco_tiny):
    from detect.data.formats.darknet_image import stb_library
    from detect.evaluation.darknet_map_run import model_detections
    from tests.support.darknet_oracles import coco_darknet_map

    if stb_library() is None:
        pytest.skip("stb_image is not installed (Debian's libstb0): Darknet's exact bytes need its decoder")
    model, truths, paths, names, references = coco_tiny
    found = model_detections(model, paths, decoder="stb")
    for points, text in references.items():
        report = coco_darknet_map(found, truths, names, points).report(ranks=True)
        assert report == text[text.index("\n detections_count"):]
