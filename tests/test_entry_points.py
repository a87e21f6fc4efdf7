"""The console scripts of pyproject.toml and the flag spellings every tool shares."""

import importlib
from pathlib import Path

import pytest

from detect.bench import data as bench_data
from detect.bench import finetune as bench_finetune
from detect.bench import model as bench_model
from detect.bench import soak as bench_soak
from detect.bench import train as bench_train
from detect.bench import val as bench_val
from detect.engine.options import build_parser
from detect.export.cli import parse_args as export_args
from detect.predict import parse_args as predict_args
from detect.val import parse_args as val_args

ROOT = Path(__file__).resolve().parents[1]
REQUIRED_SCRIPTS = {"detect-train", "detect-val", "detect-predict", "detect-export", "detect-bench"}


def test_console_scripts_point_at_callables():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert REQUIRED_SCRIPTS <= set(scripts)
    for name, target in scripts.items():
        module_name, function_name = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if module_name.startswith("detect.export") and e.name.startswith("detect.export"):
                continue  # written on another branch
            raise
        assert callable(getattr(module, function_name)), f"{name} -> {target}"


# (tool, parse function of argv, the arguments it requires, namespace attribute of the image size, of the batch)
TOOLS = {
    "train": (lambda argv: build_parser().parse_args(argv), [], "img_size", "batch_size"),
    "val": (val_args, ["--weights", "w.pt", "--data", "d.yaml"], "img", "batch"),
    "predict": (predict_args, ["--weights", "w.pt", "--source", "x.jpg"], "img", "batch"),
    "bench data": (bench_data.parse_args, [], "img", "batch"),
    "bench val": (bench_val.parse_args, ["--cfg", "c", "--weights", "w", "--data", "d"], "img", "batch"),
    "bench model": (bench_model.parse_args, ["--cfg", "c"], "img", "batch_sizes"),
    "bench train": (bench_train.parse_args, ["--cfg", "c", "--data", "d"], "img", "batch"),
    "bench finetune": (bench_finetune.parse_args, ["--data", "d"], "img_size", "batch_size"),
    "bench soak": (bench_soak.parse_args, [], "img", "batch"),
    "export": (export_args, ["--weights", "w.pt"], "img", "batch"),
}


def _as_value(value):
    """bench model / train take several sizes (lists, and batches as text for `max`)."""
    value = value[0] if isinstance(value, list) else value
    return int(value)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_tool_accepts_both_spellings(tool):
    parse, required, img_attr, batch_attr = TOOLS[tool]
    long_flags, short_flags = ["--img-size", "320"], ["--img", "320"]
    if batch_attr is not None:  # predict runs one image at a time
        long_flags, short_flags = long_flags + ["--batch-size", "4"], short_flags + ["--batch", "4"]
    long_form, short_form = vars(parse(required + long_flags)), vars(parse(required + short_flags))
    assert long_form == short_form
    assert _as_value(long_form[img_attr]) == 320
    if batch_attr is not None:
        assert _as_value(long_form[batch_attr]) == 4


@pytest.mark.parametrize("tool", ["train", "val", "bench val"])
def test_half_is_amp_fp16(tool):
    parse, required, _, _ = TOOLS[tool]
    assert parse(required + ["--half"]).amp == "fp16"
