"""weights/download.py's offline checks: a file at hand is checked, never fetched again; a short one is refused."""

import importlib.util

import pytest

from tests.conftest import ROOT, shared_path


def _download_module():
    spec = importlib.util.spec_from_file_location("weights_download", ROOT / "weights" / "download.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_download_checks_size_and_known_sha256(tmp_path):
    download = _download_module()
    real = shared_path("weights", "yolov3-tiny.weights")
    url, size, sha256, _ = download.FILES["yolov3-tiny.weights"]
    download.check(real, size, sha256)  # the file at hand passes both checks
    assert download.download("yolov3-tiny.weights", real.parent) == real  # present: checked, not fetched
    truncated = tmp_path / "yolov3-tiny.weights"
    truncated.write_bytes(real.read_bytes()[:1000])
    with pytest.raises(ValueError, match="1,000 bytes, expected 35,434,956"):
        download.download("yolov3-tiny.weights", tmp_path)
    with pytest.raises(KeyError, match="unknown weights 'nope'"):
        download.download("nope", tmp_path)
