import random

import numpy as np
import pytest
import torch
from torch import nn

from detect.darknet.pt_files import atomic_save, load_checkpoint
from detect.engine.checkpoint import (
    build_checkpoint,
    check_resumable,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from detect.engine.ema import ModelEMA
from detect.engine.optim import build_optimizer
from tests.conftest import ROOT


def test_rng_state_roundtrip_through_weights_only_file(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    atomic_save({"rng": rng_state()}, tmp_path / "r.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    set_rng_state(torch.load(tmp_path / "r.pt", weights_only=True)["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_full_checkpoint_is_plain_data(tmp_path):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4))
    opt = build_optimizer(model, "sgd", 0.01, 0.9, 5e-4)
    model(torch.randn(2, 3, 8, 8)).sum().backward()
    opt.step()
    ema = ModelEMA(model)
    ema.update(model)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    ckpt = build_checkpoint(model=model, ema=ema, optimizer=opt, scaler=scaler, epoch=3, step=17, batch_in_epoch=0,
                            best_fitness=0.25, cfg_text="[net]\n", names=["a", "b"], hyp={"lr0": 0.01},
                            opts={"epochs": 5, "name": "x"}, rank_rng=[rng_state()])
    assert save_checkpoint(ckpt, tmp_path / "sub" / "last.pt")
    loaded = load_checkpoint(tmp_path / "sub" / "last.pt")
    check_resumable(loaded, "last.pt")
    assert loaded["epoch"] == 3 and loaded["step"] == 17 and loaded["names"] == ["a", "b"]
    assert torch.equal(loaded["model"]["0.weight"], model[0].weight)
    assert loaded["ema_updates"] == 1
    opt2 = build_optimizer(model, "sgd", 0.01, 0.9, 5e-4)
    opt2.load_state_dict(loaded["optimizer"])
    assert torch.equal(opt2.state_dict()["state"][0]["momentum_buffer"], opt.state_dict()["state"][0]["momentum_buffer"])
    assert not list((tmp_path / "sub").glob("*.tmp"))


def test_bad_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load_checkpoint(tmp_path / "nope.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt"):
        load_checkpoint(tmp_path / "junk.pt")
    atomic_save({"model": {}}, tmp_path / "w.pt")
    with pytest.raises(ValueError, match="--weights"):
        check_resumable(load_checkpoint(tmp_path / "w.pt"), tmp_path / "w.pt")


def test_failed_save_leaves_old_file(tmp_path, monkeypatch):
    target = tmp_path / "last.pt"
    atomic_save({"epoch": 1}, target)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        atomic_save({"epoch": 2}, target)
    assert torch.load(target, weights_only=True)["epoch"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["last.pt"]


def test_best_pt_of_yolov3_tiny_holds_the_ema_weights_only(tmp_path):
    """The lean file of an 8.9M-parameter model is its float32 weights (35 MB) plus a little, where the full
    checkpoint carries the model, the EMA and the optimiser state (3x); the tools load it as before and
    --resume refuses it with the way out."""
    import pytest

    from detect import Darknet
    from detect.darknet.pt_files import checkpoint_state_dict
    from detect.engine.checkpoint import lean_checkpoint
    from detect.engine.ema import ModelEMA
    from detect.engine.optim import build_optimizer

    model = Darknet(str(ROOT / "cfg" / "yolov3-tiny.cfg"))
    ema = ModelEMA(model)
    optimizer = build_optimizer(model, "sgd", 0.01, 0.937, 5e-4)
    loss = sum(p.sum() for p in model.parameters())
    loss.backward()
    optimizer.step()  # momentum buffers: the optimiser state a full checkpoint carries
    full = build_checkpoint(model=model, ema=ema, optimizer=optimizer, scaler=None, epoch=3, step=30,
                            batch_in_epoch=0, best_fitness=0.5, cfg_text=model.cfg_text, names=["a"] * 80,
                            hyp={"lr0": 0.01}, opts={"epochs": 10, "img_size": None}, rank_rng=[rng_state()])
    save_checkpoint(full, tmp_path / "last.pt")
    atomic_save(lean_checkpoint(full, 416), tmp_path / "best.pt")
    full_mb, lean_mb = ((tmp_path / n).stat().st_size / 2**20 for n in ("last.pt", "best.pt"))
    params = sum(p.numel() for p in model.parameters())
    assert 8.8e6 < params < 9.0e6 and lean_mb <= 37 and full_mb > 2.5 * lean_mb, (full_mb, lean_mb)
    best = load_checkpoint(tmp_path / "best.pt")
    assert best["opts"] == {"epochs": 10, "img_size": 416} and "optimizer" not in best and "model" not in best
    assert all(torch.equal(checkpoint_state_dict(best)[k], ema.module.state_dict()[k]) for k in best["ema"])
    with pytest.raises(ValueError, match=r"best.pt cannot be resumed: it lacks model, optimizer, step \(best.pt "
                                         r"holds the best weights only: resume from last.pt, or fine-tune"):
        check_resumable(best, tmp_path / "best.pt")
