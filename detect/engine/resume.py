"""Where a run resumes from: --resume, a torchrun restart, a damaged last.pt (the previous one kept beside it),
and what to tell the user when the group breaks. Global rank 0 reads the checkpoint and hands it to every rank."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from detect.darknet.pt_files import load_checkpoint
from detect.engine.checkpoint import check_resumable, previous_path
from detect.engine.options import PATH_OPTIONS, RESUME_MAY_CHANGE, TrainOptions
from detect.runtime import dist

log = logging.getLogger(__name__)


def find_resume_checkpoint(opts: TrainOptions, restarted: bool = False) -> Path | None:
    """The checkpoint to resume: --resume PATH, --resume (newest last.pt), or after a torchrun restart (of any
    rank's launch: a node that rejoins an elastic group starts its count afresh)."""
    if opts.resume not in (None, "auto"):
        return Path(opts.resume)
    if opts.resume == "auto" or restarted:
        found = sorted(Path(opts.project).glob("*/last.pt"), key=lambda p: p.stat().st_mtime)
        if found:
            if restarted and opts.resume is None:
                log.warning("torchrun restarted the group: resuming from %s", found[-1])
            return found[-1]
        if opts.resume == "auto":
            raise FileNotFoundError(f"--resume: no {opts.project}/*/last.pt to resume from")
    return None


def load_resumable(path: Path) -> tuple[Path, dict]:
    """(path, checkpoint) of `path`, or of the previous checkpoint kept beside it (last.prev.pt) when `path` is
    missing, truncated or corrupt; the bad file is renamed *.corrupt.pt so that the next save cannot rotate it
    into the place of the good one."""
    try:
        ckpt = load_checkpoint(path)
        check_resumable(ckpt, path)
        return path, ckpt
    except (ValueError, FileNotFoundError) as e:
        prev = previous_path(path)
        if not prev.is_file():
            raise
        ckpt = load_checkpoint(prev)
        check_resumable(ckpt, prev)
        log.warning("%s; resuming from the previous checkpoint %s (epoch %d) instead", e, prev, ckpt["epoch"])
    if path.exists():
        path.replace(path.with_name(f"{path.stem}.corrupt{path.suffix}"))
    return prev, ckpt


def resume_checkpoint(opts: TrainOptions, ctx: dist.DistContext) -> tuple[Path, dict] | None:
    """Global rank 0 finds and reads the checkpoint (it wrote it; other nodes may not see its disk) and every rank
    gets it from rank 0; None for a new run."""
    restarted = any(dist.all_gather_object(int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) > 0))
    found = None
    with dist.rank0_first():
        if ctx.is_main:
            path = find_resume_checkpoint(opts, restarted)
            found = load_resumable(path) if path is not None else None
    found = dist.broadcast_object(found)
    return (Path(found[0]), found[1]) if found is not None else None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _same(name: str, given, saved) -> bool:
    if name in PATH_OPTIONS and given is not None and saved is not None:
        return Path(given).resolve() == Path(saved).resolve()
    return given == saved


def resumed_options(opts: TrainOptions, ckpt: dict, path: Path) -> TrainOptions:
    """The options of a resumed run: the checkpoint's, with where it runs taken from `opts`. A flag the command
    line gave that differs from the run's own is refused (it would be ignored); `--epochs N` moves the run's end
    (the schedule follows), refused at or below the epochs done; a finished run with no new end is refused."""
    saved = {k: v for k, v in ckpt["opts"].items() if k in TrainOptions.__dataclass_fields__ and k != "given"}
    differ = [f"{_flag(k)} {getattr(opts, k)} (the run's: {saved.get(k)})" for k in opts.given
              if k not in RESUME_MAY_CHANGE and k in saved and not _same(k, getattr(opts, k), saved[k])]
    if differ:
        raise ValueError(f"--resume {path} continues the run with the options it started with, but "
                         f"{', '.join(differ)} {'was' if len(differ) == 1 else 'were'} given: leave "
                         f"{'it' if len(differ) == 1 else 'them'} out, or start a new run from it with "
                         f"--weights {path}")
    done, total = int(ckpt["epoch"]), int(saved.get("epochs", opts.epochs))
    finished = done >= total and not ckpt.get("batch_in_epoch")
    epochs = total
    if ckpt.get("stopped_early"):
        raise ValueError(f"--resume {path}: the run stopped early after epoch {done} of {total} (--patience), there "
                         f"is nothing to resume; fine-tune from its best.pt with --weights to train on")
    if "epochs" in opts.given and opts.epochs <= done:
        raise ValueError(f"--epochs {opts.epochs} with --resume {path}: the run has done {done} of its {total} "
                         f"epochs; give more than {done} to extend it")
    if "epochs" in opts.given and opts.epochs != total:
        epochs = opts.epochs
        log.info("--epochs %d: the run ends after epoch %d instead of %d; the learning-rate schedule is "
                 "recomputed for %d epochs from here", epochs, epochs, total, epochs)
    elif finished:
        raise ValueError(f"--resume {path}: the run finished all {total} epochs, there is nothing to resume; "
                         f"--epochs N (more than {total}) extends it")
    return TrainOptions(**{**saved, "device": opts.device, "workers": opts.workers, "resume": str(path),
                           "dist_timeout": opts.dist_timeout, "epochs": epochs,
                           **{k: getattr(opts, k) for k in ("cache", "cache_dir", "mlflow", "mlflow_experiment")
                              if k in opts.given}})


def explain_group_failure(exc: Exception, ctx: dist.DistContext, last: Path) -> None:
    """When a collective failed: which rank (and node) did not arrive, and how to go on."""
    who = dist.explain_failure(ctx, exc)
    if who is None:
        return
    elastic = os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") not in ("", "0")
    then = ("torchrun restarts the group, which resumes from it" if elastic else
            f"relaunch the job (every node's torchrun) with --resume {last}")
    log.error("the group broke: %s. The last checkpoint is %s; %s", who, last, then)
