"""detect.evaluation.class_order: the model's classes compared with a dataset's by name, and the runner whose
class columns are the dataset's."""

import numpy as np
import pytest
import torch

from detect.evaluation.class_order import DatasetClassModel, dataset_class_order, dataset_class_probs
from tests.support.log_lines import log_lines

COCO_HEAD = ["person", "bicycle", "car", "motorbike", "aeroplane"]  # Darknet's spellings


def test_the_same_classes_in_the_same_order_need_no_mapping():
    assert dataset_class_order(COCO_HEAD, ["Person", "bicycle", "car", "motorcycle", "airplane"], "m.pt",
                               "d.yaml") is None
    assert dataset_class_order(["0", "1"], ["cat", "dog", "cow"], "m.pt", "d.yaml") is None  # no names: by index


def test_another_order_and_a_subset_are_mapped_by_name_with_one_line():
    with log_lines("detect.evaluation.class_order") as lines:
        assert dataset_class_order(COCO_HEAD, ["airplane", "car", "bicycle", "person", "motorcycle"], "m.pt",
                                   "d.yaml") == [4, 2, 1, 0, 3]
        assert dataset_class_order(COCO_HEAD, ["car", "person"], "m.pt", "d.yaml") == [2, 0]
    assert lines == ["m.pt: the model's classes are d.yaml's in another order; its detections are mapped to the "
                     "dataset's classes by name",
                     "m.pt: d.yaml has 2 of the model's 5 classes (car, person); its detections are mapped to them "
                     "by name, those of the other 3 classes dropped"]


def test_a_class_the_model_lacks_is_refused_with_the_fix():
    with pytest.raises(ValueError) as e:
        dataset_class_order(COCO_HEAD, ["car", "kangaroo", "person", "truck"], "m.pt", "d.yaml")
    assert str(e.value) == ("d.yaml's class 1 'kangaroo' is not a class of --weights m.pt (person, bicycle, car, "
                            "motorbike, aeroplane); use weights trained for these classes, or list the model's "
                            "classes that d.yaml has under `classes:` in it to evaluate those only")


class _Rows(torch.nn.Module):
    max_stride = 32

    def forward(self, x):
        return torch.arange(2 * 3 * 9, dtype=torch.float32).reshape(2, 3, 9) + x.sum()


def test_dataset_class_model_reorders_and_drops_class_columns():
    model = DatasetClassModel(_Rows().eval(), [3, 0])  # the runner's mode is kept
    rows = _Rows()(torch.zeros(1))
    out = model(torch.zeros(1))
    assert model.num_classes == 2 and model.max_stride == 32 and not model.training
    assert out.shape == (2, 3, 7)
    torch.testing.assert_close(out[..., :5], rows[..., :5])
    torch.testing.assert_close(out[..., 5:], rows[..., [8, 5]])


def test_darknet_probabilities_take_the_dataset_order():
    probs = np.array([[0.1, 0.2, 0.3, 0.4]], np.float32)
    assert dataset_class_probs(probs, [3, 1]).tolist() == [[pytest.approx(0.4), pytest.approx(0.2)]]
    assert dataset_class_probs(probs, None) is probs
