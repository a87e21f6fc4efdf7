"""detect.export --int8 and its mAP check's verdict: a refused graph never gets the ordinary name, the verdict is
in the metadata, and loading an int8 graph whose check failed, was skipped or is not recorded warns once."""

import json

import pytest
import torch

from detect.darknet import Darknet, save_pt
from detect.export.cli import main as export_main
from tests.support.log_lines import log_lines
from tests.support.val_data import TINY_CFG, write_coco_dataset

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

LOADER_LOG = "detect.inference.onnx_runtime"


@pytest.fixture
def model_and_data(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "cache"))
    spec = write_coco_dataset(tmp_path / "data", sizes=((48, 64), (64, 40), (64, 64)))
    torch.manual_seed(0)
    weights = tmp_path / "m.pt"
    save_pt(Darknet(TINY_CFG), weights, names=["red", "green", "blue"])
    return weights, spec


def _export(weights, spec, *extra) -> int:
    return export_main(["--weights", str(weights), "--img", "64", "--int8", "--data", str(spec),
                        "--calibration-images", "2", *extra])


def _fake_metrics(monkeypatch, float_map, int8_map):
    """The check's two evaluations, as given (the float graph is the `-float.tmp.onnx` one)."""
    from detect.export import int8_check

    monkeypatch.setattr(int8_check, "_val_metrics", lambda weights, data, size: (
        (float_map, 0.5) if "-float.tmp" in weights.name else (int8_map, 0.45)))


def _verdict(path):
    import onnx

    props = {p.key: p.value for p in onnx.load(str(path)).metadata_props}
    return json.loads(props["int8_check"])


def _load_warnings(path) -> list[str]:
    from detect.inference.loading import load_model_file

    with log_lines(LOADER_LOG) as lines:
        load_model_file(path, device=torch.device("cpu"), img_size=64)
    return [line for line in lines if "int8 graph" in line]


def test_a_graph_that_fails_its_check_is_not_written_under_the_ordinary_name(model_and_data, monkeypatch, capsys):
    weights, spec = model_and_data
    folder = weights.parent
    (folder / "m-int8.onnx").write_bytes(b"an earlier export")  # would pass for this model's graph
    _fake_metrics(monkeypatch, 0.300, 0.290)
    assert _export(weights, spec) == 2
    err = capsys.readouterr().err
    assert "mAP@0.5:0.95 0.3000 float -> 0.2900 int8 (-0.0100), mAP@0.5 0.5000 -> 0.4500: int8 lost more than " \
           "0.005; the int8 graph is written as " in err
    assert f"{folder / 'm-int8-failed-check.onnx'}, not {folder / 'm-int8.onnx'}" in err
    assert "larger --max-map-drop" in err
    assert sorted(p.name for p in folder.glob("*.onnx")) == ["m-int8-failed-check.onnx"]  # no temp files either
    verdict = _verdict(folder / "m-int8-failed-check.onnx")
    assert verdict["result"] == "failed" and "(-0.0100)" in verdict["detail"]
    warnings = _load_warnings(folder / "m-int8-failed-check.onnx")
    assert len(warnings) == 1
    assert "m-int8-failed-check.onnx: this int8 graph failed its mAP check at export (int8 check on " in warnings[0]
    assert "(-0.0100)" in warnings[0] and "use the float export" in warnings[0]


def test_a_larger_allowed_drop_passes_and_loads_without_a_word(model_and_data, monkeypatch, capsys):
    weights, spec = model_and_data
    _fake_metrics(monkeypatch, 0.300, 0.290)
    assert _export(weights, spec, "--max-map-drop", "0.02") == 0
    out = capsys.readouterr().out
    assert f"ONNX model written: {weights.parent / 'm-int8.onnx'} (int8, calibrated on 2 images of {spec})" in out
    assert "(-0.0100), mAP@0.5 0.5000 -> 0.4500: within 0.02" in out
    assert sorted(p.name for p in weights.parent.glob("*.onnx")) == ["m-int8.onnx"]
    verdict = _verdict(weights.parent / "m-int8.onnx")
    assert verdict["result"] == "passed" and verdict["max_drop"] == 0.02
    assert verdict["float_map"] == pytest.approx(0.3) and verdict["int8_map"] == pytest.approx(0.29)
    assert _load_warnings(weights.parent / "m-int8.onnx") == []


def test_an_unchecked_graph_warns_on_load(model_and_data, capsys):
    weights, spec = model_and_data
    assert _export(weights, spec, "--no-int8-check") == 0
    assert "not checked: --no-int8-check" in capsys.readouterr().out
    path = weights.parent / "m-int8.onnx"
    assert _verdict(path)["result"] == "skipped"
    warnings = _load_warnings(path)
    assert len(warnings) == 1 and "was exported with --no-int8-check" in warnings[0]
    assert "compare it with the float export on your val split (detect.val)" in warnings[0]


def test_an_int8_graph_with_no_recorded_check_warns_and_a_float_one_does_not(model_and_data, tmp_path):
    import onnx

    weights, spec = model_and_data
    assert _export(weights, spec, "--no-int8-check") == 0
    graph = onnx.load(str(weights.parent / "m-int8.onnx"))
    kept = [(p.key, p.value) for p in graph.metadata_props if p.key != "int8_check"]
    del graph.metadata_props[:]
    for key, value in kept:
        graph.metadata_props.add(key=key, value=value)
    old = tmp_path / "old-int8.onnx"  # as exports before the verdict was recorded
    onnx.save(graph, str(old))
    warnings = _load_warnings(old)
    assert len(warnings) == 1 and "old-int8.onnx: this int8 graph records no mAP check" in warnings[0]
    assert export_main(["--weights", str(weights), "--img", "64"]) == 0
    assert _load_warnings(weights.parent / "m.onnx") == []


def test_the_failed_check_name_says_int8_once():
    from pathlib import Path

    from detect.export.int8_export import failed_check_path

    assert failed_check_path(Path("w/best-int8.onnx")) == Path("w/best-int8-failed-check.onnx")
    assert failed_check_path(Path("q.onnx")) == Path("q-int8-failed-check.onnx")
