"""`python -m detect.bench train` on the CPU: one data-included column per --loaders variant, the profiled split
of a step, and the errors a user can cause. Figures are only checked to be real (positive, consistent)."""

import re
from pathlib import Path

import pytest
import torch

from detect.bench import train as bench_train
from detect.engine import loss as loss_module

ROOT = Path(__file__).resolve().parents[2]
SPLIT = re.compile(r"^  split (?P<label>.+?): (?P<steps>\d+) steps, per step: wall (?P<wall>\S+) ms, "
                   r"loader wait (?P<wait>\S+) ms, host (?P<host>\S+) ms \(forward (?P<forward>\S+) ms, loss (?P<loss>\S+) ms, "
                   r"assign targets (?P<assign>\S+) ms, backward (?P<backward>\S+) ms, "
                   r"optimizer and EMA (?P<optimizer>\S+) ms\), "
                   r"device compute (?P<device>\S+), device idle (?P<idle>\S+), kernel launches (?P<kernels>\S+)$")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    """One folder for the module: the synthetic data is generated once (a few seconds), not per test."""
    return tmp_path_factory.mktemp("cache")


def run_bench(capsys, monkeypatch, cache_dir, *extra) -> list[str]:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("KINETO_LOG_LEVEL", "6")  # the profiler's own stderr chatter, undone after the test
    argv = ["--cfg", "cfg/yolo-mini.cfg", "--data", "data/synthetic.yaml", "--img-size", "64", "--batch-size", "4",
            "--iters", "2", "--warmup", "1", "--workers", "0", "--device", "cpu", "--cache-dir", str(cache_dir),
            "--variants", "fp32", "--profile", "0", *extra]
    assert bench_train.main(argv) == 0
    return capsys.readouterr().out.splitlines()


def table(lines: list[str]) -> tuple[str, list[str]]:
    """(the header, the cells of the one row)."""
    header = next(line for line in lines if line.startswith("cfg "))
    row = next(line for line in lines if line.startswith("yolo-mini.cfg"))
    return header, row.split()


def splits(lines: list[str]) -> dict[str, dict]:
    found = {}
    for line in lines:
        m = SPLIT.match(line)
        if m:
            found[m["label"]] = m.groupdict()
    return found


def test_one_included_column_per_loader(capsys, monkeypatch, cache_dir):
    lines = run_bench(capsys, monkeypatch, cache_dir, "--loaders", "ram", "decode")
    header, cells = table(lines)
    assert re.search(r"excl img/s +ram img/s +decode img/s +mem GiB +GFLOPs$", header), header
    # cfg, img, batch, variant, excluded, ram, decode, memory, GFLOPs
    assert cells[:4] == ["yolo-mini.cfg", "64", "4", "fp32"] and len(cells) == 9, cells
    assert all(float(c) > 0 for c in cells[4:]), cells
    assert not splits(lines)  # no --profile, no split


def test_profile_splits_a_step_and_restores_what_it_labelled(capsys, monkeypatch, cache_dir):
    original, backward = loss_module.assign_padded, torch.autograd.backward
    lines = run_bench(capsys, monkeypatch, cache_dir, "--loaders", "decode", "--profile", "2")
    assert loss_module.assign_padded is original and torch.autograd.backward is backward
    _, cells = table(lines)
    assert len(cells) == 8 and all(float(c) > 0 for c in cells[4:]), cells
    found = splits(lines)
    assert list(found) == ["data excluded", "data included (decode)"], lines
    for label, s in found.items():
        wall, wait, host, assign = (float(s[k]) for k in ("wall", "wait", "host", "assign"))
        assert s["steps"] == "2" and wall > 0 and host > 0, (label, s)
        assert 0 < assign <= host and 0 <= wait and wait + host <= wall * 1.001, (label, s)
        forward, loss, backward, optimizer = (float(s[k]) for k in ("forward", "loss", "backward", "optimizer"))
        assert min(forward, loss, backward, optimizer) > 0 and assign <= loss, (label, s)
        assert forward + loss + backward + optimizer <= host * 1.001, (label, s)  # parts of the host's time
        assert (s["device"], s["idle"], s["kernels"]) == ("-", "-", "-"), (label, s)  # the CPU has no kernels


def test_no_data_profiles_only_the_reused_batches(capsys, monkeypatch, cache_dir):
    lines = run_bench(capsys, monkeypatch, cache_dir, "--no-data", "--profile", "1")
    header, cells = table(lines)
    assert "incl img/s" in header and cells[5] == "-" and float(cells[4]) > 0, (header, cells)
    assert list(splits(lines)) == ["data excluded"]


def test_bad_loader_name_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        bench_train.parse_args(["--cfg", "c", "--data", "d", "--loaders", "ram", "ramm"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--loaders: unknown loader 'ramm'; choose from decode, ram, ram-device, decode-device" in err


def test_loader_defaults_and_repeated_names(monkeypatch):
    monkeypatch.setattr(bench_train.torch.cuda, "is_available", lambda: False)
    assert bench_train.parse_args(["--cfg", "c", "--data", "d"]).loaders == ["ram"]
    monkeypatch.setattr(bench_train.torch.cuda, "is_available", lambda: True)
    assert bench_train.parse_args(["--cfg", "c", "--data", "d"]).loaders == ["decode", "ram", "ram-device"]
    args = bench_train.parse_args(["--cfg", "c", "--data", "d", "--loaders", "ram", "decode", "ram"])
    assert args.loaders == ["ram", "decode"]


def test_percent_of_peak_per_loader_column():
    loaders = ["decode", "ram-device"]
    header = bench_train.format_header(loaders, 600.0)
    row = {"excluded": 500.0, "included": {"decode": 240.0, "ram-device": 400.0}, "memory": 3.0}
    cells = bench_train.format_row("cfg/x.cfg", 416, 64, "bf16", row, 10.0, 600.0).split()
    assert header.split()[-3:] == ["excl", "decode", "ram-device"]
    # 3 x 10 GFLOPs x img/s: 15, 7.2 and 12 TFLOP/s of 600
    assert cells[-4:] == ["15.0", "2.5%", "1.2%", "2.0%"], cells
    assert cells[5:7] == ["240.0", "400.0"], cells


def test_on_the_cpu_the_defaults_are_both_cfgs_each_precision_and_the_split(monkeypatch):
    monkeypatch.setattr(bench_train.torch.cuda, "is_available", lambda: False)
    for native, variants in ((True, ["fp32", "bf16", "bf16-compile"]), (False, ["fp32", "fp32-compile"])):
        monkeypatch.setattr(bench_train, "cpu_has_native_bf16", lambda native=native: native)
        args = bench_train.parse_args(["--data", "d"])
        assert [Path(c).name for c in args.cfg] == ["yolo-mini.cfg", "yolov3-tiny.cfg"]
        assert all(Path(c).is_file() for c in args.cfg)
        assert args.variants == variants and args.profile == 2
