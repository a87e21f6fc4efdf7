"""The model benchmark's side-by-side timing, its OpenCV child process, its backend comparison and its rows of
predict's own path on images (figures are not checked, only that every backend runs and gives the model's
rows, or a time per image)."""

import cv2
import numpy as np
import pytest
import torch

from detect import Darknet
from detect.bench import model as bench_model
from detect.bench.backends import OpenCVWorker, darknet_rows
from detect.bench.onnx_model import export_onnx_bytes
from detect.bench.timing import interleave, percentile, summarize
from tests.support.cfg_texts import YOLO_CFG
from tests.support.darknet_helpers import randomize_weights


def test_percentiles_and_summary():
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 0.5) == 3.0
    assert percentile([10.0, 20.0], 0.1) == pytest.approx(11.0)
    timing = summarize([5.0, 1.0, 4.0, 2.0, 3.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0])
    assert (timing.median, timing.p10, timing.p90, timing.runs, timing.mean) == (6.0, 2.0, 10.0, 11, 6.0)


def test_interleave_alternates_backends_and_skips_warmup():
    calls = []
    runners = {name: (lambda name=name: calls.append(name) or float(len(calls))) for name in "ab"}
    timings = interleave(runners, rounds=3, warmup=1)
    assert calls == ["a", "b"] * 4
    assert timings["a"].median == 5.0 and timings["b"].runs == 3  # a's counted passes returned 3, 5, 7


def test_darknet_rows_reorders_opencv_outputs_into_the_model_layout():
    model = Darknet(YOLO_CFG).eval()  # 48x64 input; heads of 3 anchors on 24x32 and 12x16 grids, 2 classes
    rows = torch.rand(1, 3 * 24 * 32 + 3 * 12 * 16, 7).numpy()
    outputs, start = [], 0
    for grid_h, grid_w in ((24, 32), (12, 16)):
        head = rows[0, start:start + 3 * grid_h * grid_w].reshape(3, grid_h, grid_w, 7).transpose(1, 2, 0, 3)
        head = head.reshape(-1, 7) / np.array([64, 48, 64, 48, 1, 1, 1], np.float32)  # OpenCV: y, x, anchor
        outputs.append(head)
        start += 3 * grid_h * grid_w
    assert np.abs(darknet_rows(outputs, model, 48, 64) - rows).max() < 1e-5


def _onnx_file(tmp_path):
    model = Darknet(YOLO_CFG).eval()
    randomize_weights(model)
    path = tmp_path / "small.onnx"
    path.write_bytes(export_onnx_bytes(model.fuse(), 1, 48, 64))
    x = torch.rand(1, 3, 48, 64)
    np.save(tmp_path / "x.npy", x.numpy())
    with torch.no_grad():
        return path, model(x).numpy()


def test_opencv_worker_runs_an_onnx_model_and_reports_a_missing_importer(tmp_path):
    onnx_path, expected = _onnx_file(tmp_path)
    worker = OpenCVWorker(str(tmp_path / "no-opencv-here"), tmp_path / "x.npy", 2, "onnx", [str(onnx_path)])
    try:
        assert worker.run() > 0
        (rows,) = worker.outputs(tmp_path / "out.npz")
    finally:
        worker.close()
    assert rows.shape == expected.shape and np.abs(rows - expected).max() < 1e-4
    import cv2

    if not hasattr(cv2.dnn, "readNetFromDarknet"):
        with pytest.raises(RuntimeError, match="has no Darknet importer"):
            OpenCVWorker(str(tmp_path), tmp_path / "x.npy", 2, "darknet", ["a.cfg", "a.weights"])


def test_backend_comparison_runs_every_backend_on_a_small_cfg(tmp_path, capsys):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(YOLO_CFG.replace("width=64", "width=48"))
    assert bench_model.main(["--cfg", str(cfg), "--img", "48", "--batch-sizes", "1", "--device", "cpu",
                             "--cpu-iters", "1", "--rounds", "2", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 threads each" in out and "cpu      fused-packed" in out
    diffs = {}
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0] in ("torch-unfused", "torch-fused", "torch-packed", "ncnn", "openvino", "onnxruntime",
                                    "opencv-onnx"):
            diffs[fields[0]] = float(fields[5])
    assert set(diffs) == {"torch-unfused", "torch-fused", "torch-packed", "ncnn", "openvino", "onnxruntime",
                          "opencv-onnx"}
    assert diffs["torch-unfused"] == 0 and max(diffs.values()) < 1e-3


def test_predict_path_rows_on_images(tmp_path, capsys):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(YOLO_CFG.replace("[net]\n", "[net]\nletter_box=1\n", 1))  # letterboxed: rect canvases
    folder = tmp_path / "images"
    folder.mkdir()
    generator = np.random.default_rng(0)
    for name, (height, width) in {"wide.jpg": (30, 60), "tall.png": (50, 20), "wide2.jpg": (31, 61)}.items():
        cv2.imwrite(str(folder / name), generator.integers(0, 255, (height, width, 3), dtype=np.uint8))
    (folder / "notes.txt").write_text("not an image")
    assert bench_model.main(["--cfg", str(cfg), "--img", "64", "--batch-sizes", "1", "--device", "cpu",
                             "--cpu-iters", "1", "--rounds", "0", "--threads", "1", "--images", str(folder),
                             "--image-count", "2", "--image-rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 images of" in out and "rect canvases 68x28 (1), 36x68 (1)" in out  # the first 2 by name
    rows = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) > 6 and fields[1] in ("rect", "square"):
            rows[tuple(fields[:2])] = [float(v) for v in fields[2:6]]  # median, p10, p90, first pass
    backends = ("torch-packed", "torch-fused", "torch-unfused", "ncnn", "openvino", "onnxruntime")
    assert set(rows) == {(b, canvas) for b in backends for canvas in ("rect", "square")}
    assert all(v > 0 for values in rows.values() for v in values)


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(YOLO_CFG)
    with pytest.raises(SystemExit):
        bench_model.main(["--cfg", str(cfg), "--opencv-path", str(tmp_path / "missing")])
    assert "--opencv-path" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench_model.main(["--cfg", str(cfg), "--images", str(tmp_path / "missing")])
    assert "--images" in capsys.readouterr().err
    assert bench_model.main(["--cfg", str(cfg), "--img", "64", "--batch-sizes", "1", "--device", "cpu",
                             "--cpu-iters", "1", "--rounds", "0", "--images", str(tmp_path)]) == 2
    assert "no image files" in capsys.readouterr().err
    assert bench_model.main(["--cfg", str(cfg), "--img", "64", "--batch-sizes", "1", "--device", "cpu",
                             "--cpu-iters", "1", "--rounds", "1", "--image", str(tmp_path / "none.jpg")]) == 2
    assert "--image" in capsys.readouterr().err


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
