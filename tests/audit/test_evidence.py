"""What one image's detections say about its labels (detect.audit.evidence), on hand-made boxes."""

import numpy as np

from detect.audit.evidence import (
    AuditImage,
    label_evidence,
    missing_candidates,
    nothing_seen,
    seen_confidence,
    suppress_overlaps,
)


def image(boxes, classes, detections, crowd=((0, 0, 0, 0),), crowd_classes=()):
    crowd = np.array(crowd, float)[:len(crowd_classes)].reshape(-1, 4)
    return AuditImage(0, np.array(boxes, float).reshape(-1, 4), np.array(classes), np.zeros(len(classes), bool),
                      crowd, np.array(crowd_classes, np.int64), np.array(detections, float).reshape(-1, 6), 640)


def test_label_evidence_reads_each_detection_by_class_and_overlap():
    im = image([[0, 0, 100, 100], [200, 0, 300, 100], [400, 0, 500, 100]], [0, 0, 1],
               [[2, 2, 98, 101, 0.9, 0],        # confirms label 0
                [240, 0, 340, 100, 0.8, 0],     # label 1 moved: IoU 0.43 with it
                [400, 0, 500, 100, 0.7, 2]])    # label 2 seen as class 2
    ev = label_evidence(im, np.array([0.95, 0.85, 0.75]))
    np.testing.assert_allclose(ev.confirm, [0.95, 0, 0])
    np.testing.assert_allclose(ev.shifted, [0, 0.85, 0])
    np.testing.assert_allclose(ev.other, [0, 0, 0.75])
    assert ev.other_det.tolist() == [-1, -1, 2] and ev.shifted_det.tolist() == [-1, 1, -1]
    np.testing.assert_allclose(ev.anything, [0.95, 0.85, 0.75])
    # the raw confidences, for the spurious statistic; the moved label's detection (IoU 0.43) counts 0.43 / 0.5
    np.testing.assert_allclose(ev.seen_conf, [0.9, 0.8 * (60 / 140) / 0.5, 0.7])
    # and of the confirming detection alone
    np.testing.assert_allclose(ev.confirm_conf, [0.9, 0, 0])


def test_nothing_seen_keeps_the_faint_detections_apart_from_none():
    # a quarter per decade: a detection at 0.002 (a real object barely seen) is not the empty region's 1.0
    np.testing.assert_allclose(nothing_seen(np.array([0.0, 1e-5, 0.001, 0.002, 0.01, 0.1, 1.0])),
                               [1.0, 1.0, 0.75, 0.6747425, 0.5, 0.25, 0.0], atol=1e-6)


def test_a_detection_over_a_group_is_the_nearest_labels_only():
    # one box over two side-by-side labels: it may be the first's true place, not also the second's
    im = image([[0, 0, 100, 100], [90, 0, 200, 100]], [0, 0], [[-50, 0, 250, 100, 0.9, 0]])  # IoU 0.33, 0.37
    ev = label_evidence(im, np.array([0.9]))
    assert ev.shifted.tolist() == [0.0, 0.9]


def test_missing_candidates_skip_labelled_and_crowded_detections_and_say_what_explains_them():
    im = image([[0, 0, 100, 100], [300, 300, 400, 400]], [0, 1],
               [[0, 0, 100, 100, 0.9, 0],      # labelled
                [40, 0, 140, 100, 0.8, 0],     # beside label 0 (IoU 0.43): explained by it as far as it is unconfirmed
                [500, 0, 600, 100, 0.7, 0],    # alone: a candidate
                [510, 300, 540, 330, 0.6, 0]],  # inside a crowd region
               crowd=[[500, 290, 640, 400]], crowd_classes=[0])
    p = np.array([0.9, 0.8, 0.7, 0.6])
    confirm = label_evidence(im, p).confirm
    rows, explained = missing_candidates(im, p, confirm)
    assert rows.tolist() == [1, 2]
    np.testing.assert_allclose(explained, [1 - 0.9, 0])


def test_suppress_overlaps_keeps_one_issue_per_object():
    boxes = np.array([[0, 0, 10, 10], [1, 0, 11, 10], [50, 50, 60, 60]], float)
    assert suppress_overlaps(boxes, np.array([0.5, 0.9, 0.4])).tolist() == [1, 2]
    assert suppress_overlaps(np.zeros((0, 4)), np.zeros(0)).tolist() == []


def test_an_other_class_detection_that_is_another_labels_object_is_not_evidence():
    # a pizza labelled on a table: the model's pizza box over the table label is the pizza label's own object
    im = image([[0, 0, 200, 200], [10, 10, 190, 190]], [0, 1], [[10, 10, 190, 190, 0.9, 1]])
    ev = label_evidence(im, np.array([0.9]))
    assert ev.other.tolist() == [0.0, 0.0] and ev.other_det.tolist() == [-1, -1]
    # without the pizza label, the same box is the table label's other class
    alone = image([[0, 0, 200, 200]], [0], [[10, 10, 190, 190, 0.9, 1]])
    assert label_evidence(alone, np.array([0.9])).other.tolist() == [0.9]


def test_a_detection_that_grazes_a_box_counts_as_little_as_it_overlaps():
    det = np.array([[0, 0, 100, 100, 0.6, 0], [0, 0, 100, 100, 0.2, 3]], float)
    iou = np.array([[0.25, 0.6], [0.05, 0.05], [0.5, 0.1]])
    # IoU 0.25: half of 0.6, against 0.2 at full overlap; below 0.1 nothing is seen; at 0.5 the whole confidence
    np.testing.assert_allclose(seen_confidence(iou, det), [0.3, 0.0, 0.6])
