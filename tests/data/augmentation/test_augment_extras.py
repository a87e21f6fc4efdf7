"""Vertical flip, perspective, 9-tile mosaic and mixup: boxes checked against numbers worked out by hand and
against the pixels that moved, and the samples fixed by (seed, epoch, index) alone."""

import numpy as np
import pytest
import torch

from detect.data import datasets
from detect.data.augmentation.augment import (
    AugmentConfig,
    flip_boxes_ud,
    mixup,
    perspective_matrix,
    random_affine_matrix,
    transform_boxes,
    transform_clip_boxes,
    translation,
    warp,
)
from detect.data.augmentation.mosaic import build_mosaic
from detect.data.augmentation.sample_plan import geometric_augment, paint_geometry
from detect.data.datasets import to_chw_rgb
from detect.data.loader import build_train_loader
from tests.support.masks import TOL, mask_box, mask_image, random_box, random_tiles

ALL_ON = AugmentConfig(mixup=1.0, mosaic9=0.5, flipud=0.5, perspective=0.0005)


def test_flipud_mirrors_boxes_and_pixels_about_the_horizontal_midline():
    np.testing.assert_array_equal(flip_boxes_ud(np.array([[10.0, 20, 30, 50]]), 100), [[10, 50, 30, 80]])
    rng = np.random.default_rng(0)
    for _ in range(30):
        box = random_box(rng, 64, 80)
        flipped = to_chw_rgb(mask_image(64, 80, box), flip_ud=True).permute(1, 2, 0).numpy()
        np.testing.assert_array_equal(flip_boxes_ud(box, 64)[0], mask_box(flipped))
        both = to_chw_rgb(mask_image(64, 80, box), flip_lr=True, flip_ud=True).permute(1, 2, 0).numpy()
        x1, y1, x2, y2 = box[0]
        np.testing.assert_array_equal([80 - x2, 64 - y2, 80 - x1, 64 - y1], mask_box(both))


def test_a_flipped_sample_is_the_unflipped_one_upside_down(small_synthetic):
    """The vertical flip is the last draw of a sample, so turning it on changes nothing else."""
    spec, cache_dir = small_synthetic
    plain, flipped = (build_train_loader(spec, 64, 5, AugmentConfig(flipud=p), 0, 32, 0, 1, seed=0,
                                         cache_dir=cache_dir).dataset for p in (0.0, 1.0))
    for key in [(0, 0), (1, 5), (2, 9)]:
        (image, labels, _), (image_ud, labels_ud, _) = plain[key], flipped[key]
        assert len(labels) and torch.equal(image_ud, image.flip(1))
        expected = labels.clone()
        expected[:, 2] = 1 - labels[:, 2]  # cy; class, cx, w, h stay
        torch.testing.assert_close(labels_ud, expected, atol=1e-6, rtol=0)


def test_perspective_moves_the_four_corners_and_boxes_take_their_extent():
    # (x, y) -> (x, y) / (1 + 0.001 x + 0.002 y); the box's corners divide by 1.2, 1.3, 1.5 and 1.4:
    # (100, 50) -> (83.33, 41.67), (200, 50) -> (153.85, 38.46), (200, 150) -> (133.33, 100),
    # (100, 150) -> (71.43, 107.14)
    matrix = perspective_matrix(0.001, 0.002)
    box = np.array([[100.0, 50, 200, 150]])
    np.testing.assert_allclose(transform_boxes(box, matrix), [[500 / 7, 500 / 13, 2000 / 13, 750 / 7]], rtol=1e-12)
    # cut by a 120 px frame: the top edge (the image of y = 50) crosses x' = 120 at input x = 150, i.e. (120, 40);
    # the naive clip of the extent would keep y' = 38.46, a corner that is outside the frame
    np.testing.assert_allclose(transform_clip_boxes(box, matrix, 120), [[500 / 7, 40, 120, 750 / 7]], rtol=1e-12)
    # and OpenCV's warpPerspective puts the pixels there (corner coordinates, as the affine warps)
    seen = mask_box(warp(mask_image(200, 240, box), matrix, 120))
    np.testing.assert_allclose(seen, [500 / 7, 40, 120, 750 / 7], atol=TOL)
    # a box reaching the horizon (1 + 0.001 x + 0.002 y <= 0) has no finite image: it is dropped
    behind = perspective_matrix(-0.01, 0.0)
    assert transform_clip_boxes(np.array([[50.0, 0, 150, 10], [0, 0, 20, 10]]), behind, 120)[0].tolist() == [0] * 4


def test_perspective_is_drawn_after_the_affine_and_only_when_on():
    centre = translation(-100, -80)
    plain = random_affine_matrix(np.random.default_rng(4), 200, 160, 96, AugmentConfig(degrees=10, shear=3))
    tilted = random_affine_matrix(np.random.default_rng(4), 200, 160, 96,
                                  AugmentConfig(degrees=10, shear=3, perspective=0.0005))
    # same rotation, zoom, shear and shift: what differs is one perspective matrix on the centred input
    between = centre @ np.linalg.inv(plain) @ tilted @ np.linalg.inv(centre)
    px, py = between[2, :2]
    np.testing.assert_allclose(between, perspective_matrix(px, py), atol=1e-12)
    assert 0 < abs(px) <= 0.0005 and 0 < abs(py) <= 0.0005
    with pytest.raises(ValueError, match="perspective must be in"):
        AugmentConfig(perspective=0.01)
    for key in ("mixup", "mosaic9", "flipud"):
        with pytest.raises(ValueError, match=f"{key} is a probability"):
            AugmentConfig(**{key: 1.5})


@pytest.mark.parametrize("tiles, least", [(1, 45), (4, 15), (9, 8)])  # (9 tiles: the one box is mostly off view)
def test_perspective_keeps_boxes_on_their_pixels(tiles, least):
    size, checked = 96, 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        cfg = AugmentConfig(perspective=0.001, translate=0.2, scale=0.5, degrees=5.0)
        images, boxes, classes, _ = random_tiles(rng, size, tiles)
        out, kept, _, matrix = geometric_augment(rng, images, boxes, classes, size, cfg)
        assert matrix[2, :2].any()  # a real perspective
        seen = mask_box(out)
        if len(kept):
            checked += 1
            # the exact cut of the quadrilateral by the frame: its extent is the visible pixels' extent
            np.testing.assert_allclose(kept[0], seen, atol=TOL, err_msg=f"seed {seed}")
    assert checked > least


def test_mosaic9_places_nine_tiles_without_overlap_and_boxes_on_their_own_tile():
    size = 64
    for seed in range(40):
        rng = np.random.default_rng(seed)
        images, boxes = [], []
        for i in range(9):
            h, w = (size, int(rng.integers(size // 2, size + 1)))[::1 if rng.random() < 0.5 else -1]
            box = random_box(rng, h, w)
            image = mask_image(h, w, box)
            image[..., 1] = 10 * (i + 1)  # which tile a canvas pixel came from
            images.append(image)
            boxes.append(box)
        canvas, visible, full = build_mosaic(rng, size, images, boxes)
        assert canvas.shape == (3 * size, 3 * size, 3) and len(visible) == len(full) == 9
        tile_of = np.where(canvas[..., 1] == 114, 0, canvas[..., 1] // 10)  # 0: border
        counts = np.bincount(tile_of.ravel(), minlength=10)
        assert (counts[1:] > 0).all(), f"seed {seed}: every one of the 9 tiles shows"
        h0, w0 = images[0].shape[:2]
        assert counts[1] == h0 * w0  # the sample's own image whole, in the middle
        ys, xs = np.nonzero(tile_of == 1)
        assert (xs.min() + xs.max() + 1) // 2 in (3 * size // 2, 3 * size // 2 - 1) and ys.max() - ys.min() + 1 == h0
        for i, (v, f) in enumerate(zip(visible, full)):
            np.testing.assert_allclose(f[2:] - f[:2], boxes[i][0, 2:] - boxes[i][0, :2])  # moved, not resized
            x1, y1, x2, y2 = v.astype(int)
            assert (v >= 0).all() and (v <= 3 * size).all()
            if x2 > x1 and y2 > y1:
                assert (tile_of[y1:y2, x1:x2] == i + 1).all(), f"seed {seed}: box {i} leaves its tile"
                white = np.where((tile_of == i + 1)[..., None], canvas, 0)
                np.testing.assert_array_equal(v, mask_box(white), err_msg=f"seed {seed} tile {i}")
            else:  # cut to its cell, nothing of the box is left on the canvas
                assert not ((tile_of == i + 1) & (canvas[..., 0] > 127)).any()


def test_mosaic9_geometric_augment_keeps_boxes_inside_and_on_their_pixels():
    size, checked = 96, 0
    for seed in range(80):
        rng = np.random.default_rng(seed)
        cfg = AugmentConfig(translate=0.2, scale=0.6, degrees=float(10 * (seed % 2)))
        images, boxes, classes, _ = random_tiles(rng, size, 9)
        out, kept, kept_classes, _ = geometric_augment(rng, images, boxes, classes, size, cfg)
        assert out.shape == (size, size, 3) and (kept >= 0).all() and (kept <= size).all()
        if len(kept):
            checked += 1
            assert kept_classes.tolist() == [7]
            seen = mask_box(out)
            assert seen is not None
            np.testing.assert_allclose(kept[0], seen, atol=TOL + (seed % 2), err_msg=f"seed {seed}")
    assert checked > 15


def test_mixup_blends_with_the_drawn_ratio_and_keeps_both_box_sets():
    a, b = np.full((8, 8, 3), 200, np.uint8), np.full((8, 8, 3), 40, np.uint8)
    a[0, 0], b[0, 0] = (255, 0, 10), (0, 255, 250)
    boxes_a, boxes_b = np.array([[1.0, 1, 4, 4]]), np.array([[2.0, 3, 7, 8], [0, 0, 2, 2]])
    out, boxes, classes, ratio = mixup(np.random.default_rng(11), a, boxes_a, np.array([3]), b, boxes_b,
                                       np.array([5, 6]))
    assert ratio == np.random.default_rng(11).beta(32.0, 32.0)  # the one draw it makes
    assert 0.3 < ratio < 0.7 and ratio != 0.5
    expected = np.rint(a.astype(np.float64) * ratio + b * (1 - ratio))
    np.testing.assert_array_equal(out, expected)
    assert out[1, 1, 0] == round(200 * ratio + 40 * (1 - ratio))
    np.testing.assert_array_equal(boxes, [[1, 1, 4, 4], [2, 3, 7, 8], [0, 0, 2, 2]])
    assert classes.tolist() == [3, 5, 6]


def test_a_mixed_sample_holds_both_samples_boxes_and_blended_pixels(small_synthetic):
    spec, cache_dir = small_synthetic
    loader = build_train_loader(spec, 64, 5, AugmentConfig(mixup=1.0, fliplr=0.0, hsv_h=0, hsv_s=0, hsv_v=0),
                                0, 32, 0, 1, seed=0, cache_dir=cache_dir)
    image, labels, _ = loader.dataset[(0, 3)]
    plan = loader.dataset.plan(0, 3)
    ratio = plan.mix_ratio
    assert 0.3 < ratio < 0.7
    own_plan, other_plan = plan.geometries
    own, other = paint_geometry(own_plan, 64), paint_geometry(other_plan, 64)
    assert len(own_plan.boxes) and len(other_plan.boxes)
    expected = np.rint(own.astype(np.float64) * ratio + other * (1 - ratio))[..., ::-1].transpose(2, 0, 1)
    np.testing.assert_array_equal(image.numpy(), expected)
    want = np.concatenate([own_plan.boxes, other_plan.boxes]) / 64
    np.testing.assert_allclose(labels[:, 3:].numpy(), (want[:, 2:] - want[:, :2]), atol=1e-6)
    assert labels[:, 0].tolist() == [*own_plan.classes.tolist(), *other_plan.classes.tolist()]


def test_mosaic9_is_the_share_of_mosaics_it_says(small_synthetic, monkeypatch):
    spec, cache_dir = small_synthetic
    tiles = []
    real = datasets.plan_geometry
    monkeypatch.setattr(datasets, "plan_geometry", lambda rng, images, *a: tiles.append(len(images))
                        or real(rng, images, *a))
    for mosaic9, expected in ((1.0, {9}), (0.0, {4}), (0.5, {4, 9})):
        tiles.clear()
        loader = build_train_loader(spec, 64, 5, AugmentConfig(mosaic9=mosaic9), 0, 32, 0, 1, seed=0,
                                    cache_dir=cache_dir)
        list(loader.epoch(0))
        assert set(tiles) == expected and len(tiles) == 20


def test_samples_depend_on_seed_epoch_and_index_only(small_synthetic):
    """With every new augmentation on: the same key gives the same bytes in another dataset object that drew
    other samples before, and in loaders with 0 or 2 workers; another epoch or seed gives another sample."""
    spec, cache_dir = small_synthetic
    loaders = [build_train_loader(spec, 64, 5, ALL_ON, workers, 32, 0, 1, seed=0, cache_dir=cache_dir)
               for workers in (0, 2)]
    try:
        batches = [list(loader.epoch(1)) for loader in loaders]
        for got, want in zip(*batches):
            assert got[2] == want[2] and torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    finally:
        for loader in loaders:
            loader.close()
    keys = [(1, i) for i in range(6)]
    first = [loaders[0].dataset[k] for k in keys]
    other = build_train_loader(spec, 64, 5, ALL_ON, 0, 32, 0, 1, seed=0, cache_dir=cache_dir).dataset
    again = [other[k] for k in reversed(keys)][::-1]
    for (i1, l1, _), (i2, l2, _) in zip(first, again):
        assert torch.equal(i1, i2) and torch.equal(l1, l2)
    assert not torch.equal(first[0][0], other[(2, 0)][0])
    reseeded = build_train_loader(spec, 64, 5, ALL_ON, 0, 32, 0, 1, seed=1, cache_dir=cache_dir).dataset
    assert not torch.equal(first[0][0], reseeded[(1, 0)][0])
