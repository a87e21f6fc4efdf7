"""detect.val and detect.predict with `--weights model.onnx`: the same metrics and detections as the PyTorch model
(generated data and a tiny model here; coco-tiny with yolov3-tiny in test_export_onnx)."""

import json

import numpy as np
import pytest

from detect import predict, val
from detect.export.cli import main as export_main
from tests.support.val_data import val_args, write_coco_dataset, write_tiny_checkpoint

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")


@pytest.fixture(autouse=True)
def _label_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))


def _results(tmp_path, name) -> list[dict]:
    return json.loads((tmp_path / "runs" / name / "results.json").read_text())


@pytest.mark.slow
def test_val_dynamic_onnx_rect_matches_pt(tmp_path):
    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    assert export_main(["--weights", str(weights), "--img", "64", "--dynamic"]) == 0
    expected = val.run(val.parse_args(val_args(spec, weights, tmp_path, "--save-json", "--name", "pt")))
    got = val.run(val.parse_args(val_args(spec, tmp_path / "tiny-dynamic.onnx", tmp_path, "--save-json",
                                           "--name", "onnx")))
    assert abs(got.map - expected.map) < 1e-3 and abs(got.map50 - expected.map50) < 1e-3
    pt_rows, onnx_rows = _results(tmp_path, "pt"), _results(tmp_path, "onnx")
    assert len(pt_rows) == len(onnx_rows) > 10
    boxes = [np.array(sorted(r["bbox"] + [r["score"]] for r in rows)) for rows in (pt_rows, onnx_rows)]
    np.testing.assert_allclose(boxes[1], boxes[0], atol=1e-3)


def test_val_fixed_size_onnx_runs_square_at_its_size(tmp_path, capsys):
    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    assert export_main(["--weights", str(weights), "--img", "64", "--batch", "2", "--output",
                        str(tmp_path / "fixed.onnx")]) == 0
    assert val.main(val_args(spec, tmp_path / "fixed.onnx", tmp_path, "--name", "onnx")) == 0
    assert val.main(val_args(spec, weights, tmp_path, "--square", "--name", "pt")) == 0
    metrics = [json.loads((tmp_path / "runs" / n / "metrics.json").read_text()) for n in ("onnx", "pt")]
    assert metrics[0]["args"]["square"] is True  # rect asked for, square used (and recorded)
    assert metrics[0]["stats"] == pytest.approx(metrics[1]["stats"], abs=1e-3)
    capsys.readouterr()
    argv = val_args(spec, tmp_path / "fixed.onnx", tmp_path)
    argv[argv.index("--img") + 1] = "96"
    assert val.main(argv) == 2
    assert "takes 64x64 inputs only, but --img-size 96 was given" in capsys.readouterr().err


def test_predict_onnx_gives_the_pt_detections(tmp_path):
    write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    assert export_main(["--weights", str(weights), "--img", "64"]) == 0
    common = ["--source", str(tmp_path / "data" / "images"), "--img", "64", "--conf", "0.05", "--device", "cpu",
              "--project", str(tmp_path / "runs")]
    assert predict.main(["--weights", str(tmp_path / "tiny.onnx"), "--name", "onnx", *common]) == 0
    assert predict.main(["--weights", str(weights), "--square", "--name", "pt", *common]) == 0
    for stem in ("img0", "img1", "img2"):
        rows = [np.loadtxt(tmp_path / "runs" / n / "labels" / f"{stem}.txt", ndmin=2) for n in ("onnx", "pt")]
        assert rows[0].shape == rows[1].shape
        np.testing.assert_allclose(rows[0], rows[1], atol=2e-5)
        record = json.loads((tmp_path / "runs" / "onnx" / "json" / f"{stem}.json").read_text())
        assert {d["name"] for d in record["detections"]} <= {"red", "green", "blue"}
    assert sum(len(np.loadtxt(p, ndmin=2)) for p in (tmp_path / "runs" / "pt" / "labels").glob("*.txt")) > 0


def _metadata(path):
    import onnx

    from detect.inference.onnx_metadata import OnnxMetadata

    return OnnxMetadata.from_props({p.key: p.value for p in onnx.load(str(path)).metadata_props}, path)


def test_export_names_each_variant_and_defaults_to_the_training_size(tmp_path, capsys):
    import torch

    weights = write_tiny_checkpoint(tmp_path)
    ckpt = torch.load(weights, weights_only=True)
    torch.save({**ckpt, "opts": {"img_size": 96}}, weights)  # as best.pt records a run trained at 96
    assert export_main(["--weights", str(weights)]) == 0
    assert export_main(["--weights", str(weights), "--dynamic"]) == 0
    assert export_main(["--weights", str(weights), "--img", "64", "--batch", "2"]) == 0
    out = capsys.readouterr().out
    assert "--img-size 96: the size the .pt was trained at" in out
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["tiny-64-b2.onnx", "tiny-dynamic.onnx", "tiny.onnx"]
    assert _metadata(tmp_path / "tiny.onnx").input_size == (96, 96)  # not 416, not the cfg's 64
    assert _metadata(tmp_path / "tiny-dynamic.onnx").input_size is None
    assert _metadata(tmp_path / "tiny-64-b2.onnx").batch == 2


def test_export_refuses_a_size_off_the_stride_and_a_missing_gpu_in_one_line(tmp_path, capsys):
    import torch

    weights = write_tiny_checkpoint(tmp_path)  # its largest stride is 2
    assert export_main(["--weights", str(weights), "--img", "63"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --img-size 63 must be a multiple of the model's largest stride 2 (and at least 2): "
                   "try 62 or 64"]
    if not torch.cuda.is_available():
        assert export_main(["--weights", str(weights), "--device", "cuda"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "CUDA is not available" in err[0]
    assert not list(tmp_path.glob("*.onnx"))


def test_a_non_square_darknet_cfg_exports_at_its_own_shape_when_stretched(tmp_path, capsys):
    """Darknet weights of a wide cfg (letter_box 0: stretched to width x height) export at that shape unless
    --img says otherwise; letterboxed too (Darknet's letter_box fits the image into width x height)."""
    import torch

    from detect.darknet.model import Darknet
    from detect.inference.loading import load_model_file
    from detect.inference.predictor import InferenceSettings, model_input

    cfg = tmp_path / "wide.cfg"
    cfg.write_text(open("cfg/yolo-mini.cfg").read().replace("[net]\n", "[net]\nwidth=128\nheight=64\n", 1))
    Darknet(str(cfg)).save_darknet_weights(tmp_path / "wide.weights")
    common = ["--cfg", str(cfg), "--weights", str(tmp_path / "wide.weights")]
    assert export_main(common) == 0
    assert "--img-size 64 128: the cfg's [net] size" in capsys.readouterr().out
    assert _metadata(tmp_path / "wide.onnx").input_size == (64, 128)
    assert export_main([*common, "--img", "256"]) == 0  # one size: the long side, as predict and val read it
    assert "--img-size 256: the 128x64 network's shape with its long side 256: 256x128" in capsys.readouterr().out
    assert _metadata(tmp_path / "wide-128x256.onnx").input_size == (128, 256)
    assert export_main([*common, "--img", "250"]) == 2  # off the stride: refused, as predict and val refuse it
    assert "--img-size 250 must be a multiple of the model's largest stride" in capsys.readouterr().err
    assert export_main([*common, "--resize", "letterbox", "--output", str(tmp_path / "boxed.onnx")]) == 0
    assert _metadata(tmp_path / "boxed.onnx").input_size == (64, 128)
    assert _metadata(tmp_path / "boxed.onnx").net_shape == (64, 128)
    assert export_main([*common, "--dynamic"]) == 0  # any size: the metadata keeps the shape to stretch to
    assert _metadata(tmp_path / "wide-dynamic.onnx").net_shape == (64, 128)
    handle = load_model_file(tmp_path / "wide-dynamic.onnx", device=torch.device("cpu"), img_size=64)
    image = np.zeros((300, 200, 3), np.uint8)
    assert model_input(image, InferenceSettings.for_model(handle), 32)[0].shape == (3, 32, 64)


def test_a_square_fixed_export_of_a_wide_darknet_model_evaluates_at_its_own_shape(tmp_path):
    """The eval loader feeds a fixed-size export its own input shape, not the cfg's network shape."""
    import torch

    from detect.darknet.model import Darknet
    from tests.support.val_data import TINY_CFG

    cfg = tmp_path / "wide.cfg"
    cfg.write_text(TINY_CFG.replace("height=64", "height=32"))  # 64 wide, 32 high, stretched (no letter_box)
    torch.manual_seed(0)
    Darknet(str(cfg)).save_darknet_weights(tmp_path / "wide.weights")
    assert export_main(["--weights", str(tmp_path / "wide.weights"), "--cfg", str(cfg), "--img", "64", "64",
                        "--output", str(tmp_path / "square.onnx")]) == 0
    assert _metadata(tmp_path / "square.onnx").input_size == (64, 64)
    spec = write_coco_dataset(tmp_path / "data")
    assert val.main(val_args(spec, tmp_path / "square.onnx", tmp_path)) == 0
