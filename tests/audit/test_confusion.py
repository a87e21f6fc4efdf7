"""Which classes the model mixes up (detect.audit.confusion), on hand-made detections."""

import numpy as np
import pytest

from detect.audit.confusion import co_firing, confusion_factors
from detect.audit.evidence import AuditImage


def _image(classes, detections):
    return AuditImage(0, np.zeros((len(classes), 4)), np.array(classes, np.int64), np.zeros(len(classes), bool),
                      np.zeros((0, 4)), np.zeros(0, np.int64), np.array(detections, float).reshape(-1, 6), 640)


def _split():
    """Classes 0 bus, 1 truck, 2 horse, 3 fridge: the model scores buses as trucks too, never as horses."""
    images = []
    for k in range(20):
        x = 10.0 * k
        images.append(_image([0, 1, 2, 3], [[x, 0, x + 100, 80, 0.8, 0], [x + 2, 0, x + 101, 80, 0.4, 1],
                                            [300, 0, 400, 80, 0.9, 2], [500, 0, 560, 80, 0.7, 3]]))
    return images


def test_co_firing_sums_the_smaller_confidence_of_two_classes_on_one_box():
    counts = co_firing(_split(), 4)
    assert counts[0, 1] == counts[1, 0] == pytest.approx(20 * 0.4)
    assert counts[0, 2] == counts[2, 3] == 0 and np.trace(counts) == 0


def test_a_pair_the_model_confuses_weighs_less_than_one_it_never_does():
    images = _split()
    # bus labels seen as a truck, as a horse, and as nothing else
    factors = confusion_factors(images, 4, np.array([0, 0, 0]), np.array([1, 2, -1]))
    assert factors[0] < 0.5 < 2 < factors[1] and factors[2] == 1.0
    # a class the model never confuses with anything keeps its factor near 1 (the shrink toward the shares)
    assert 0.5 < confusion_factors(images, 4, np.array([2]), np.array([3]))[0] <= 1.0
