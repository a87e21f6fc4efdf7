"""JPEG decoding at a reduced scale: the right reduction, exact coordinates, EXIF orientation kept."""

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from detect.data.records.images import load_image, load_image_for_size


def write_jpeg(path, image_bgr, orientation=None):
    pil = Image.fromarray(image_bgr[:, :, ::-1])
    out = io.BytesIO()
    if orientation is None:
        pil.save(out, format="JPEG", quality=95)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        pil.save(out, format="JPEG", quality=95, exif=exif.tobytes())
    path.write_bytes(out.getvalue())
    return path


def marked(h, w, box):
    """Grey image with a white box (x1, y1, x2, y2) on it."""
    image = np.full((h, w, 3), 60, dtype=np.uint8)
    x1, y1, x2, y2 = box
    image[y1:y2, x1:x2] = 255
    return image


def white_box(image):
    ys, xs = np.nonzero(image[..., 0] > 157)
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], dtype=np.float64)


@pytest.mark.parametrize("long_side, factor", [(100, 8), (200, 4), (300, 2), (500, 1), (900, 1)])
def test_reduction_is_the_largest_that_keeps_the_long_side(tmp_path, long_side, factor):
    h, w, box = 603, 901, (200, 120, 520, 400)  # sizes not divisible by 8: partial blocks at the edges
    path = write_jpeg(tmp_path / "a.jpg", marked(h, w, box))
    image, scale = load_image_for_size(path, w, h, long_side)
    assert scale == 1 / factor
    assert image.shape[:2] == (-(-h // factor), -(-w // factor))
    assert max(image.shape[:2]) >= min(long_side, max(h, w))
    # the box lands where x * scale says (block averaging blurs its edges by at most a reduced pixel)
    np.testing.assert_allclose(white_box(image), np.array(box) * scale, atol=1.0)


def test_exif_orientation_is_applied_at_reduced_scale(tmp_path):
    stored = marked(400, 640, (40, 300, 200, 380))  # stored landscape; orientation 6 shows it rotated 90 cw
    path = write_jpeg(tmp_path / "r.jpg", stored, orientation=6)
    full = load_image(path)
    assert full.shape[:2] == (640, 400)
    reduced, scale = load_image_for_size(path, 400, 640, 150)
    assert scale == 0.25 and reduced.shape[:2] == (160, 100)
    np.testing.assert_allclose(white_box(reduced), white_box(full) * scale, atol=1.0)


def test_png_and_small_jpeg_decode_in_full(tmp_path):
    png = tmp_path / "a.png"
    cv2.imwrite(str(png), marked(600, 800, (10, 10, 50, 50)))
    image, scale = load_image_for_size(png, 800, 600, 100)
    assert scale == 1.0 and image.shape[:2] == (600, 800)
    small = write_jpeg(tmp_path / "s.jpg", marked(300, 400, (10, 10, 50, 50)))
    image, scale = load_image_for_size(small, 400, 300, 416)
    assert scale == 1.0 and image.shape[:2] == (300, 400)


def test_training_sample_of_a_large_photo_keeps_its_box(tmp_path):
    """End to end through the label cache and TrainDataset: a 1700 x 1100 JPEG at img 192 is decoded at 1/8
    and its label still sits on its pixels (no mosaic, no affine, no flip)."""
    from detect.data.augmentation.augment import AugmentConfig
    from detect.data.datasets import TrainDataset
    from detect.data.formats.sources import open_source
    from detect.data.formats.spec import spec_from_dict

    images, labels = tmp_path / "ds" / "images" / "train", tmp_path / "ds" / "labels" / "train"
    images.mkdir(parents=True)
    labels.mkdir(parents=True)
    w, h, box = 1700, 1100, (400, 300, 1000, 700)
    write_jpeg(images / "big.jpg", marked(h, w, box))
    cx, cy, bw, bh = (box[0] + box[2]) / 2 / w, (box[1] + box[3]) / 2 / h, (box[2] - box[0]) / w, (box[3] - box[1]) / h
    (labels / "big.txt").write_text(f"0 {cx} {cy} {bw} {bh}\n")
    spec = spec_from_dict({"path": str(tmp_path / "ds"), "format": "yolo", "train": "images/train",
                           "val": "images/train", "names": ["thing"]}, "big.yaml")
    source = open_source(spec, "train", tmp_path / "cache")
    still = AugmentConfig(mosaic=0.0, degrees=0.0, translate=0.0, scale=0.0, shear=0.0, fliplr=0.0,
                          hsv_h=0.0, hsv_s=0.0, hsv_v=0.0)
    dataset = TrainDataset(source, 192, still)
    image, resized_boxes = dataset.load_resized(0)
    assert max(image.shape[:2]) == 192 and image.shape[:2] == (124, 192)  # from the 1/8 decode, 138 x 213
    np.testing.assert_allclose(resized_boxes[0], white_box(image), atol=1.0)
    chw, targets, _ = dataset[0]
    sample = np.ascontiguousarray(chw.numpy().transpose(1, 2, 0))
    x = targets[0, 1:].numpy() * 192
    np.testing.assert_allclose([x[0] - x[2] / 2, x[1] - x[3] / 2, x[0] + x[2] / 2, x[1] + x[3] / 2],
                               white_box(sample), atol=1.5)


def test_truncated_jpeg_is_used_as_opencv_decodes_it(tmp_path):
    """A JPEG cut short decodes as cv2.imread decodes it (libjpeg fills in the end) and is probed as usable,
    with one warning; bytes after a complete JPEG's end are no truncation; a stub with no data left is corrupt."""
    from detect.data.records.images import BadImage, probe_image, probe_images
    from detect.data.records.records import BadInputReport
    from tests.support.log_lines import log_lines

    full = write_jpeg(tmp_path / "full.jpg", marked(120, 160, (20, 30, 100, 90))).read_bytes()
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(full[:len(full) * 2 // 3])
    assert cv2.imdecode(np.fromfile(str(cut), np.uint8), cv2.IMREAD_COLOR) is None  # OpenCV's memory reader
    np.testing.assert_array_equal(load_image(cut), cv2.imread(str(cut)))
    image, scale = load_image_for_size(cut, 160, 120, 60)
    assert scale == 0.5 and image.shape == (60, 80, 3)
    trailing = tmp_path / "trailing.jpg"
    trailing.write_bytes(full + b"camera maker notes")
    stub = tmp_path / "stub.jpg"
    stub.write_bytes(full[:full.index(b"\xff\xda")])  # the headers up to the image data, none of it
    report = BadInputReport()
    with log_lines("detect.data.records.images") as warnings:
        probes = probe_images([cut, trailing, stub], report)
    assert [p.notes if p else None for p in probes] == [("truncated",), (), None]
    assert [(e[0].rsplit("/", 1)[1], e[1]) for e in report.entries] == [("cut.jpg", "truncated"),
                                                                          ("stub.jpg", "corrupt")]
    assert len(warnings) == 1 and warnings[0].startswith(f"{cut}: truncated JPEG (its end is missing); used")
    with pytest.raises(BadImage, match="truncated or damaged JPEG that OpenCV cannot decode"):
        probe_image(stub)
