from detect.data.augmentation.augment_config import AugmentConfig

"""Bad input is reported (one summary line, a log file of offenders) and skipped, never a crash."""


import numpy as np
import pytest

from detect.data.formats.sources import open_source
from detect.data.formats.spec import spec_from_dict
from detect.data.loader import build_eval_loader, build_train_loader
from detect.data.records.cache import issues_log_for
from detect.data.records.images import load_image
from tests.support.corpus import jpeg_bytes, write_corpus
from tests.support.log_lines import log_lines


def yolo_spec(root, names=("a", "b", "c")):
    return spec_from_dict({"format": "yolo", "path": str(root), "train": "images/train",
                           "val": "images/train", "names": list(names)}, str(root / "corpus.yaml"))


@pytest.fixture
def corpus(tmp_path):
    expected = write_corpus(tmp_path / "ds")
    return yolo_spec(tmp_path / "ds"), tmp_path / "cache", expected


def test_bad_files_are_counted_listed_and_skipped(corpus):
    spec, cache_dir, expected = corpus
    with log_lines("detect.data.records.cache") as lines:
        source = open_source(spec, "train", cache_dir)
    counts = {k: v for k, v in source.report.counts.items() if v}
    assert counts == expected
    kept = sorted(r.path.rsplit("/", 1)[1] for r in source.records)
    assert kept == sorted(["good.jpg", "background.jpg", "bad_class.jpg", "non_finite.jpg", "outside.jpg",
                           "zero_area.jpg", "duplicate.jpg", "exif.jpg", "gray.png", "rgba.png", "deep16.png"])
    by_name = {r.path.rsplit("/", 1)[1]: r for r in source.records}
    assert len(by_name["background.jpg"].classes) == 0
    assert by_name["bad_class.jpg"].classes.tolist() == [0]
    assert by_name["duplicate.jpg"].classes.tolist() == [0, 1]
    # the small overshoot (x1 = -0.19 px, within the tolerance) was clipped, not dropped
    np.testing.assert_allclose(by_name["outside.jpg"].boxes, [[0.0, 19.2, 6.848, 28.8]], atol=1e-4)
    # one summary line with counts per kind, naming the log file that lists every offender
    summary = [ln for ln in lines if "skipped images" in ln]
    assert len(summary) == 1 and "2 corrupt" in summary[0] and "1 empty_file" in summary[0]
    assert "2 unsupported_format" in summary[0] and "1 duplicate" in summary[0]
    log_text = issues_log_for(next((cache_dir / "labels").glob("*.npz"))).read_text()
    for name in ("truncated.jpg", "corrupt.jpg", "empty.jpg", "animation.gif", "bad_class.txt", "syntax.txt"):
        assert name in log_text


def test_converted_images_decode_at_their_probed_size(corpus):
    spec, cache_dir, _ = corpus
    source = open_source(spec, "train", cache_dir)
    by_name = {r.path.rsplit("/", 1)[1]: r for r in source.records}
    exif = by_name["exif.jpg"]
    assert (exif.width, exif.height) == (40, 60)  # stored 60 x 40, orientation 6 turns it upright
    np.testing.assert_allclose(exif.boxes, [[10, 0, 30, 30]], atol=1e-4)
    for name in ("exif.jpg", "gray.png", "rgba.png", "deep16.png"):
        r = by_name[name]
        image = load_image(r.path)
        assert image.shape == (r.height, r.width, 3) and image.dtype == np.uint8
    assert load_image(by_name["deep16.png"].path).max() == 40000 // 256


def test_loaders_run_over_the_corpus(corpus):
    spec, cache_dir, _ = corpus
    loader = build_train_loader(spec, 64, 3, AugmentConfig(), 0, 32, 0, 1, seed=0, cache_dir=cache_dir)
    assert sum(len(paths) for _, _, paths in loader.epoch(0)) == 9  # 11 usable images, whole batches of 3
    metas = [m for _, _, ms in build_eval_loader(spec, "val", 64, 4, 0, 32, 0, 1, cache_dir=cache_dir) for m in ms]
    assert len(metas) == 11
    gt = build_eval_loader(spec, "val", 64, 4, 0, 32, 0, 1, cache_dir=cache_dir).dataset.source.coco_ground_truth()
    assert len(gt.getImgIds()) == 11 and len(gt.getAnnIds()) == sum(len(r.classes) for r in
                                                                     open_source(spec, "val", cache_dir).records)


def test_nothing_usable_left_is_a_clear_error(tmp_path):
    images = tmp_path / "ds" / "images" / "train"
    images.mkdir(parents=True)
    (images / "a.jpg").write_bytes(jpeg_bytes()[:300])
    (images / "b.jpg").write_bytes(b"")
    with pytest.raises(ValueError, match="no usable image") as e:
        open_source(yolo_spec(tmp_path / "ds"), "train", tmp_path / "cache")
    assert ".issues.log" in str(e.value)
