"""Every augmentation moves boxes exactly with the pixels: a property test over random boxes.

Each trial draws one random box as a white mask on black images, runs the augmentation, and compares the
augmented box with the bounding box of the augmented mask (linear interpolation blurs edges by < 1.5 px).
"""

import cv2
import numpy as np
import pytest

from detect.data.augmentation.augment import (
    AugmentConfig,
    augment_hsv,
    flip_boxes_lr,
    letterbox,
    transform_boxes,
)
from detect.data.augmentation.mosaic import build_mosaic
from detect.data.augmentation.sample_plan import geometric_augment
from detect.data.datasets import to_chw_rgb
from tests.support.masks import TOL, mask_box, mask_image, random_box, random_tiles


@pytest.mark.parametrize("use_mosaic", [True, False])
def test_geometric_augment_keeps_boxes_on_their_pixels(use_mosaic):
    size, checked = 96, 0
    for seed in range(120):
        rng = np.random.default_rng(seed)
        rotates = seed % 2 == 1  # half the trials rotate and shear, half only zoom and move
        cfg = AugmentConfig(degrees=float(rng.uniform(0, 45)) * rotates, translate=0.2, scale=0.6,
                            shear=float(rng.uniform(0, 10)) * rotates, min_box_size=2.0, min_area_ratio=0.1)
        images, boxes, classes, original = random_tiles(rng, size, 4 if use_mosaic else 1)
        out, kept, kept_classes, matrix = geometric_augment(rng, images, boxes, classes, size, cfg)
        assert out.shape == (size, size, 3) and out.dtype == np.uint8
        seen = mask_box(out)
        if len(kept):
            checked += 1
            assert kept_classes.tolist() == [7]
            assert seen is not None, f"seed {seed}: a box was kept but no pixel of it is visible"
            inside = (kept[0] > TOL).all() and (kept[0] < size - TOL).all()
            if inside or not rotates:
                np.testing.assert_allclose(kept[0], seen, atol=TOL, err_msg=f"seed {seed}")
            else:  # a rotated box cut by the frame: its axis-aligned box can only be larger than the pixels
                assert (kept[0, :2] <= seen[:2] + TOL).all() and (kept[0, 2:] >= seen[2:] - TOL).all()
            assert (kept >= 0).all() and (kept <= size).all()
        elif seen is not None and not use_mosaic:  # (mosaic offsets: see the build_mosaic test)
            # dropped: what is left must be too thin or too small a part of the box before clipping
            reference = transform_boxes(original, matrix)[0]
            ref_area = (reference[2] - reference[0]) * (reference[3] - reference[1])
            sides = seen[2:] - seen[:2]
            assert sides.min() <= cfg.min_box_size + 2 * TOL or \
                sides.prod() <= cfg.min_area_ratio * ref_area + 2 * TOL * sides.sum(), f"seed {seed}"
    assert checked > 40  # most trials keep their box: the test really compares boxes


def test_mosaic_canvas_boxes_match_pixels_and_full_boxes_contain_them():
    size = 64
    for seed in range(60):
        rng = np.random.default_rng(seed)
        images, boxes, _, _ = random_tiles(rng, size, 4)
        carrier = next(i for i, b in enumerate(boxes) if len(b))
        canvas, visible, full = build_mosaic(rng, size, images, boxes)
        assert canvas.shape == (2 * size, 2 * size, 3)
        seen = mask_box(canvas)
        v, f = visible[0], full[0]
        np.testing.assert_allclose(f[2:] - f[:2], boxes[carrier][0, 2:] - boxes[carrier][0, :2])
        if seen is None:  # the box fell off the canvas entirely
            assert (v[2:] - v[:2]).min() == 0
        else:
            np.testing.assert_allclose(v, seen, atol=1e-9, err_msg=f"seed {seed}")
            assert (f[:2] <= v[:2]).all() and (f[2:] >= v[2:]).all()


def test_flip_moves_boxes_with_the_image():
    rng = np.random.default_rng(0)
    for _ in range(50):
        box = random_box(rng, 64, 80)
        image = mask_image(64, 80, box)
        flipped = to_chw_rgb(image, flip_lr=True).permute(1, 2, 0).numpy()
        np.testing.assert_allclose(flip_boxes_lr(box, 80)[0], mask_box(flipped), atol=1e-6)


def test_to_chw_rgb_swaps_channels():
    image = np.zeros((4, 5, 3), dtype=np.uint8)
    image[..., 0] = 10  # blue in BGR
    chw = to_chw_rgb(image)
    assert chw.shape == (3, 4, 5) and chw[2].eq(10).all() and chw[0].eq(0).all()


def test_hsv_changes_colour_not_geometry():
    rng = np.random.default_rng(1)
    box = random_box(rng, 48, 48)
    image = mask_image(48, 48, box)
    image[..., 1] = 40  # some colour so hue and saturation have something to act on
    before = image.copy()
    cfg = AugmentConfig(hsv_h=0.5, hsv_s=0.9, hsv_v=0.9)
    changed = 0
    for _ in range(10):
        out = augment_hsv(before.copy(), rng, cfg)
        assert out.shape == before.shape
        # black stays black (value gain times 0), so the box is still exactly where it was
        assert (out[before.max(2) == 0] == 0).all()
        changed += int(not np.array_equal(out, before))
    assert changed >= 8


@pytest.mark.parametrize("shape", [(416, 416), (288, 416), (416, 320)])
def test_letterbox_mapping_is_exact(shape):
    rng = np.random.default_rng(2)
    for _ in range(30):
        h, w = int(rng.integers(100, 700)), int(rng.integers(100, 700))
        box = random_box(rng, h, w, min_side=40)
        out, ratio, (left, top) = letterbox(mask_image(h, w, box), shape)
        assert out.shape[:2] == shape
        assert ratio == pytest.approx(min(shape[0] / h, shape[1] / w))
        # centred padding of value 114
        nw, nh = round(w * ratio), round(h * ratio)
        assert left == (shape[1] - nw) // 2 and top == (shape[0] - nh) // 2
        if left > 0:
            assert (out[:, :left] == 114).all()
        if top > 0:
            assert (out[:top] == 114).all()
        expected = box[0] * ratio + np.array([left, top, left, top])
        np.testing.assert_allclose(mask_box(np.where(out == 114, 0, out)), expected, atol=1.0)
        # the inverse documented in the metas: x = (x' - left) / ratio
        back = (expected - np.array([left, top, left, top])) / ratio
        np.testing.assert_allclose(back, box[0], atol=1e-9)


def test_augment_config_rejects_bad_values():
    with pytest.raises(ValueError, match="mosaic is a probability"):
        AugmentConfig(mosaic=2)
    with pytest.raises(ValueError, match="scale must be in"):
        AugmentConfig(scale=1.5)


def test_interpolation_keeps_a_white_box_white():
    # guards mask_box: the threshold of 127 sits between black (0) and white (255) after linear resampling
    image = cv2.resize(mask_image(20, 20, np.array([[5.0, 5, 15, 15]])), (40, 40), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(mask_box(image), [10, 10, 30, 30], atol=1)


def test_letterbox_long_side_keeps_the_scale_and_borders_the_rest():
    rng = np.random.default_rng(3)
    h, w = 480, 640
    box = random_box(rng, h, w, min_side=40)
    out, ratio, (left, top) = letterbox(mask_image(h, w, box), (352, 448), long_side=416)
    assert out.shape[:2] == (352, 448) and ratio == pytest.approx(0.65)
    assert (left, top) == (16, 20)  # 448 - 416 and 352 - 312, halved
    assert (out[:, :16] == 114).all() and (out[:, 432:] == 114).all() and (out[:20] == 114).all()
    np.testing.assert_allclose(mask_box(np.where(out == 114, 0, out)), box[0] * ratio + [16, 20, 16, 20], atol=1.0)
    # a long side that would not fit is capped by the canvas
    _, capped, _ = letterbox(mask_image(h, w, box), (320, 320), long_side=416)
    assert capped == pytest.approx(0.5)


def test_axis_aligned_warp_by_resize_matches_warp_affine():
    """The crop-and-resize path gives warpAffine's pixels for the matrix it reports, which differs from the
    requested one by a shift of less than half a pixel."""
    from detect.data.augmentation.augment import warp, warp_axis_aligned

    rng = np.random.default_rng(5)
    # smooth content, so the comparison measures geometry rather than the two interpolators' rounding
    image = cv2.resize(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), (160, 120), interpolation=cv2.INTER_CUBIC)
    for trial in range(40):
        # every 5th: a zoom so near 1 that the crop keeps its size (OpenCV would copy rather than resize)
        zoom = float(rng.uniform(0.4, 1.6)) if trial % 5 else float(rng.uniform(0.997, 1.003))
        matrix = np.array([[zoom, 0, rng.uniform(-100, 60)], [0, zoom, rng.uniform(-80, 60)], [0, 0, 1]])
        out, applied = warp_axis_aligned(image, matrix, 96)
        assert out.shape == (96, 96, 3)
        assert np.abs(applied[:2, 2] - matrix[:2, 2]).max() <= 0.5 and (applied[:2, :2] == matrix[:2, :2]).all()
        reference = warp(image, applied, 96).astype(int)
        diff = np.abs(out.astype(int) - reference)
        # away from the image's own border (where warpAffine blends in the pad value), the pixels agree
        inner = (cv2.erode((reference != 114).all(2).astype(np.uint8), np.ones((5, 5))) > 0)
        if inner.any():
            assert diff[inner].mean() < 1.0 and diff[inner].max() <= 8
        assert ((out == 114).all(2) == (reference == 114).all(2)).mean() > 0.97
