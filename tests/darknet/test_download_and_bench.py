"""weights/download.py's offline checks, and the model benchmark on a tiny cfg."""

import importlib.util

import pytest

from detect.bench import model as bench_model
from tests.conftest import ROOT, shared_path

from .test_oracle import YOLO_CFG


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


def test_model_bench_prints_parameters_gflops_and_latency(tmp_path, capsys):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(YOLO_CFG)
    assert bench_model.main(["--cfg", str(cfg), "--img", "64", "--batch-sizes", "1", "2",
                             "--device", "cpu", "--cpu-iters", "1", "--rounds", "0"]) == 0
    out = capsys.readouterr().out
    assert "parameters 1,962" in out  # 8·27 + 2·8 (BN), 21·8 + 21, 16·72 + 2·16, 21·16 + 21
    gflops = float(out.split("GFLOPs ")[1].split()[0])
    # 2 FLOPs per multiply-add of the four convs on the 64x64 input (32x32 and 16x16 maps)
    assert gflops == pytest.approx(2 * (32 * 32 * 8 * 27 + 32 * 32 * 21 * 8 + 16 * 16 * 16 * 72
                                        + 16 * 16 * 21 * 16) / 1e9, rel=1e-3)
    assert "cpu      unfused" in out and "cpu      fused" in out
