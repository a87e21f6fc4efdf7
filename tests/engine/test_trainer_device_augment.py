"""The trainer fed DeviceBatches (--augment-on device, painted on the CPU here): the same targets and, within
interpolation rounding, the same inputs as the host pipeline, so the same losses; plots of the first batches."""

import pytest
import torch

from detect.data.augmentation.device_augment import DeviceBatch
from detect.engine.setup import build_trainer
from detect.runtime import dist
from tests.support.training import tiny_options

HYP = "lr0: 0.02\nwarmup_epochs: 0\nwarmup_min_steps: 1\nmixup: 0.5\ndegrees: 5\n"


def _first_epoch(tmp, augment_on):
    (tmp / "hyp.yaml").write_text(HYP)
    opts = tiny_options(tmp, augment_on=augment_on, epochs=1, name=augment_on)
    trainer = build_trainer(opts, dist.init_distributed("cpu"))
    trainer.setup.evaluate_fn = None
    seen = []
    trainer.on_batch = lambda epoch, index, images, targets, paths: seen.append((images, targets))
    try:
        row = trainer.train_epoch()
    finally:
        trainer.setup.train_loader.close()
    return row, seen


def test_augment_on_device_trains_with_the_host_pipelines_targets_and_losses(tmp_path):
    host_row, host_seen = _first_epoch(tmp_path, "host")
    device_row, device_seen = _first_epoch(tmp_path, "device")
    assert all(isinstance(images, DeviceBatch) for images, _ in device_seen)
    assert all(isinstance(images, torch.Tensor) for images, _ in host_seen)
    for (_, host_targets), (_, device_targets) in zip(host_seen, device_seen):
        assert torch.equal(host_targets, device_targets)
    for key in ("box", "obj", "cls"):  # the same weights see inputs a rounding apart
        assert device_row[key] == pytest.approx(host_row[key], rel=0.02)
