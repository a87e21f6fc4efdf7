"""Two gloo processes running the real training loop on a tiny generated dataset."""

import math

import numpy as np
import pytest
import torch

from detect.engine.setup import build_trainer
from detect.runtime import dist
from detect.train import run
from tests.conftest import ROOT
from tests.support.distributed import run_distributed
from tests.support.training import StopAtStep, tiny_options

pytestmark = pytest.mark.slow

def _flat_params(model):
    """Numpy (tensors do not survive the trip back from a finished spawn process)."""
    return torch.cat([p.detach().flatten() for p in model.parameters()]).numpy().copy()


def _train_and_report(rank, world, tmp):
    ctx = dist.init_distributed("cpu")
    trainer = build_trainer(tiny_options(tmp, epochs=4), ctx)
    setup, opts, losses = trainer.setup, trainer.setup.opts, []
    trainer.setup.evaluate_fn = None
    trainer.on_epoch_end = lambda row: None
    while trainer.state.epoch < opts.epochs:
        row = trainer.train_epoch()
        trainer.state.epoch += 1
        trainer.state.batch_in_epoch = 0
        losses.append(row["box"] + row["obj"] + row["cls"])
    has_sync_bn = any(isinstance(m, torch.nn.SyncBatchNorm) for m in setup.model.modules())
    return _flat_params(setup.model), losses, trainer.state.step, has_sync_bn


def test_two_ranks_stay_identical_and_loss_decreases(tmp_path):
    (p0, losses0, steps0, sync0), (p1, losses1, steps1, sync1) = run_distributed(_train_and_report, 2, (tmp_path,),
                                                                                 timeout=240)
    assert steps0 == steps1 == 4 * 2  # 16 images / (4 x 2 ranks) = 2 steps per epoch (nbs 8: no accumulation)
    assert (p0 == p1).all()  # DDP keeps the replicas bit-identical
    assert losses0 == pytest.approx(losses1)  # the logged loss is averaged over ranks
    assert losses0[-1] < 0.9 * losses0[0]
    assert not sync0 and not sync1  # CPU: BatchNorm stays per process


def _run_once(tmp, name, stop_at=None, resume=None, cache=None):
    ctx = dist.init_distributed("cpu")
    # one loader worker: augmentation is seeded per sample, so resume is exact with workers too
    trainer = build_trainer(tiny_options(tmp, name=name, epochs=3, resume=resume, workers=1, cache=cache), ctx,
                            StopAtStep)
    trainer.stop_at = stop_at
    state = trainer.fit()
    setup = trainer.setup
    lr = setup.optimizer.param_groups[0]["lr"]
    return _flat_params(setup.model), _flat_params(setup.ema.module), state.step, state.epoch, lr


def _interrupted_then_resumed(rank, world, tmp):
    straight = _run_once(tmp, "straight")
    # "SIGTERM" after step 3; the ranks agree on it at the next micro-batch, the last of epoch 2, and read that
    # agreement at the epoch's end (the host never waits for the step it has just queued): they stop after step 4
    # with epoch 2 trained but not evaluated, which the resume then does
    stopped = _run_once(tmp, "cut", stop_at=3)
    resumed = _run_once(tmp, "cut", resume=str(tmp / "runs" / "cut" / "last.pt"))
    return straight, stopped, resumed


def _uncached_then_cached_and_resumed(rank, world, tmp):
    straight = _run_once(tmp, "straight")
    _run_once(tmp, "cached", stop_at=2, cache="ram")
    return straight, _run_once(tmp, "cached", resume=str(tmp / "runs" / "cached" / "last.pt"), cache="ram")


@pytest.mark.slow
def test_a_run_with_the_image_cache_resumes_to_the_uncached_run(tmp_path):
    """--cache ram changes nothing a run computes: interrupted and resumed with the cache, it ends where the
    uncached run does (the samples are the same bytes, and resume stays exact)."""
    for straight, resumed in run_distributed(_uncached_then_cached_and_resumed, 2, (tmp_path,), timeout=300):
        assert resumed[2] == straight[2] == 6 and resumed[3] == straight[3] == 3
        assert np.allclose(resumed[0], straight[0], rtol=1e-5, atol=1e-6)
        assert np.allclose(resumed[1], straight[1], rtol=1e-5, atol=1e-6)


def test_resume_equals_uninterrupted_run(tmp_path):
    results = run_distributed(_interrupted_then_resumed, 2, (tmp_path,), timeout=300)
    for straight, stopped, resumed in results:
        assert stopped[2] == 4 and stopped[3] == 1  # stopped after step 4, epoch 2 not closed
        assert resumed[2] == straight[2] == 6 and resumed[3] == straight[3] == 3
        assert not (stopped[0] == straight[0]).all()
        assert np.allclose(resumed[0], straight[0], rtol=1e-5, atol=1e-6)  # model
        assert np.allclose(resumed[1], straight[1], rtol=1e-5, atol=1e-6)  # EMA
        assert math.isclose(resumed[4], straight[4], rel_tol=1e-9)  # learning rate
    assert (results[0][2][0] == results[1][2][0]).all()


def _full_run(rank, world, tmp):
    ctx = dist.init_distributed("cpu")
    state = run(tiny_options(tmp, name="full", epochs=2), ctx)
    return state.epoch, state.best_fitness


def test_full_run_writes_run_folder(tmp_path):
    (e0, f0), (e1, f1) = run_distributed(_full_run, 2, (tmp_path,), timeout=240)
    assert e0 == e1 == 2 and f0 == f1  # the same metrics on every rank
    run_dir = tmp_path / "runs" / "full"
    lines = (run_dir / "results.csv").read_text().splitlines()
    assert lines[0].startswith("epoch,box,obj,cls,lr,map50,map") and len(lines) == 3
    ckpt = torch.load(run_dir / "last.pt", weights_only=True)
    assert ckpt["epoch"] == 2 and ckpt["step"] == 4 and ckpt["names"] == ["circle", "square", "triangle", "cross"]
    assert len(ckpt["rng"]) == 2 and ckpt["ema"] is not None
    assert (run_dir / "opts.yaml").is_file()
    best = torch.load(run_dir / "best.pt", weights_only=True)  # lean: what inference and fine-tuning need
    assert set(best) == {"ema", "cfg_text", "names", "epoch", "best_fitness", "hyp", "opts", "lean", "class_conf"}
    assert best["opts"]["img_size"] == 64 and best["names"] == ckpt["names"]
    if best["epoch"] == ckpt["epoch"]:  # the last epoch was the best: the same EMA weights
        assert all(torch.equal(best["ema"][k], ckpt["ema"][k]) for k in ckpt["ema"])
    assert (run_dir / "best.pt").stat().st_size < 0.6 * (run_dir / "last.pt").stat().st_size


def test_a_fine_tune_from_a_pt_without_cfg_trains_the_pts_model(tmp_path, caplog):
    """A run of a wider cfg, then a fine-tune from its best.pt with no --cfg: the new run builds the .pt's
    model (every tensor copied, none skipped) and says so, where it used to build the default cfg and load 31
    of 70 tensors; a --cfg that differs is honoured, with a warning."""
    from tests.support.log_lines import log_lines

    caplog.set_level("INFO", logger="detect.engine.run_plan")
    wide = tmp_path / "wide.cfg"
    wide.write_text((ROOT / "cfg" / "yolo-mini.cfg").read_text().replace("filters=16", "filters=24", 1))
    first = tiny_options(tmp_path, cfg=str(wide), epochs=1, name="first")
    run(first, dist.init_distributed("cpu"))
    best = tmp_path / "runs" / "first" / "best.pt"
    with log_lines("detect.engine.run_plan") as lines:
        trainer = build_trainer(tiny_options(tmp_path, weights=str(best), epochs=1, name="second"),
                                dist.init_distributed("cpu"))
    trainer.setup.train_loader.close()
    assert f"cfg: the one {best} was trained with (no --cfg given)" in lines
    assert trainer.setup.model.cfg_text == torch.load(best, weights_only=True)["cfg_text"]
    assert trainer.setup.model.layers[0].conv.out_channels == 24
    with log_lines("detect.engine.run_plan") as lines:
        other = build_trainer(tiny_options(tmp_path, weights=str(best), epochs=1, name="third",
                                           cfg=str(ROOT / "cfg" / "yolo-mini.cfg")), dist.init_distributed("cpu"))
    other.setup.train_loader.close()
    assert any(line.startswith("--cfg ") and "is not the cfg" in line for line in lines)
    assert other.setup.model.layers[0].conv.out_channels == 16
