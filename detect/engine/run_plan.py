"""What a run is before anything is built: its cfg, hyperparameters, options and folder (`prepare`), a new
run's choices fitted to it (`plan_new_run`), or a resumed run's own from its checkpoint.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from detect.engine.cfg_training import describe_ignored, map_cfg_training
from detect.engine.config import Hyp, load_hyp, read_hyp_file
from detect.engine.finetune import RunShape, plan_run
from detect.engine.options import DEFAULT_CFG, HYP_FROM_CFG, TrainOptions
from detect.engine.resume import resume_checkpoint, resumed_options
from detect.runtime import dist
from detect.runtime.runs import next_run_dir

log = logging.getLogger(__name__)


def new_run_dir(opts: TrainOptions) -> Path:
    """runs/train/<name>, or <name>2, <name>3, ... when it exists (unless --exist-ok). Rank 0 decides."""
    path = None
    if dist.is_main_process():
        path = next_run_dir(opts.project, opts.name, opts.exist_ok)
        path.mkdir(parents=True, exist_ok=True)
    return Path(dist.broadcast_object(str(path) if path else None))


def _cfg_lines(text: str) -> list[str]:
    return [line.split("#")[0].replace(" ", "") for line in text.splitlines() if line.split("#")[0].strip()]


def choose_cfg(opts: TrainOptions) -> str:
    """The model of a new run: --cfg; else the cfg a .pt in --weights was trained with (a fine-tune of a
    fine-tune trains that model, not the default); else the default cfg. Each choice is logged."""
    from detect.darknet.pt_files import is_torch_checkpoint, load_checkpoint

    weights = opts.weights
    pt_cfg = None
    if weights and Path(weights).is_file() and is_torch_checkpoint(weights):
        pt_cfg = load_checkpoint(weights).get("cfg_text")
    if opts.cfg is not None:
        if pt_cfg and _cfg_lines(Path(opts.cfg).read_text()) != _cfg_lines(pt_cfg):
            log.warning("--cfg %s is not the cfg %s was trained with: training --cfg as asked, with the tensors "
                        "of the weights that fit it (leave --cfg out to train the .pt's own model)", opts.cfg,
                        weights)
        return opts.cfg
    if pt_cfg:
        log.info("cfg: the one %s was trained with (no --cfg given)", weights)
        return pt_cfg
    return str(DEFAULT_CFG)


def prepare(opts: TrainOptions, ctx: dist.DistContext):
    """(options, hyp, run dir, cfg source, weights, checkpoint to resume or None, hyp keys the user chose)."""
    found = resume_checkpoint(opts, ctx)
    if found is None:
        cfg = choose_cfg(opts)  # its errors and the hyp's come before a run folder is made
        hyp, opts, chosen = new_run_hyp(opts, cfg)
        if cfg == str(DEFAULT_CFG):  # opts.yaml names the cfg the run trains (a .pt's own: its checkpoints' cfg_text)
            opts = dataclasses.replace(opts, cfg=cfg)
        return opts, hyp, new_run_dir(opts), cfg, opts.weights, None, chosen
    resume_path, ckpt = found
    saved = resumed_options(opts, ckpt, resume_path)
    hyp = Hyp.from_dict(ckpt["hyp"], f"{resume_path} (its hyp)")
    log.info("resuming %s from epoch %d, step %d", resume_path, ckpt["epoch"], ckpt["step"])
    return saved, hyp, resume_path.parent, ckpt["cfg_text"], None, ckpt, None


def new_run_hyp(opts: TrainOptions, cfg: str) -> tuple[Hyp, TrainOptions, set[str]]:
    """(hyp, options, the hyp keys the user chose) of a new run: --hyp FILE over the defaults, or with --hyp cfg
    the cfg's own training keys (detect.engine.cfg_training), each mapping logged; flags given win over the
    cfg's batch and policy. Without --hyp cfg, a cfg that sets training keys is said to be ignored, once."""
    if opts.hyp != HYP_FROM_CFG:
        if note := describe_ignored(cfg):
            log.info("%s", note)
        return load_hyp(opts.hyp), opts, set(read_hyp_file(opts.hyp))
    mapping = map_cfg_training(cfg, set(Hyp.keys()))
    for line in mapping.mapped:
        log.info("--hyp cfg: %s", line)
    for line in mapping.unmapped:
        log.info("--hyp cfg: not mapped: %s", line)
    changes = {k: v for k, v in mapping.opts.items() if k not in opts.given}
    for key in mapping.opts.keys() - changes.keys():
        log.info("--hyp cfg: --%s %s given on the command line, not the cfg's %s", key, getattr(opts, key),
                 mapping.opts[key])
    hyp = Hyp.from_dict({**Hyp().to_dict(), **mapping.hyp}, f"{mapping.source} (--hyp cfg)")
    return hyp, dataclasses.replace(opts, **changes), set(mapping.hyp)


def plan_new_run(opts: TrainOptions, hyp: Hyp, ctx: dist.DistContext, train_source, weights, chosen: set[str]):
    """(options, hyp) with the unset choices fitted to the run (detect.engine.finetune), each logged with its reason;
    `chosen`: the hyp keys the user set (never changed)."""
    shape = RunShape(images=len(train_source.records), epochs=opts.epochs, batch_size=opts.batch_size,
                     world_size=ctx.world_size, max_batches=opts.max_batches, finetune=weights is not None)
    plan = plan_run(shape, hyp, opts.nbs, chosen)
    for reason in plan.reasons:
        log.info("fine-tune default: %s", reason)
    return dataclasses.replace(opts, nbs=plan.nbs), plan.hyp
