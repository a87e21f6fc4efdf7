"""Augmentation painted on the device (here on CPU tensors, as CI runs it) against the host pipeline: the same
boxes to the bit, the same pixels within interpolation rounding, through the loader's workers too."""

import numpy as np
import pytest
import torch

from detect.data.augmentation.augment_config import AugmentConfig
from detect.data.augmentation.device_augment import DeviceBatch, output_window
from detect.data.augmentation.device_paint import paint_batch, paint_uint8
from detect.data.datasets import TrainDataset, collate_train, collate_train_device
from detect.data.loader import build_train_loader, open_split
from tests.conftest import ROOT

# affine warps with rotation and shear (warpAffine / warpPerspective on the host), every extra on
WARPED = AugmentConfig(degrees=10, shear=3, perspective=0.0005, flipud=0.5, mosaic9=0.5, mixup=0.5)
# the defaults: zoom and shift only, which the host paints as a resized crop (its edges replicate the image's
# border pixel where the warp blends it with the grey border, so a one-pixel seam around each image differs)
DEFAULTS = AugmentConfig()


def _pair(source, size, cfg, keys):
    host = TrainDataset(source, size, cfg, seed=5, buffer_images=256)
    device = TrainDataset(source, size, cfg, seed=5, buffer_images=256)
    device.on_device = True
    return collate_train([host[k] for k in keys]), collate_train_device([device[k] for k in keys])


def _differences(host_batch, device_batch) -> torch.Tensor:
    painted = paint_uint8(device_batch[0])
    assert painted.dtype == torch.uint8 and painted.shape == host_batch[0].shape
    return (painted.int() - host_batch[0].int()).abs()


@pytest.mark.parametrize("cfg,seam", [(WARPED, False), (DEFAULTS, True)])
def test_device_painting_matches_the_host_pipeline_on_synthetic_images(small_synthetic, cfg, seam):
    spec, cache_dir = small_synthetic
    source = open_split(spec, "train", cache_dir)
    keys = [(epoch, index) for epoch in (0, 3) for index in range(len(source.records))]
    host, device = _pair(source, 64, cfg, keys)
    assert torch.equal(host[1], device[1]) and host[2] == device[2]  # boxes and classes: bit for bit
    diff = _differences(host, device)
    print(f"{len(keys)} samples: mean |diff| {diff.float().mean():.3f}, > 2 levels {(diff > 2).float().mean():.4%}, "
          f"max {int(diff.max())}")
    assert diff.float().mean() < 0.6
    if seam:
        assert (diff > 2).float().mean() < 0.02
    else:
        assert (diff > 2).float().mean() < 0.002 and int(diff.max()) <= 8


def test_device_painting_matches_the_host_pipeline_on_coco_images(shared):
    shared("data", "coco-tiny")
    source = open_split(ROOT / "data" / "coco-tiny.yaml", "train")
    keys = [(1, index) for index in range(0, 80, 10)]
    for cfg in (WARPED, DEFAULTS):
        host, device = _pair(source, 416, cfg, keys)
        assert torch.equal(host[1], device[1])
        diff = _differences(host, device)
        print(f"coco-tiny at 416: mean |diff| {diff.float().mean():.3f}, > 2 levels "
              f"{(diff > 2).float().mean():.4%}, max {int(diff.max())}")
        assert diff.float().mean() < 0.5 and (diff > 2).float().mean() < 0.01


def test_only_the_window_the_output_reads_is_sent():
    # zoom 2 around the canvas centre: the output reads a quarter of the 2S canvas, plus one pixel of margin
    size = 100
    to_canvas = np.array([[0.5, 0, 75], [0, 0.5, 75], [0, 0, 1]], dtype=np.float64)
    assert output_window(to_canvas, size, (200, 200)) == (74, 74, 126, 126)
    # zoom 1/2: the whole canvas and no more
    assert output_window(np.diag([2.0, 2.0, 1.0]), size, (200, 200)) == (0, 0, 200, 200)
    # entirely off the canvas: an empty window
    x0, y0, x1, y1 = output_window(np.array([[1, 0, 500], [0, 1, 0], [0, 0, 1.0]]), size, (200, 200))
    assert x1 == x0


def test_device_batches_through_loader_workers_equal_in_process_ones(small_synthetic):
    spec, cache_dir = small_synthetic
    loaders = [build_train_loader(spec, 64, 5, WARPED, workers, 32, 0, 1, seed=2, cache_dir=cache_dir,
                                  on_device=True) for workers in (0, 2)]
    host = build_train_loader(spec, 64, 5, WARPED, 0, 32, 0, 1, seed=2, cache_dir=cache_dir)
    try:
        in_process, from_workers = (list(loader.epoch(1)) for loader in loaders)
        host_batches = list(host.epoch(1))
    finally:
        for loader in (*loaders, host):
            loader.close()
    assert len(in_process) == len(from_workers) == len(host_batches) == 4
    for (a, ta, pa), (b, tb, pb), (h, th, ph) in zip(in_process, from_workers, host_batches):
        assert isinstance(a, DeviceBatch) and isinstance(b, DeviceBatch) and len(b) == 5
        assert torch.equal(paint_uint8(a), paint_uint8(b))  # the shared-memory pixel buffer arrives whole
        assert torch.equal(ta, tb) and torch.equal(ta, th) and pa == pb == ph
        model_input = paint_batch(b, torch.device("cpu"))
        assert model_input.dtype == torch.float32 and 0 <= float(model_input.min()) and float(model_input.max()) <= 1
