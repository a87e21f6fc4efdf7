"""The console scripts of pyproject.toml and the flag spellings every tool shares."""

import importlib
from pathlib import Path

import pytest

from benchmarks import finetune as bench_finetune
from benchmarks import soak as bench_soak
from detect.bench import data as bench_data
from detect.bench import model as bench_model
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
    "benchmarks finetune": (bench_finetune.parse_args, ["--data", "d"], "img_size", "batch_size"),
    "benchmarks soak": (bench_soak.parse_args, [], "img", "batch"),
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


@pytest.mark.parametrize("tool", ["train", "val", "predict", "bench val"])
def test_half_is_amp_fp16(tool):
    parse, required, _, _ = TOOLS[tool]
    assert parse(required + ["--half"]).amp == "fp16"


def _help_of(raw: str, flag: str) -> str:
    """The help text of `flag` in argparse's --help output, its wrapped lines joined."""
    lines = raw.split("options:", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(flag))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("  -")), len(lines))
    return " ".join(" ".join(lines[start:end]).split())


def test_train_help_states_defaults_once_and_not_for_switches(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    raw = capsys.readouterr().out
    text = " ".join(raw.split("options:", 1)[1].split())  # argparse wraps lines
    assert "(default: True)" not in text and "(default: False)" not in text  # --no-ema, --no-plots, switches
    assert "(default: None)" not in text  # --hyp, --img-size, --nbs say in words what happens
    assert text.count("(default:") == text.count("(default: ") and "(default: 64;" in text
    for flag, default in (("--epochs EPOCHS", "(default: 20)"), ("--batch-size BATCH_SIZE", "(default: 8)")):
        assert default in _help_of(raw, flag), flag


def test_val_split_has_help_and_defaults_are_stated(capsys):
    with pytest.raises(SystemExit):
        val_args(["--help"])
    raw = capsys.readouterr().out
    text, split = " ".join(raw.split("options:", 1)[1].split()), _help_of(raw, "--split")
    assert "which split" in split and "(default: val)" in split
    assert "(default: 0.001)" in _help_of(raw, "--conf") and "(default: None)" not in text
    assert "(default: ultrafast-pycocotools)" in _help_of(raw, "--coco-backend").replace("ultrafast- pyco", "ultrafast-pyco")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the machine without a GPU")
@pytest.mark.parametrize("tool", ["val", "predict"])
def test_device_cuda_without_a_gpu_is_one_line_and_exit_2(tool, tmp_path, capsys):
    from detect.predict import main as predict_main
    from detect.val import main as val_main

    argv = {"val": ["--weights", str(tmp_path / "w.pt"), "--data", str(tmp_path / "d.yaml")],
            "predict": ["--weights", str(tmp_path / "w.pt"), "--source", str(tmp_path)]}[tool]
    main = {"val": val_main, "predict": predict_main}[tool]
    assert main(argv + ["--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CUDA is not available" in err[0] and "--device cpu" in err[0], err
