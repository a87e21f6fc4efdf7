import dataclasses

import numpy as np

from detect.audit.beside import Pairs, beside_factors, pair_bands, split_pairs
from detect.audit.evidence import WINDOW_LOW, label_evidence
from detect.audit.likelihood import simulate
from tests.support.audit_scenes import audit_scene


def _pairs(label, beside) -> Pairs:
    return Pairs(np.zeros(len(label), np.int64), np.array(label, float), np.array(beside, float))


def test_pair_bands_tell_the_same_object_moved_from_an_unrelated_box():
    label = [0, 0, 100, 100]
    bands = pair_bands(_pairs([label] * 5, [[40, 0, 140, 100],     # the same size, IoU 0.43
                                            [55, 0, 155, 100],     # the same size, IoU 0.29
                                            [80, 0, 180, 100],     # the same size, IoU 0.11: a neighbour
                                            [0, 0, 70, 70],        # half the area, inside: IoU 0.49
                                            [-50, 50, 250, 250]]))  # six times the area, IoU 0.08
    # size agreement (same, another, unrelated) x 4 + overlap (under 0.25, 0.25-0.35, 0.35-0.45, above)
    assert bands.tolist() == [2, 1, 0, 7, 8]


def _busy_scene():
    """audit_scene with what a real model adds: beside each right label a detection of part of its object (its
    left 40%), and in each image a stray box of any size somewhere."""
    images, errors = audit_scene()
    rng = np.random.default_rng(5)
    for n in range(4, len(images)):
        im = images[n]
        part = im.boxes.copy()
        part[:, 2] = part[:, 0] + 0.4 * (part[:, 2] - part[:, 0])
        w, h = rng.uniform(30, 250, 2)
        x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
        extra = np.concatenate([np.concatenate([part, np.full((len(part), 1), 0.3), im.classes[:, None]], 1),
                                [[x, y, x + w, y + h, 0.3, rng.integers(3)]]])
        images[n] = dataclasses.replace(im, detections=np.concatenate([im.detections, extra]))
    return images, errors


def test_a_moved_label_reads_as_moved_and_one_beside_an_unrelated_box_as_invented():
    images, errors = _busy_scene()
    index, invented, cls = errors["spurious"]
    im = images[index]
    # beside the invented label, barely overlapping it (IoU 0.11), a detection of its class four times its size
    # (as a fine-tuned model calls a group of people one animal)
    big = [invented[0] + 40, invented[1], invented[2] + 120, invented[3] + 120, 0.9, cls]
    images[index] = dataclasses.replace(im, detections=np.concatenate([im.detections, [big]]))
    probs = [im.detections[:, 4] for im in images]
    evidence = [label_evidence(im, p, WINDOW_LOW) for im, p in zip(images, probs)]
    has, pairs = split_pairs(images, evidence)
    assert has.sum() == len(pairs.image) > 50
    factors = beside_factors(images, evidence, simulate(images, probs, 3, WINDOW_LOW), None, 3)
    starts = np.cumsum([0] + [len(im.classes) for im in images])
    moved = factors[starts[errors["box"][0]]]  # the moved label is its image's first
    beside_big = factors[starts[index] + len(images[index].classes) - 1]
    assert has[starts[index] + len(images[index].classes) - 1]
    # against the right labels (a part of their object beside them) both errors are likelier; between the two,
    # the label beside its object's size reads as moved, the one beside an unrelated box as invented
    assert moved[0] > 1.5 * moved[2] > 3, moved
    assert beside_big[2] > 2 * beside_big[0], beside_big
    assert (factors[:, 1] == 1).all()  # nothing for the class kind
    assert (factors[~has] == 1).all()  # nor where no detection is beside the label
