"""The audit's scores on scenes whose errors are known (tests/support/audit_scenes)."""

import dataclasses

import numpy as np

from detect.audit.scoring import KINDS, ScoringSettings, find_issues
from detect.ops.boxes_np import box_iou
from tests.support.audit_scenes import audit_scene


def test_each_kind_of_error_is_found_first_with_the_models_suggestion():
    images, errors = audit_scene()
    issues = find_issues(images, 3, 416)
    top = issues[:4]
    assert sorted(i.kind for i in top) == sorted(KINDS)
    for issue in top:
        image, box, true_class = errors[issue.kind]
        assert issue.image == image
        assert box_iou(np.array([issue.box]), box[None])[0, 0] > 0.9
        assert issue.score > 0.5
    by_kind = {i.kind: i for i in top}
    assert by_kind["class"].suggested_class == errors["class"][2]  # the class it was before the relabelling
    assert by_kind["missing"].suggested_class == errors["missing"][2]
    moved_to = np.array([by_kind["box"].suggested_box])
    assert box_iou(moved_to, images[1].boxes[1:]).max() < 0.1  # the model's box is the object's, not another's
    assert by_kind["spurious"].suggested_box is None
    # what follows the four is far less likely
    assert all(i.score < 0.5 * min(t.score for t in top) for i in issues[4:])


def test_the_spurious_score_follows_the_faintest_detections():
    # beside the invented label, two real labels the model sees only faintly, at 0.002 and 0.03: one calibration
    # bin (its chance the same for both), but a decade apart. The other images hold faint false detections, as a
    # real model's do. The less the model sees under a label, the likelier it is spurious; nothing at all most.
    images, errors = audit_scene()
    index, invented, _ = errors["spurious"]
    rng = np.random.default_rng(5)
    for n, im in enumerate(images):
        if n != index:
            xy = rng.uniform(0, 560, (4, 2))
            noise = np.concatenate([xy, xy + 60, rng.uniform(0.001, 0.04, (4, 1)), rng.integers(0, 3, (4, 1))], 1)
            images[n] = dataclasses.replace(im, detections=np.concatenate([im.detections, noise]))
    faint = np.array([[20.0, 10.0, 100.0, 130.0], [120.0, 10.0, 200.0, 130.0]])
    im = images[index]
    images[index] = dataclasses.replace(
        im, boxes=np.concatenate([im.boxes, faint]), classes=np.concatenate([im.classes, [2, 2]]),
        difficult=np.zeros(len(im.classes) + 2, bool),
        detections=np.concatenate([im.detections, [[*(faint[0] + 3), 0.002, 2], [*(faint[1] + 3), 0.03, 2]]]))
    scores = {tuple(i.box): i.score for i in find_issues(images, 3, 416, ScoringSettings(min_score=0.0))
              if i.image == index and i.kind == "spurious"}
    assert scores[tuple(invented)] > 0.5
    assert scores[tuple(invented)] > scores[tuple(faint[0])] > 1.3 * scores[tuple(faint[1])]


def test_scores_are_chances_and_the_list_is_sorted():
    images, _ = audit_scene()
    issues = find_issues(images, 3, 416, ScoringSettings(min_score=0.0))
    scores = np.array([i.score for i in issues])
    assert ((scores >= 0) & (scores <= 1)).all()
    assert (np.diff(scores) <= 0).all()
    assert len(find_issues(images, 3, 416, ScoringSettings(min_score=0.3))) == (scores >= 0.3).sum()


def test_a_clean_split_seen_fully_has_no_likely_issue():
    images, errors = audit_scene()
    clean = list(images)
    # take the errors out again: image 0 gets its label back, 1 and 2 their true labels, 3 loses the invented one
    for kind, (index, box, cls) in errors.items():
        im = images[index]
        if kind == "missing":
            clean[index] = dataclasses.replace(im, boxes=np.concatenate([box[None], im.boxes]),
                                               classes=np.concatenate([[cls], im.classes]),
                                               difficult=np.zeros(len(im.classes) + 1, bool))
        elif kind == "spurious":
            clean[index] = dataclasses.replace(im, boxes=im.boxes[:-1], classes=im.classes[:-1],
                                               difficult=im.difficult[:-1])
        else:
            boxes, classes = im.boxes.copy(), im.classes.copy()
            boxes[0] = im.detections[0, :4]
            classes[0] = cls
            clean[index] = dataclasses.replace(im, boxes=boxes, classes=classes)
    assert [i for i in find_issues(clean, 3, 416) if i.score >= 0.3] == []


def test_difficult_labels_are_never_flagged_and_crowds_hide_detections():
    images, errors = audit_scene()
    spurious_image = errors["spurious"][0]
    im = images[spurious_image]
    images[spurious_image] = dataclasses.replace(im, difficult=np.array([False, False, False, True]))
    missing_image, box, cls = errors["missing"]
    im = images[missing_image]
    images[missing_image] = dataclasses.replace(im, crowd=box[None] + [-5, -5, 5, 5], crowd_classes=np.array([cls]))
    kinds = {i.kind for i in find_issues(images, 3, 416) if i.score > 0.5}
    assert kinds == {"box", "class"}


def test_both_methods_rank_the_injected_errors_first():
    images, _ = audit_scene(seed=3)
    for method in ("likelihood", "product"):
        top = find_issues(images, 3, 416, ScoringSettings(method=method, min_score=0.0))[:4]
        assert sorted(i.kind for i in top) == sorted(KINDS), method


def test_a_label_on_nothing_with_a_stray_box_beside_it_is_spurious_not_moved():
    # a faint box of the label's class grazes the invented label (IoU 0.23), as a model that fires everywhere
    # puts beside empty regions: unconfirmed either way, the label is one on nothing, not one moved off its object
    images, errors = audit_scene()
    index, invented, cls = errors["spurious"]
    im = images[index]
    stray = [invented[0] + 50, invented[1], invented[2] + 50, invented[3], 0.05, cls]
    images[index] = dataclasses.replace(im, detections=np.concatenate([im.detections, [stray]]))
    flagged = [i for i in find_issues(images, 3, 416) if i.image == index and i.box == tuple(invented)]
    assert [i.kind for i in flagged] == ["spurious"] and flagged[0].score > 0.1
