"""Class weights of the classification loss: `auto` from the label counts, a list as given, the loss scaled per
positive by its class, and a training run that uses them with repeat-factor sampling."""

import logging

import numpy as np
import pytest
import torch

from detect.engine.assign import HeadSpec
from detect.engine.class_weights import (
    MAX_WEIGHT,
    auto_class_weights,
    box_counts,
    resolve_class_weights,
)
from detect.engine.config import Hyp, LossConfig
from detect.engine.loss import YoloLoss


def test_auto_weights_are_square_root_inverse_frequency_with_box_mean_one():
    counts = np.array([100, 25, 1, 0])
    w = auto_class_weights(counts)
    raw = np.array([0.5, 1.0, 5.0])  # sqrt(median 25 / n)
    assert w[:3] == pytest.approx(raw / ((raw @ counts[:3]) / 126))
    assert w[3] == pytest.approx(1 / ((raw @ counts[:3]) / 126))  # no boxes: the neutral 1, scaled like the rest
    assert w @ counts / counts.sum() == pytest.approx(1.0)  # the class loss keeps its size
    capped = auto_class_weights(np.array([1_000_000, 1]))
    assert capped[1] / capped[0] == pytest.approx(MAX_WEIGHT / np.sqrt(500000.5 / 1_000_000))
    assert auto_class_weights(np.array([7, 7, 7])).tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_resolve_counts_boxes_and_checks_a_list(caplog):
    from detect.data.records.records import ImageRecord

    records = [ImageRecord(f"{i}.jpg", 64, 64, np.zeros((len(c), 4), np.float32), np.array(c, np.int64), i)
               for i, c in enumerate([[0, 0, 0], [0, 1], [0, 0, 0, 0, 0]])]
    assert box_counts(records, 3).tolist() == [9, 1, 0]
    assert resolve_class_weights(None, records, "abc") is None
    with caplog.at_level(logging.INFO):
        w = resolve_class_weights("auto", records, ["cat", "dog", "eel"])
    assert float(w[1] / w[0]) == pytest.approx(3.0)  # sqrt(9 / 1)
    assert "largest dog 2.50 (1 boxes)" in caplog.text
    assert resolve_class_weights((1.0, 2.0, 4.0), records, "abc").tolist() == [1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match="lists 2 weights but the data has 3 classes"):
        resolve_class_weights((1.0, 2.0), records, "abc")


def test_the_hyp_key_takes_null_auto_or_a_list():
    assert Hyp.from_dict({"class_weights": "auto"}).loss.class_weights == "auto"
    assert Hyp.from_dict({"class_weights": [1, 2.5]}).loss.class_weights == (1.0, 2.5)
    assert Hyp.from_dict({"class_weights": [1, 2.5]}).to_dict()["class_weights"] == [1.0, 2.5]
    for bad in ("often", [1, -1], [1, "x"]):
        with pytest.raises(ValueError, match="class_weights"):
            Hyp.from_dict({"class_weights": bad}, "my-hyp.yaml")


def test_a_positive_s_class_loss_is_scaled_by_its_class_weight():
    head = HeadSpec(anchors=torch.tensor([[16.0, 16.0], [32.0, 24.0]]))
    # image 0: class 1; image 1: class 0 (64x64 input, 8x8 grid, 3 classes)
    targets = torch.tensor([[0, 1, 20 / 64, 28 / 64, 16 / 64, 16 / 64], [1, 0, 40 / 64, 12 / 64, 30 / 64, 22 / 64]])
    raw = torch.randn(2, 2, 8, 8, 8, generator=torch.Generator().manual_seed(0))
    config = LossConfig(obj_balance={8: 1.0})
    plain = YoloLoss([head], config)(([raw]), targets, (64, 64))[1]
    ones = YoloLoss([head], config, torch.ones(3))(([raw]), targets, (64, 64))[1]
    assert torch.equal(plain, ones)
    only_class_1 = YoloLoss([head], config, torch.tensor([0.0, 1.0, 7.0]))(([raw]), targets[:1], (64, 64))[1]
    base_1 = YoloLoss([head], config)(([raw]), targets[:1], (64, 64))[1]
    assert torch.allclose(only_class_1[2], base_1[2]) and torch.equal(only_class_1[:2], base_1[:2])
    tripled = YoloLoss([head], config, torch.tensor([3.0, 3.0, 1.0]))(([raw]), targets, (64, 64))[1]
    assert torch.allclose(tripled[2], 3 * plain[2]) and torch.equal(tripled[:2], plain[:2])


def test_a_run_trains_with_auto_class_weights_and_repeat_factor_sampling(tmp_path, caplog):
    from detect.engine.setup import build_trainer
    from detect.runtime import dist
    from tests.support.training import tiny_options

    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    with caplog.at_level(logging.INFO):
        plain = build_trainer(tiny_options(tmp_path, epochs=1, name="plain"), ctx)
        plain.setup.train_loader.close()
        hyp_file = tmp_path / "weights-hyp.yaml"
        hyp_file.write_text(open(plain.setup.opts.hyp).read() + "class_weights: auto\n")
        trainer = build_trainer(tiny_options(tmp_path, epochs=1, plots=False, sampler="repeat-factor",
                                             repeat_thresh=1.0, hyp=str(hyp_file)), ctx)
    setup = trainer.setup
    try:
        assert setup.loss.class_weights is not None and len(setup.loss.class_weights) == len(setup.names)
        assert len(setup.train_loader) > len(plain.setup.train_loader)  # rare images repeat: more batches
        assert "repeat-factor sampling: 16 images -> ~" in caplog.text and "class weights (auto" in caplog.text
        state = trainer.fit()
        assert state.epoch == 1 and np.isfinite(state.best_fitness)
    finally:
        setup.train_loader.close()
