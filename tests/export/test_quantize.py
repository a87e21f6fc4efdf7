"""detect.export --int8: the convolutions quantized (the first and the heads' kept float), calibrated on the
spec's training images, metadata `int8`, and the graph runs in val; on yolov3-tiny the mAP holds."""

import json

import numpy as np
import pytest
import torch

from detect.darknet import Darknet, save_pt
from detect.export.cli import main as export_main
from tests.support.val_data import TINY_CFG, val_args, write_coco_dataset

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

# four convolutions: the first and the head's stay float, the two between are quantized
_INNER = "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=leaky\n\n"
_HEAD = TINY_CFG.rindex("[convolutional]")
CFG = TINY_CFG[:_HEAD] + 2 * _INNER + TINY_CFG[_HEAD:]


@pytest.fixture(autouse=True)
def _label_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))


def _onnx(path):
    import onnx

    return onnx.load(str(path))


def test_int8_export_quantizes_the_inner_convolutions_and_runs_in_val(tmp_path, capsys):
    import onnxruntime as ort

    from detect.export.quantize import float_convolutions
    from detect.inference.onnx_metadata import OnnxMetadata

    spec = write_coco_dataset(tmp_path / "data", sizes=((48, 64), (64, 40), (64, 64), (56, 56), (40, 64)))
    torch.manual_seed(0)
    weights = tmp_path / "m.pt"
    save_pt(Darknet(CFG), weights, names=["red", "green", "blue"])
    assert export_main(["--weights", str(weights), "--img", "64"]) == 0
    assert export_main(["--weights", str(weights), "--img", "64", "--int8", "--data", str(spec),
                        "--calibration-images", "4"]) == 0
    out = capsys.readouterr().out
    assert "int8, calibrated on 4 images" in out
    assert f"int8 check on {spec}'s val split (detect.val's evaluation at the export's size): mAP@0.5:0.95 " in out
    float_graph, int8_graph = _onnx(tmp_path / "m.onnx"), _onnx(tmp_path / "m-int8.onnx")
    assert sorted(p.name for p in tmp_path.glob("*.onnx")) == ["m-int8.onnx", "m.onnx"]  # no float leftover
    convs = [n for n in float_graph.graph.node if n.op_type == "Conv"]
    assert float_convolutions(float_graph) == [convs[0].name, convs[-1].name] and len(convs) == 4
    produced_by = {out: node for node in int8_graph.graph.node for out in node.output}
    quantized = [n.name for n in int8_graph.graph.node if n.op_type == "Conv"
                 and produced_by.get(n.input[0]) is not None and produced_by[n.input[0]].op_type == "DequantizeLinear"]
    assert quantized == [c.name for c in convs[1:3]]
    metadata = OnnxMetadata.from_props({p.key: p.value for p in int8_graph.metadata_props}, "m-int8.onnx")
    assert metadata.precision == "int8" and metadata.names == ["red", "green", "blue"]
    x = np.random.default_rng(0).random((1, 3, 64, 64), dtype=np.float32)
    rows = [ort.InferenceSession(str(tmp_path / name)).run(None, {"images": x})[0]
            for name in ("m.onnx", "m-int8.onnx")]
    scores = [r[..., 4] for r in rows]  # objectness in [0, 1]: int8 steps move it a little, not wholesale
    assert np.abs(scores[0] - scores[1]).max() < 0.05 and not np.array_equal(scores[0], scores[1])
    assert val_main_ok(spec, tmp_path / "m-int8.onnx", tmp_path)


def val_main_ok(spec, weights, tmp_path) -> bool:
    from detect.val import main

    return main(val_args(spec, weights, tmp_path, "--name", "q")) == 0 and \
        (tmp_path / "runs" / "q" / "metrics.json").is_file()


def test_int8_needs_data_and_refuses_half_and_nms(tmp_path, capsys):
    weights = tmp_path / "m.pt"
    save_pt(Darknet(CFG), weights, names=["red", "green", "blue"])
    for extra in (["--int8"], ["--int8", "--data", "x.yaml", "--half"], ["--int8", "--data", "x.yaml", "--nms"],
                  ["--data", "x.yaml"]):
        with pytest.raises(SystemExit) as exit_info:
            export_main(["--weights", str(weights), *extra])
        assert exit_info.value.code == 2
    assert "--int8 writes an ONNX graph without --half or --nms and needs --data" in capsys.readouterr().err


@pytest.mark.slow
def test_yolov3_tiny_int8_keeps_the_coco_tiny_map_within_0_005(shared, tmp_path):
    from detect.val import main as val_main

    cfg, weights = shared("darknet-cfg", "yolov3-tiny.cfg"), shared("weights", "yolov3-tiny.weights")
    root = shared("data", "coco-tiny")
    spec = tmp_path / "coco-tiny.yaml"
    spec.write_text(f"path: {root}\nformat: coco\ntrain: train2017\nval: val2017\n"
                    "train_annotations: annotations/instances_train2017.json\n"
                    "val_annotations: annotations/instances_val2017.json\n")
    names = str(shared("darknet-cfg", "coco.names"))
    # letterboxed: stretched as the cfg says, int8 loses 0.007 / 0.021 (mAP / mAP@0.5) here, and the default int8
    # check refuses that export (docs/benchmarks.md "Export and int8")
    common = ["--weights", str(weights), "--cfg", str(cfg), "--names", names, "--img", "416", "--resize", "letterbox"]
    assert export_main([*common, "--output", str(tmp_path / "f.onnx")]) == 0
    assert export_main([*common, "--int8", "--data", str(spec), "--output", str(tmp_path / "q.onnx"),
                        "--no-int8-check"]) == 0  # checked below, with Darknet's protocol
    stats = {}
    for name in ("f", "q"):
        assert val_main(["--weights", str(tmp_path / f"{name}.onnx"), "--data", str(spec), "--img", "416",
                         "--square", "--single-label", "--iou", "0.6", "--project", str(tmp_path / "runs"),
                         "--name", name]) == 0
        metrics = json.loads((tmp_path / "runs" / name / "metrics.json").read_text())["stats"]
        stats[name] = list(metrics.values())[:2]
    assert stats["f"][0] > 0.2
    assert abs(stats["q"][0] - stats["f"][0]) <= 0.005 and abs(stats["q"][1] - stats["f"][1]) <= 0.005, stats


def test_the_int8_check_refuses_a_graph_that_lost_more_than_the_allowed_map(monkeypatch, tmp_path):
    from detect.export import int8_check

    maps = {"f.onnx": (0.300, 0.500), "q.onnx": (0.296, 0.497)}
    monkeypatch.setattr(int8_check, "_val_metrics", lambda weights, data, size: maps[weights.name])
    check = int8_check.check_int8(tmp_path / "f.onnx", tmp_path / "q.onnx", "my.yaml", 416, 0.005)
    assert check.drop == pytest.approx(0.004)
    assert check.line("my.yaml").endswith("mAP@0.5:0.95 0.3000 float -> 0.2960 int8 (-0.0040), mAP@0.5 "
                                          "0.5000 -> 0.4970")
    maps["q.onnx"] = (0.290, 0.499)
    with pytest.raises(int8_check.Int8CheckFailed, match=r"\(-0.0100\).*: int8 lost more than 0.005$") as refused:
        int8_check.check_int8(tmp_path / "f.onnx", tmp_path / "q.onnx", "my.yaml", 416, 0.005)
    assert refused.value.check.drop == pytest.approx(0.01)  # the figures, for the verdict in the refused file
    assert int8_check.check_int8(tmp_path / "f.onnx", tmp_path / "q.onnx", "my.yaml", 416, 0.02).drop < 0.02


def test_the_int8_check_says_when_val_cannot_run(tmp_path):
    from detect.export.int8_check import Int8CheckFailed, check_int8

    missing = tmp_path / "none.onnx"
    with pytest.raises(Int8CheckFailed, match="could not evaluate none.onnx on nothing.yaml .*--no-int8-check"):
        check_int8(missing, missing, "nothing.yaml", 64, 0.005)
