"""Training under bf16 autocast on the CPU (`--amp bf16`): it trains, says so in one line, keeps float32 weights
and a float32 loss, and resumes."""

import torch

from tests.support.log_lines import log_lines
from tests.support.training import TINY_DATA, train_tiny


def test_bf16_training_on_the_cpu_keeps_float32_weights(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA.replace("path: gen", f"path: {tmp_path / 'gen'}"))
    (tmp_path / "hyp.yaml").write_text("")
    with log_lines("detect.engine.setup") as lines:
        assert train_tiny("--epochs", "1", "--max-batches", "2", "--amp", "bf16") == 0
    assert any(line.startswith("CPU precision: bf16 autocast") for line in lines)
    last = torch.load(tmp_path / "runs" / "r" / "last.pt", weights_only=True)
    weights = [v for v in last["model"].values() if v.is_floating_point()]
    assert weights and all(v.dtype is torch.float32 and torch.isfinite(v).all() for v in weights)
    rows = (tmp_path / "runs" / "r" / "results.csv").read_text().splitlines()
    assert len(rows) == 2
    assert train_tiny("--epochs", "2", "--max-batches", "2", "--amp", "bf16", "--resume", "runs/r/last.pt") == 0
    assert len((tmp_path / "runs" / "r" / "results.csv").read_text().splitlines()) == 3


def test_fp16_on_the_cpu_is_refused_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text(TINY_DATA)
    (tmp_path / "hyp.yaml").write_text("")
    assert train_tiny("--epochs", "1", "--amp", "fp16") != 0
    captured = capsys.readouterr()
    assert "--amp fp16 is for CUDA" in captured.out + captured.err
    assert not (tmp_path / "runs" / "r" / "last.pt").exists()
