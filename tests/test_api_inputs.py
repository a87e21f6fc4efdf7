"""detect.api inputs and errors: PIL images of any mode and HxWx1 arrays give the boxes of the 3-channel image,
errors name the API's arguments (not the command-line flags), and a folder given as a file says so."""

import numpy as np
import pytest
from PIL import Image

from detect.api import Detector
from tests.support.val_data import write_tiny_checkpoint


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny")
    return Detector.load(write_tiny_checkpoint(folder), device="cpu", conf=0.01), folder


def _same(a, b):
    np.testing.assert_array_equal(a.boxes, b.boxes)
    np.testing.assert_array_equal(a.scores, b.scores)
    np.testing.assert_array_equal(a.class_ids, b.class_ids)


def test_pil_images_of_every_mode_and_hxwx1_arrays_give_the_same_boxes(tiny):
    detector, _ = tiny
    rgb = np.random.default_rng(3).integers(0, 255, (48, 80, 3), dtype=np.uint8)
    from_rgb = detector(rgb, rgb=True)
    assert len(from_rgb) > 0
    _same(detector(Image.fromarray(rgb)), from_rgb)
    _same(detector(Image.fromarray(rgb).convert("RGBA")), from_rgb)  # alpha dropped
    gray = rgb[:, :, 1].copy()
    from_gray = detector(np.repeat(gray[:, :, None], 3, axis=2))
    for same_gray in (gray, gray[:, :, None], Image.fromarray(gray), Image.fromarray(gray).convert("P")):
        _same(detector(same_gray), from_gray)
    palette = Image.fromarray(rgb).quantize(16)  # mode P: its RGB conversion is the image
    _same(detector(palette), detector(np.asarray(palette.convert("RGB")), rgb=True))
    with pytest.raises(ValueError, match="PIL image of mode F"):
        detector(Image.fromarray(gray.astype(np.float32)))


def test_api_errors_name_the_apis_arguments(tiny, tmp_path):
    _, folder = tiny
    weights = folder / "tiny.pt"
    with pytest.raises(ValueError, match=r"^backend='tensorrt': choose one of auto, "):
        Detector.load(weights, device="cpu", backend="tensorrt")
    with pytest.raises(ValueError, match=r"^device must be auto, cpu, cuda or cuda:N, got 'gpu0'"):
        Detector.load(weights, device="gpu0")
    with pytest.raises(ValueError) as raised:
        Detector.load(weights, device="cpu", max_det=0)
    assert str(raised.value) == "max_det must be a positive integer, got 0"


def test_a_folder_where_a_file_is_expected_says_it_is_a_folder(tiny, tmp_path):
    detector, folder = tiny
    with pytest.raises(ValueError, match=rf"^image {tmp_path} is a folder; give its image files"):
        detector(tmp_path)
    with pytest.raises(ValueError, match=r"is a folder: stream\(\) reads a webcam index, a URL or a video file"):
        detector.stream(tmp_path)
    with pytest.raises(ValueError, match=r"^weights='.*' is a folder; give the model file \(.pt, .weights or .onnx\)"):
        Detector.load(folder, device="cpu")
