"""detect.data.formats.darknet_image: Darknet's resize_image and letterbox_image, value for value against a loop
transcription of image.c, its quirks included; the byte-to-float rule; the decoders."""

import numpy as np
import pytest

from detect.data.formats.darknet_image import (
    darknet_floats,
    darknet_letterbox,
    darknet_resize,
    letterbox_size,
    read_rgb,
    stb_library,
)
from tests.conftest import shared_path

F = np.float32


def loop_resize(im: np.ndarray, w: int, h: int) -> np.ndarray:
    """image.c resize_image line by line on a CHW float32 image, every value a float32 scalar."""
    c_count, height, width = im.shape
    if (width, height) == (w, h):
        return im.copy()
    resized = np.zeros((c_count, h, w), F)
    part = np.zeros((c_count, height, w), F)
    w_scale = F(width - 1) / F(w - 1)
    h_scale = F(height - 1) / F(h - 1)
    for k in range(c_count):
        for r in range(height):
            for c in range(w):
                if c == w - 1 or width == 1:
                    val = im[k, r, width - 1]
                else:
                    sx = F(c) * w_scale
                    ix = int(sx)
                    dx = sx - F(ix)
                    val = (F(1) - dx) * im[k, r, ix] + dx * im[k, r, ix + 1]
                part[k, r, c] = val
    for k in range(c_count):
        for r in range(h):
            sy = F(r) * h_scale
            iy = int(sy)
            dy = sy - F(iy)
            for c in range(w):
                resized[k, r, c] = (F(1) - dy) * part[k, iy, c]
            if r == h - 1 or height == 1:
                continue
            for c in range(w):
                resized[k, r, c] = resized[k, r, c] + dy * part[k, iy + 1, c]
    return resized


def hwc(chw: np.ndarray) -> np.ndarray:
    return chw.transpose(1, 2, 0)


@pytest.mark.parametrize("size, out", [((5, 7), (4, 9)), ((13, 11), (6, 6)), ((9, 20), (31, 3)), ((1, 6), (4, 3)),
                                       ((6, 1), (3, 5)), ((3, 4), (4, 42))])
def test_darknet_resize_equals_a_loop_transcription_of_resize_image(size, out):
    rng = np.random.default_rng(sum(size) + sum(out))
    image = rng.random((3, *size), dtype=F)
    w, h = out
    got = darknet_resize(hwc(image), w, h)
    assert got.dtype == np.float32 and got.shape == (h, w, 3)
    assert np.array_equal(got, hwc(loop_resize(image, w, h)))


def test_the_last_row_keeps_only_its_upper_weight_when_the_scale_rounds_below_the_border():
    # 3 rows to 42: 41 * float32(2 / 41) is 1.99999988, so the last output row is (1 - 0.99999988) * row 1
    image = np.full((3, 4, 3), 0.5, F)
    out = darknet_resize(image, 4, 42)
    assert np.allclose(out[:-1], 0.5) and 0 < out[-1].max() < 1e-6


def test_bytes_become_floats_as_load_image_stb_divides():
    image = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    floats = darknet_floats(image)
    assert floats.dtype == np.float32 and floats[0, 1, 0] == F(1 / 255) and floats[-1, -1, 0] == 1
    assert np.array_equal(darknet_resize(image, 8, 8), darknet_resize(floats, 8, 8))
    assert np.array_equal(darknet_resize(image, 16, 16), floats)  # the same size: a copy


def test_letterbox_resizes_into_a_grey_canvas_at_integer_offsets():
    rng = np.random.default_rng(1)
    image = rng.random((4, 8, 3), dtype=F)  # 8 wide, 4 high into 6 x 6: 6 x 3 at row 1
    assert letterbox_size(8, 4, 6, 6) == (6, 3) and letterbox_size(4, 8, 6, 6) == (3, 6)
    assert letterbox_size(500, 375, 416, 416) == (416, 312)
    out = darknet_letterbox(image, 6, 6)
    assert np.all(out[[0, 4, 5]] == F(0.5))
    assert np.array_equal(out[1:4], hwc(loop_resize(image.transpose(2, 0, 1).copy(), 6, 3)))


def test_read_rgb_ignores_exif_as_darknet_and_applies_it_when_asked(tmp_path):
    from tests.support.corpus import exif_rotated_jpeg

    path = tmp_path / "exif.jpg"
    path.write_bytes(exif_rotated_jpeg(h=40, w=60))  # stored 60 wide, orientation 6: 40 wide upright
    assert read_rgb(path).shape == (40, 60, 3)
    assert read_rgb(path, exif="apply").shape == (60, 40, 3)
    with pytest.raises(ValueError, match="exif='apply' needs decoder='opencv'"):
        read_rgb(path, decoder="stb", exif="apply")
    with pytest.raises(ValueError, match="exif='upright': use 'ignore'"):
        read_rgb(path, exif="upright")


def test_read_rgb_names_a_missing_file_and_an_unknown_decoder(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        read_rgb(tmp_path / "missing.jpg")
    with pytest.raises(ValueError, match="'opencv' or 'stb'"):
        read_rgb(tmp_path / "missing.jpg", decoder="pil")


def test_stb_and_opencv_decode_a_coco_jpeg_within_a_few_levels():
    path = min(shared_path("data", "coco-tiny", "train2017").glob("*.jpg"))
    if stb_library() is None:
        pytest.skip("stb_image is not installed (Debian's libstb0)")
    ours, stb = read_rgb(path).astype(int), read_rgb(path, decoder="stb").astype(int)
    assert ours.shape == stb.shape and ours.shape[2] == 3
    assert np.abs(ours - stb).max() <= 4 and np.mean(ours != stb) < 0.05
