"""The Trainer in this process, no process group: two micro-batches make one optimiser step."""

import numpy as np
import torch

from detect.engine.setup import build_trainer
from detect.runtime import dist
from tests.support.training import tiny_options


def test_two_micro_batches_make_one_step_in_process(tmp_path):
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    assert not torch.distributed.is_initialized()
    trainer = build_trainer(tiny_options(tmp_path), ctx)
    setup = trainer.setup
    try:
        assert setup.accumulate == 2 and setup.opts.nbs == 8 and setup.hyp.optim.lr0 == 0.02
        before = [p.detach().clone() for p in setup.model.parameters()]
        trainer._set_train_mode()
        batches = setup.train_loader.epoch(0)
        lrs = []
        for i in range(2):
            images, targets, _ = next(batches)
            parts, lr = trainer.train_step(images, targets, i, last_of_window=i == 1)
            assert parts.shape == (3,) and torch.isfinite(parts).all() and float(parts.sum()) > 0
            lrs.append(lr)
        assert lrs[0] is None and lrs[1] == setup.schedule.values(0)[0][0]  # lr of step 0 of the schedule
        assert trainer.state.step == 1 and setup.ema.updates == 1
        changed = {id(p) for a, p in zip(before, setup.model.parameters()) if not torch.equal(a, p)}
        # warm-up starts the weight groups at lr 0 and the bias group at warmup_bias_lr: exactly those move
        moving = {id(p) for g in setup.optimizer.param_groups if g["lr"] > 0 for p in g["params"]}
        assert changed == moving and len(moving) == 12  # the 12 bias vectors
        assert all(p.grad is None for p in setup.model.parameters())  # cleared for the next window
    finally:
        setup.train_loader.close()


def test_anchors_fit_rewrites_the_runs_cfg_and_the_model(tmp_path):
    from pathlib import Path

    from detect.engine.anchor_fitting import read_anchor_layout

    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    trainer = build_trainer(tiny_options(tmp_path, anchors="fit"), ctx)
    setup = trainer.setup
    setup.train_loader.close()
    fitted = read_anchor_layout((setup.run_dir / "model.cfg").read_text()).anchors
    original = read_anchor_layout(Path(setup.opts.cfg).read_text()).anchors
    assert fitted.tolist() != original.tolist()
    # the model trains with them, and its cfg_text (what checkpoints store) carries them
    assert read_anchor_layout(setup.model.cfg_text).anchors.tolist() == fitted.tolist()
    used = {tuple(a) for head in setup.model.heads for a in head.anchors.tolist()}
    assert used <= {tuple(float(v) for v in a) for a in fitted.tolist()}


def _fit_with_fitness(tmp_path, values, **changes):
    """A fit whose evaluation returns `values` in turn (max_batches 1: one step an epoch)."""
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    trainer = build_trainer(tiny_options(tmp_path, max_batches=1, plots=False, **changes), ctx)
    scores = iter(values)
    trainer.setup.evaluate_fn = lambda model: (next(scores), {})
    try:
        return trainer, trainer.fit()
    finally:
        trainer.setup.train_loader.close()


def test_patience_stops_after_n_evaluations_without_improvement_and_says_why(tmp_path):
    import csv

    trainer, state = _fit_with_fitness(tmp_path, [0.1, 0.3, 0.2, 0.25, 0.29, 0.5, 0.6], epochs=7, patience=3)
    # best 0.3 at epoch 2, then 0.2, 0.25, 0.29: three evaluations without improvement -> stop after epoch 5
    assert state.epoch == 5 and state.stopped_early and state.best_fitness == 0.3
    rows = list(csv.DictReader(open(trainer.setup.run_dir / "results.csv")))
    assert [r["note"] for r in rows[:4]] == ["", "", "", ""] and len(rows) == 5
    assert rows[4]["note"].startswith("early stop after epoch 5 of 7: the fitness has not improved for 3 "
                                      "evaluations (--patience 3; best 0.3000)")
    last = torch.load(trainer.setup.run_dir / "last.pt", weights_only=True)
    assert last["stopped_early"] and last["epoch"] == 5 and last["stale_evaluations"] == 3


def test_save_period_keeps_lean_epoch_checkpoints(tmp_path):
    trainer, state = _fit_with_fitness(tmp_path, [0.1, 0.2, 0.3, 0.4, 0.5], epochs=5, save_period=2)
    run = trainer.setup.run_dir
    assert state.epoch == 5 and not state.stopped_early  # no --patience: never stops early
    assert sorted(p.name for p in run.glob("epoch*.pt")) == ["epoch2.pt", "epoch4.pt"]
    kept = torch.load(run / "epoch4.pt", weights_only=True)
    assert kept["lean"] and kept["epoch"] == 4 and "optimizer" not in kept and kept["opts"]["img_size"] == 64


def test_a_failed_evaluation_still_saves_the_trained_epoch(tmp_path):
    import pytest

    trainer = build_trainer(tiny_options(tmp_path, epochs=2), dist.DistContext(0, 1, 0, torch.device("cpu"), None))

    def fail(model):
        raise RuntimeError("the ground truth is inconsistent")

    trainer.setup.evaluate_fn = fail
    try:
        with pytest.raises(RuntimeError, match="inconsistent"):
            trainer.fit()
    finally:
        trainer.setup.train_loader.close()
    last = torch.load(trainer.setup.run_dir / "last.pt", weights_only=True)
    assert last["epoch"] == 1 and last["batch_in_epoch"] == 0  # epoch 1 trained: --resume goes on from there


def test_a_non_finite_micro_batch_skips_its_window_on_the_device_and_training_goes_on(tmp_path):
    """A micro-batch whose loss is not finite is found without the host waiting: its window's optimiser step is
    skipped by the fused optimiser (found_inf, no tensor changes), the count says so one micro-batch later, its
    parts are zeros, and the next window trains as usual."""
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    trainer = build_trainer(tiny_options(tmp_path), ctx)
    setup = trainer.setup
    real_loss, calls = setup.loss, []

    def loss(raw, targets, hw):
        value, parts = real_loss(raw, targets, hw)
        calls.append(1)
        return (value * float("inf"), parts) if len(calls) == 2 else (value, parts)  # the second micro-batch

    setup.loss = loss
    try:
        trainer._set_train_mode()
        batches = setup.train_loader.epoch(0)
        before = [p.detach().clone() for p in setup.model.parameters()]
        momentum = [setup.optimizer.state[p]["momentum_buffer"].clone() for p in setup.model.parameters()]
        results = [trainer.train_step(*next(batches)[:2], 0, last_of_window=False)]
        results.append(trainer.train_step(*next(batches)[:2], 1, last_of_window=True))
        assert trainer.state.nonfinite_total == 0  # micro-batch 1's flags are read after the next one is queued
        assert all(torch.equal(a, p) for a, p in zip(before, setup.model.parameters()))  # window skipped
        assert all(torch.equal(m, setup.optimizer.state[p]["momentum_buffer"])
                   for m, p in zip(momentum, setup.model.parameters()))
        results += [trainer.train_step(*next(batches)[:2], i, last_of_window=i % 2 == 1) for i in (2, 3)]
        trainer.flush()
        assert [bool(parts.sum() == 0) for parts, _ in results] == [False, True, False, False]
        assert trainer.state.nonfinite_total == 1 and trainer.state.nonfinite_run == 0
        assert trainer.state.step == 2 and setup.ema.updates == 2
        assert any(not torch.equal(a, p) for a, p in zip(before, setup.model.parameters()))  # window 2 trained
        assert all(torch.isfinite(p).all() for p in setup.model.parameters())
        assert all(torch.isfinite(v).all() for v in setup.ema.module.state_dict().values())
    finally:
        setup.train_loader.close()


def test_a_stretched_run_feeds_stretched_images_and_its_pt_says_so(tmp_path):
    """--resize stretch: every training image fills img x img (boxes scaled per axis), the evaluation stretches,
    and best.pt records the mode, which the tools then follow."""
    from detect.inference.loading import load_model_file

    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    data = tmp_path / "rect.yaml"  # images of 48 or 80 pixels a side, drawn per side: most are not square
    data.write_text(f"format: synthetic\npath: {tmp_path / 'rect'}\nseed: 1\ntrain_images: 16\nval_images: 8\n"
                    "image_sizes: [48, 80]\nmin_side: 10\nmax_side: 28\nmax_objects: 3\n")
    options = tiny_options(tmp_path, data=str(data), resize="stretch", max_batches=1, epochs=1, plots=False)
    trainer = build_trainer(options, ctx)
    setup = trainer.setup
    dataset = setup.train_loader.dataset
    try:
        assert dataset.resize == "stretch"
        records = dataset.records
        index = max(range(len(records)), key=lambda i: abs(records[i].width - records[i].height))
        record = records[index]
        assert record.width != record.height
        image, boxes = dataset.load_resized(index)
        assert image.shape[:2] == (64, 64)
        scale = [64 / record.width, 64 / record.height] * 2
        torch.testing.assert_close(torch.from_numpy(boxes), torch.from_numpy(record.boxes * scale))
        trainer.fit()
    finally:
        setup.train_loader.close()
    handle = load_model_file(setup.run_dir / "best.pt", device=torch.device("cpu"), backend="torch")
    assert handle.resize == "stretch"


def test_stretch_single_stretches_lone_images_and_keeps_mosaic_tiles(tmp_path):
    ctx = dist.DistContext(0, 1, 0, torch.device("cpu"), None)
    data = tmp_path / "rect.yaml"
    data.write_text(f"format: synthetic\npath: {tmp_path / 'rect'}\nseed: 1\ntrain_images: 16\nval_images: 8\n"
                    "image_sizes: [48, 80]\nmin_side: 10\nmax_side: 28\nmax_objects: 3\n")
    setup = build_trainer(tiny_options(tmp_path, data=str(data), resize="stretch-single"), ctx).setup
    dataset = setup.train_loader.dataset
    try:
        records = dataset.records
        index = max(range(len(records)), key=lambda i: abs(records[i].width - records[i].height))
        record = records[index]
        plan = dataset._geometry(np.random.default_rng(0), index, range(len(records)), mosaic_epoch=True)
        image, boxes = dataset.load_resized(index)  # as tiles (and the cache) have it: long side 64, aspect kept
        assert image.shape[:2] != (64, 64) and max(image.shape[:2]) == 64 and record.width != record.height
        # that image filled out to 64 x 64 (no mosaic, zoom or shift in QUIET_HYP: the warp is the identity)
        scale = [64 / image.shape[1], 64 / image.shape[0]] * 2
        np.testing.assert_allclose(plan.boxes, boxes * scale, atol=1e-4)
    finally:
        setup.train_loader.close()
    assert setup.evaluate_fn is not None
