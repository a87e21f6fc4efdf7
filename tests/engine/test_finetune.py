"""detect.engine.finetune: the defaults a run gets from what it is, and the user's choices left alone."""

from detect.engine.config import Hyp
from detect.engine.finetune import MIN_FINETUNE_STEPS, RunShape, plan_run

SMALL = RunShape(images=132, epochs=10, batch_size=8, world_size=2, finetune=True)


def test_small_finetune_trades_accumulation_for_steps():
    plan = plan_run(SMALL, Hyp(), None, set())
    # 132 // 16 = 8 micro-batches per epoch: 80 in all; accumulating to 64 would leave 20 steps
    assert SMALL.micro_batches == 80 and plan.nbs == 16
    assert plan.hyp.optim.warmup_epochs == 0 and plan.hyp.optim.warmup_min_steps == 3
    assert plan.hyp.optim.warmup_bias_lr == 0.0
    assert plan.hyp.loss == Hyp().loss and plan.hyp.ema == Hyp().ema
    assert any("nbs 16 (not 64)" in r and "make 20 optimiser steps" in r for r in plan.reasons)
    assert plan.hyp.augment.close_mosaic == 0.3 and plan.hyp.augment.mosaic == 1.0
    assert plan.hyp.optim.transferred_lr_scale == 0.5 and plan.hyp.optim.lr0 == Hyp().optim.lr0
    assert any(r.startswith("transferred_lr_scale 0.5") and "= 0.005" in r for r in plan.reasons)
    assert len(plan.reasons) == 5


def test_large_runs_and_from_scratch_keep_the_nominal_batch():
    large = RunShape(images=120_000, epochs=10, batch_size=16, world_size=2, finetune=True)
    assert large.micro_batches // 2 >= MIN_FINETUNE_STEPS and plan_run(large, Hyp(), None, set()).nbs == 64
    scratch = RunShape(images=132, epochs=10, batch_size=8, world_size=2, finetune=False)
    plan = plan_run(scratch, Hyp(), None, set())
    assert plan.nbs == 64 and plan.hyp == Hyp() and plan.reasons == ()


def test_medium_finetune_accumulates_part_of_the_way():
    medium = RunShape(images=1120, epochs=10, batch_size=8, world_size=2, finetune=True)
    plan = plan_run(medium, Hyp(), None, set())
    # 700 micro-batches: accumulating 2 keeps 350 steps (>= 300), 4 would leave 175
    assert medium.micro_batches == 700 and plan.nbs == 32
    assert plan.hyp.optim.warmup_min_steps == 11  # 3% of 350


def test_user_choices_are_never_changed():
    hyp = Hyp().replace_flat(warmup_epochs=2.0, warmup_bias_lr=0.05)
    plan = plan_run(SMALL, hyp, 32, {"warmup_epochs", "warmup_bias_lr", "close_mosaic", "transferred_lr_scale"})
    assert plan.nbs == 32 and plan.hyp == hyp and plan.reasons == ()


def test_warm_up_reason_gives_the_steps_the_schedule_takes():
    tiny = RunShape(images=16, epochs=1, batch_size=8, world_size=1, finetune=True)  # 2 micro-batches, 2 steps
    plan = plan_run(tiny, Hyp(), None, set())
    warm = next(r for r in plan.reasons if r.startswith("warm-up"))
    assert warm.startswith("warm-up 1 of the run's 2 optimiser steps (3%, at least 3, at most half the run)")
    assert next(r for r in plan_run(SMALL, Hyp(), None, set()).reasons if r.startswith("warm-up")).startswith(
        "warm-up 3 of the run's 80 optimiser steps (3%, at least 3)")
