"""A second model's view of the boxes (--second-opinion): what the class's labels look like to it against what
the unlabelled detections do."""

import dataclasses

import numpy as np

from detect.audit.scoring import ScoringSettings, find_issues
from detect.audit.second_opinion import AppearanceRatio, views, with_opinions
from detect.ops.boxes_np import box_iou
from tests.support.audit_scenes import audit_scene

ANIMAL, PERSON = 5, 7  # the second model's classes: what our objects look like to it, and what the false finds are


def test_a_box_is_seen_as_the_second_models_most_confident_class_on_it():
    boxes = np.array([[0, 0, 100, 100], [200, 200, 300, 300], [400, 0, 500, 100.0]])
    opinion = np.array([[2, 2, 98, 101, 0.6, 3], [0, 0, 100, 100, 0.9, 4],  # two views of box 0: the surer wins
                        [200, 200, 260, 300, 0.002, 1],  # IoU 0.6 with box 1: faint, still a view
                        [400, 0, 450, 100, 0.9, 2]])  # IoU 0.5 with box 2 is on it; box 3 has none
    boxes = np.concatenate([boxes, [[600, 600, 700, 700]]])
    assert views(boxes, opinion, num_views=9).tolist() == [4, 1, 2, 8]
    assert views(boxes, np.zeros((0, 6)), num_views=9).tolist() == [8, 8, 8, 8]


def test_the_ratio_favours_views_the_labels_have_and_shrinks_rare_classes():
    # class 0: 30 labels seen as ANIMAL; its unlabelled finds are mostly PERSON; class 1 has 2 labels only
    label_classes = np.array([0] * 30 + [1] * 2)
    label_views = np.array([ANIMAL] * 30 + [PERSON] * 2)
    found_classes = np.array([0] * 10 + [1] * 2)
    found_views = np.array([PERSON] * 8 + [ANIMAL] * 2 + [PERSON] * 2)
    ratio = AppearanceRatio(label_classes, label_views, found_classes, found_views, np.ones(12), 2, 9)
    assert ratio(np.array([0]), np.array([ANIMAL]))[0] > 3
    assert ratio(np.array([0]), np.array([PERSON]))[0] < 0.3
    # two labels say little: class 1 borrows all classes' figures, so its PERSON view stays far from 1 / 0
    assert 0.2 < ratio(np.array([1]), np.array([PERSON]))[0] < 3


def _seen_as(detections: np.ndarray, view: int) -> np.ndarray:
    """The second model's detections on the boxes of `detections`, all of class `view`."""
    return np.c_[detections[:, :4], np.full(len(detections), 0.9), np.full(len(detections), view)]


def _scene_with_false_finds():
    """The audit scene plus, in images 10-29, a confident unlabelled find of the missing object's class on an empty
    band (the model fires on something else, as surely as on its objects), and the second model's view: every real
    object (the scene's detections) ANIMAL, every false find PERSON."""
    images, errors = audit_scene()
    rng = np.random.default_rng(3)
    out, opinions = [], {}
    for im in images:
        false = np.zeros((0, 6))
        if 10 <= im.index < 30:
            false = np.array([[20.0, 400, 120, 470, rng.uniform(0.8, 0.95), errors["missing"][2]]])
        out.append(dataclasses.replace(im, detections=np.concatenate([im.detections, false])))
        opinions[im.index] = np.concatenate([_seen_as(im.detections, ANIMAL), _seen_as(false, PERSON)])
    return out, opinions, errors


def _missing(issues):
    return [i for i in issues if i.kind == "missing"]


def test_the_second_opinion_puts_the_missing_object_ahead_of_the_models_false_finds():
    images, opinions, errors = _scene_with_false_finds()
    image, box, _ = errors["missing"]
    everything = ScoringSettings(min_score=0.0)
    without = _missing(find_issues(images, 3, 416, everything))
    with_view = _missing(find_issues(with_opinions(images, opinions), 3, 416, everything))

    def is_it(issue):
        return issue.image == image and box_iou(np.array([issue.box]), box[None])[0, 0] > 0.9

    def false_finds(issues):
        return [i.score for i in issues if 10 <= i.image < 30 and i.box[1] >= 399]

    assert len(false_finds(without)) == len(false_finds(with_view)) == 20
    assert is_it(with_view[0]) and with_view[0].evidence["appearance"] > 1
    assert with_view[0].score > next(i.score for i in without if is_it(i))
    # the false finds were listed as likely missing labels; seen as something else, they drop far
    assert sum(s >= 0.1 for s in false_finds(without)) >= 2
    assert max(false_finds(with_view)) < 0.2 * max(false_finds(without))
    assert all(s < 0.1 for s in false_finds(with_view))
    # the labels' errors are still the likeliest label issues
    labels = [i for i in find_issues(with_opinions(images, opinions), 3, 416) if i.kind != "missing"]
    assert sorted((i.kind, i.image) for i in labels[:3]) == [("box", 1), ("class", 2), ("spurious", 3)]


def test_a_label_the_model_misses_but_the_second_model_sees_is_no_longer_spurious():
    images, errors = audit_scene()
    # the second model sees every real object (the scene's detections are the objects' boxes)
    opinions = {im.index: _seen_as(im.detections, ANIMAL) for im in images}
    # image 5's first object: a right label the model does not see (its detection taken away)
    missed = images[5].boxes[0]
    keep = box_iou(images[5].detections[:, :4], missed[None])[:, 0] < 0.5
    images[5] = dataclasses.replace(images[5], detections=images[5].detections[keep])
    invented_image, invented, _ = errors["spurious"]

    def spurious_score(issues, image, box):
        return next(i.score for i in issues if i.kind == "spurious" and i.image == image
                    and box_iou(np.array([i.box]), box[None])[0, 0] > 0.9)

    everything = ScoringSettings(min_score=0.0)
    before = find_issues(images, 3, 416, everything)
    after = find_issues(with_opinions(images, opinions), 3, 416, everything)
    missed_before, missed_after = spurious_score(before, 5, missed), spurious_score(after, 5, missed)
    assert missed_before > 0.3  # alone, the model's blind spot looks like an invented label
    assert missed_after < 0.25 * missed_before
    assert spurious_score(after, invented_image, invented) >= spurious_score(before, invented_image, invented) > 0.5
