"""Everything a training run is built from, in order: what the run is (detect.engine.run_plan: cfg, hyp, options,
folder), the data sources, the model (weights, anchors, head priors, frozen layers), the fine-tune plan, DDP, the
optimiser and schedule, the evaluator, the run loggers and the plots, gathered into a `Trainer` (`build_trainer`); a
resumed run restores its checkpoint here.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path

import torch
import yaml

from detect.darknet.load import load_model, uses_channels_last
from detect.darknet.surgery import freeze_layers, init_head_priors, set_bn_momentum
from detect.data.augmentation.resize_modes import inference_resize
from detect.engine.batch_probe import probe_batch_size
from detect.engine.class_weights import resolve_class_weights
from detect.engine.config import Hyp
from detect.engine.ema import ModelEMA
from detect.engine.fitness import make_evaluator
from detect.engine.loss import YoloLoss
from detect.engine.monitor import chain, make_loggers
from detect.engine.optim import (
    LRSchedule,
    accumulation_steps,
    build_optimizer,
    scaled_parameter_names,
)
from detect.engine.options import TrainOptions, training_size
from detect.engine.run_loggers import RunInfo
from detect.engine.run_plan import plan_new_run, prepare
from detect.engine.trainer import Trainer
from detect.engine.trainer_state import TrainSetup
from detect.evaluation.thresholds import BestEvaluationThresholds
from detect.runtime import ddp, dist
from detect.runtime.files import atomic_write_text
from detect.runtime.precision import amp_dtype, describe_cpu_precision

log = logging.getLogger(__name__)


def open_sources(opts: TrainOptions):
    """(train source, val source or None) of --data."""
    from detect.data.formats.spec import load_data_spec
    from detect.data.loader import open_split

    spec = load_data_spec(opts.data).with_single_cls(opts.single_cls)
    # open_split runs rank 0 first itself (data generation, label cache); nesting another rank0_first
    # would pair its broadcasts wrongly when rank 0 fails.
    train_source = open_split(spec, "train", opts.cache_dir)
    has_val = spec.has_split("val")
    return train_source, open_split(spec, "val", opts.cache_dir) if has_val else None


def fit_cfg_anchors(cfg_source, shapes, hyp: Hyp, seed: int, ctx: dist.DistContext, run_dir: Path) -> str:
    """The cfg text with anchors fitted to the training boxes (rank 0 fits, every rank gets the text)."""
    from detect.darknet.cfg import read_cfg_source
    from detect.engine.anchor_fitting import (
        anchor_changes,
        describe_anchor_changes,
        fit_anchors,
        read_anchor_layout,
        rewrite_cfg_anchors,
    )

    new_text = None
    if ctx.is_main:
        text, source, _ = read_cfg_source(cfg_source)  # the text as written, comments kept
        layout = read_anchor_layout(text, source)
        fitted = fit_anchors(shapes, layout, hyp.loss.anchor_t, seed=seed)
        log.info("--anchors fit: %s", fitted.summary())
        log.info("%s", describe_anchor_changes(anchor_changes(layout, fitted.anchors)))
        new_text = rewrite_cfg_anchors(text, fitted.anchors, source)
        atomic_write_text(run_dir / "model.cfg", new_text)
        log.info("the run's cfg with these anchors: %s", run_dir / "model.cfg")
    return dist.broadcast_object(new_text)


def check_anchor_fit(model, shapes, hyp: Hyp) -> None:
    """Log how well the anchors cover the training boxes, and warn when some boxes cannot be learnt."""
    from detect.engine.anchors import model_anchor_fit, poor_fit_warning

    fit = model_anchor_fit(model, shapes, hyp.loss.anchor_t)
    log.info("%s", fit.summary())
    warning = poor_fit_warning(fit)
    if warning:
        log.warning("%s", warning)


def prepare_model(opts: TrainOptions, hyp: Hyp, ctx: dist.DistContext, cfg_source, weights: str | None,
                  train_source, run_dir: Path):
    """(bare model on the device, frozen BatchNorm modules, training size, names of the parameters copied whole
    from `weights`): loaded (anchors fitted with --anchors fit), initialised, frozen."""
    from detect.darknet.model import Darknet
    from detect.engine.anchors import label_shapes

    names = list(train_source.names)
    if opts.anchors == "fit" and opts.resume is None:  # a resumed run's cfg already holds its fitted anchors
        with torch.device("meta"):  # shapes only: the anchors are fitted before the weights are read, once
            img_size = training_size(Darknet(cfg_source, num_classes=len(names)), opts)
        cfg_source = fit_cfg_anchors(cfg_source, label_shapes(train_source, img_size), hyp, opts.seed, ctx,
                                     run_dir)
    loaded = load_model(cfg_source, weights, names=names)  # logs the transfer, head by head
    model = loaded.model
    img_size = training_size(model, opts)
    if ctx.is_main:  # the same figures on every rank: one computes and logs them
        check_anchor_fit(model, label_shapes(train_source, img_size), hyp)
    if weights is None:  # from scratch (a resumed run overwrites this with its checkpoint)
        init_head_priors(model, img_size)
    else:  # heads the weights did not reach (a .conv.N backbone) start as from scratch
        untouched = [h["head"] for h in loaded.report.get("heads", []) if h["reason"]]
        if untouched:
            init_head_priors(model, img_size, heads=untouched)
    copied = set(loaded.report.get("copied", ())) if loaded.report else set()
    transferred = {name for name, _ in model.named_parameters() if name in copied}
    set_bn_momentum(model, hyp.optim.bn_momentum)
    frozen_bn = freeze_layers(model, opts.freeze)
    model.to(ctx.device)
    if uses_channels_last(ctx.device, amp_dtype(opts.amp, ctx.device)):
        model.to(memory_format=torch.channels_last)
        torch.backends.cudnn.benchmark = True  # fixed shapes: time the kernels once, then use the fastest
    return model, frozen_bn, img_size, transferred


def wrap_model(model, opts: TrainOptions, ctx: dist.DistContext):
    """(bare model, the module the step calls): SyncBatchNorm where it applies, DDP, torch.compile."""
    if ddp.use_sync_bn(opts.sync_bn, ctx.device, ctx.world_size):
        model = ddp.convert_sync_bn(model)
        log.info("BatchNorm converted to SyncBatchNorm across %d processes", ctx.world_size)
    elif ctx.distributed and ctx.device.type != "cuda":
        log.info("CPU training: BatchNorm stays per-process (SyncBatchNorm needs CUDA)")
    ddp_model = ddp.wrap_ddp(model, ctx)  # broadcasts rank 0's parameters and buffers
    return model, torch.compile(ddp_model) if opts.compile else ddp_model


def build_optimisation(model, opts: TrainOptions, hyp: Hyp, ctx: dist.DistContext, batches_per_epoch: int,
                       transferred: set[str] = frozenset()):
    """(optimizer, schedule, micro-batches accumulated per step, steps per epoch); the `transferred` parameters
    (copied from --weights) learn at `transferred_lr_scale` x the lr of the others."""
    optim = hyp.optim
    accumulate = accumulation_steps(opts.nbs, opts.batch_size, ctx.world_size)
    steps_per_epoch = math.ceil(batches_per_epoch / accumulate)
    # weight decay follows the images per step relative to the nominal batch
    decay = optim.weight_decay * opts.batch_size * ctx.world_size * accumulate / opts.nbs
    optimizer = build_optimizer(model, opts.optimizer, optim.lr0, optim.momentum, decay,
                                scaled=transferred, lr_scale=optim.transferred_lr_scale)
    total = opts.epochs * steps_per_epoch
    warmup = min(max(round(optim.warmup_epochs * steps_per_epoch), optim.warmup_min_steps), total // 2)
    return optimizer, LRSchedule.from_config(optim, total, warmup, opts.schedule), accumulate, steps_per_epoch


def build_setup(opts: TrainOptions, hyp: Hyp, ctx: dist.DistContext, run_dir: Path, cfg_source,
                weights: str | None, sources=None, on_evaluation=None, ckpt: dict | None = None) -> TrainSetup:
    """Everything the loop needs; `sources` (train, val) are opened from --data unless given. `opts.nbs` is
    decided (plan_new_run, or a checkpoint's). A resumed run (`ckpt`) takes its optimiser groups from there.
    `on_evaluation(EvalResult)` hears of each evaluation."""
    from detect.data.loader import build_train_loader

    if opts.nbs is None:
        raise ValueError("build_setup needs a decided nominal batch: plan the run first (plan_new_run)")

    train_source, val_source = sources or open_sources(opts)
    names = list(train_source.names)
    model, frozen_bn, img_size, transferred = prepare_model(opts, hyp, ctx, cfg_source, weights, train_source,
                                                            run_dir)
    if ckpt is not None:
        transferred = scaled_parameter_names(ckpt["optimizer"])
    model, ddp_model = wrap_model(model, opts, ctx)
    ema = ModelEMA(model, hyp.ema.decay, hyp.ema.tau) if opts.ema else None
    loader = build_train_loader(train_source, img_size, opts.batch_size, hyp.augment, opts.workers, model.max_stride,
                                ctx.rank, ctx.world_size, opts.seed, cache_dir=opts.cache_dir,
                                max_batches=opts.max_batches, epochs=opts.epochs, cache=opts.cache,
                                repeat_thresh=opts.repeat_thresh if opts.sampler == "repeat-factor" else None,
                                on_device=opts.augment_on == "device", resize=opts.resize)
    evaluate_fn = make_evaluator(val_source, img_size, opts.batch_size * 2, opts.workers, model.max_stride, ctx,
                                 on_evaluation, opts.cache, opts.cache_dir, opts.coco_backend, opts.metric,
                                 inference_resize(opts.resize))
    optimizer, schedule, accumulate, steps_per_epoch = build_optimisation(model, opts, hyp, ctx, len(loader),
                                                                             transferred)
    amp = amp_dtype(opts.amp, ctx.device)
    if ctx.device.type == "cpu":
        log.info(describe_cpu_precision(opts.amp, amp))
    multi_scale = None
    if opts.multi_scale:
        from detect.data.augmentation.multiscale import MultiScale

        multi_scale = MultiScale(img_size, model.max_stride, seed=opts.seed)
    log.info("%s: %d classes, img %d, batch %d x %d processes x %d accumulated, %d steps/epoch, %s%s",
             Path(opts.cfg).name if opts.cfg else "the weights' cfg", len(names), img_size, opts.batch_size, ctx.world_size, accumulate,
             steps_per_epoch, opts.optimizer, f", AMP {amp}" if amp else "")
    class_weights = resolve_class_weights(hyp.loss.class_weights, train_source.records, names)
    loss = YoloLoss.for_model(model, hyp.loss, class_weights)
    return TrainSetup(ctx=ctx, model=model, ddp_model=ddp_model, loss=loss.compile() if opts.compile else loss,
                      optimizer=optimizer, schedule=schedule,
                      scaler=torch.amp.GradScaler(ctx.device.type, enabled=amp == torch.float16), amp_dtype=amp,
                      ema=ema, train_loader=loader, accumulate=accumulate, hyp=hyp, names=names, opts=opts,
                      run_dir=run_dir, evaluate_fn=evaluate_fn, frozen_bn=frozen_bn, multi_scale=multi_scale,
                      channels_last=uses_channels_last(ctx.device, amp), img_size=img_size)


def make_monitor(opts: TrainOptions, ctx: dist.DistContext, run_dir: Path, sources, loggers):
    """The run's plots (detect.engine.monitor) on rank 0, each told to the run `loggers`; None elsewhere or with
    --no-plots."""
    if not ctx.is_main or not opts.plots:
        return None
    from detect.engine.monitor import RunMonitor

    return RunMonitor(run_dir, sources[0].names, opts.epochs, sources[1], opts.plots, loggers.log_plot)


def build_trainer(opts: TrainOptions, ctx: dist.DistContext, trainer_cls=Trainer) -> Trainer:
    """Options -> a ready Trainer (restored when resuming); writes opts.yaml / hyp.yaml for a new run."""
    opts, hyp, run_dir, cfg_source, weights, ckpt, chosen = prepare(opts, ctx)
    try:
        return _assemble_trainer(opts, hyp, run_dir, cfg_source, weights, ckpt, chosen, ctx, trainer_cls)
    except BaseException:
        if ckpt is None and ctx.is_main:
            discard_run_dir(run_dir, opts.exist_ok)
        raise


def discard_run_dir(run_dir: Path, exist_ok: bool) -> None:
    """A new run that failed before training leaves no folder behind (it would shift the exp numbering): the
    folder this run made goes whole; a reused one (--exist-ok) only when empty."""
    import shutil

    if not exist_ok:
        shutil.rmtree(run_dir, ignore_errors=True)
    elif run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def _assemble_trainer(opts, hyp, run_dir, cfg_source, weights, ckpt, chosen, ctx, trainer_cls) -> Trainer:
    """The Trainer of a prepared run (build_trainer's `prepare`): its data, batch size and plan, loggers, plots,
    setup and, when resuming, its checkpoint's state."""
    sources = open_sources(opts)
    if opts.batch_size == "auto":
        opts = dataclasses.replace(opts, batch_size=probe_batch_size(opts, hyp, ctx, cfg_source, sources[0]))
    if ckpt is None:  # a resumed run keeps the choices its checkpoint recorded
        opts, hyp = plan_new_run(opts, hyp, ctx, sources[0], weights, chosen)
    torch.manual_seed(opts.seed)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    loggers = make_loggers(opts, run_dir) if ctx.is_main else None
    monitor = make_monitor(opts, ctx, run_dir, sources, loggers)
    thresholds = BestEvaluationThresholds(sources[1], f"the val split of {opts.data}") \
        if ctx.is_main and sources[1] is not None else None  # best.pt's per-class thresholds: rank 0 has the matches
    setup = build_setup(opts, hyp, ctx, run_dir, cfg_source, weights, sources,
                        chain(loggers and loggers.on_evaluation, monitor and monitor.on_evaluation,
                              thresholds and thresholds.on_evaluation), ckpt)
    setup.loggers, setup.best_thresholds = loggers, thresholds
    torch.manual_seed(opts.seed + 1000 * ctx.rank + 1)  # per-rank stream for anything random in the loop
    if ctx.is_main and ckpt is None:
        atomic_write_text(run_dir / "opts.yaml", yaml.safe_dump(opts.to_dict(), sort_keys=False))
        atomic_write_text(run_dir / "hyp.yaml", yaml.safe_dump(hyp.to_dict(), sort_keys=False))
    trainer = trainer_cls(setup, on_batch=monitor and monitor.on_batch,
                          on_epoch_end=chain(loggers and loggers.on_epoch_end, monitor and monitor.on_epoch_end))
    if ckpt is not None:
        trainer.restore(ckpt)
    if loggers is not None:  # the last step: a run that fails from here on ends its loggers (detect.train)
        loggers.start(RunInfo(run_dir, opts.to_dict(), hyp.to_dict(), ctx.world_size, resumed=ckpt is not None))
        if monitor is not None and ckpt is None:
            monitor.plot_labels(sources[0].records)
    return trainer
