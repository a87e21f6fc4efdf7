"""detect.evaluation.model_eval through detect.val: --slice reads whole images through a loader (--workers decode
them, --cache keeps them), with the figures of a run without either; the runners share one protocol."""

import json

import pytest

from detect.darknet import Darknet
from detect.inference.handle import CompiledRunner, Runner
from detect.val import main
from tests.support.val_data import (
    TINY_CFG,
    val_args,
    write_coco_dataset,
    write_tiny_checkpoint,
)


def test_slice_reads_whole_images_through_a_loader_with_workers_and_the_image_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DETECT_CACHE", str(tmp_path / "labels"))
    spec = write_coco_dataset(tmp_path / "data")
    weights = write_tiny_checkpoint(tmp_path)
    plain = val_args(spec, weights, tmp_path, "--slice", "32", "--conf", "0.2", "--save-json")
    assert main([*plain, "--name", "plain"]) == 0
    cached = [*plain, "--cache", "disk", "--cache-dir", str(tmp_path / "mine")]
    cached[cached.index("--workers") + 1] = "2"
    assert main([*cached, "--name", "cached"]) == 0
    assert main([*cached, "--name", "again"]) == 0  # read back from the cache
    runs = {n: json.loads((tmp_path / "runs" / n / "results.json").read_text()) for n in ("plain", "cached", "again")}
    assert runs["plain"] and runs["cached"] == runs["plain"] and runs["again"] == runs["plain"]
    cached_files = [p.name for p in (tmp_path / "mine" / "images").glob("*.u8")]
    assert len(cached_files) == 1 and "-val-whole64-" in cached_files[0]  # full size: the largest side, 64


def test_every_engine_is_a_runner_and_the_compiled_ones_hold_no_torch_state():
    from detect.inference.ncnn_model import NcnnModel
    from detect.inference.onnx_runtime import OnnxModel
    from detect.inference.openvino_model import OpenVinoModel

    assert all(issubclass(kind, CompiledRunner) for kind in (NcnnModel, OpenVinoModel, OnnxModel))
    assert {kind.engine for kind in (NcnnModel, OpenVinoModel)} == {"ncnn", "openvino"}
    runner = CompiledRunner()
    assert runner.eval() is runner and runner.train() is runner and runner.to("cpu") is runner
    assert not runner.training
    model = Darknet(TINY_CFG)
    assert isinstance(model, Runner) and model.max_stride == 2 and model.num_classes == 3


@pytest.mark.parametrize("flags", [["--max-det", "0"], ["--batch", "0"], ["--conf", "1", "--iou", "0.5"],
                                   ["--workers", "-1"]])
def test_val_and_predict_check_the_shared_flags_alike(flags, capsys):
    from detect.predict import parse_args as predict_args
    from detect.val import parse_args as val_args

    errors = []
    for parse, required in ((val_args, ["--weights", "w.pt", "--data", "d.yaml"]),
                            (predict_args, ["--weights", "w.pt", "--source", "x.jpg"])):
        with pytest.raises(SystemExit):
            parse([*required, *flags])
        errors.append(capsys.readouterr().err.strip().splitlines()[-1].split("error: ", 1)[1])
    assert errors[0] == errors[1] and errors[0].startswith(flags[0].replace("--batch", "--batch-size"))
    assert val_args(["--weights", "w", "--data", "d"]).workers == predict_args(["--weights", "w", "--source",
                                                                                   "s"]).workers
