"""One tune worker: takes trials from the shared study until the study has its `--trials` finished, each trial an
ordinary train.py run in its own folder with its own hyp file (detect.tune.trial_run).

Counting: finished trials (complete or pruned) count toward --trials; failed ones do not (an interrupted trial's
retry takes its place). A worker starts a trial only while finished + running trials are fewer than --trials, and
a trial whose number comes after the first --trials of them (two workers asked at the same moment) is given up
before it trains. When only other workers' trials are left running, a worker waits for them: one whose worker is
gone turns stale and is retried here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from detect.engine.config import read_hyp_file
from detect.runtime.files import atomic_write_text, exclusive_lock
from detect.tune.options import TuneOptions
from detect.tune.space import suggest_all
from detect.tune.storage import (
    WORKER_ATTR,
    fail_interrupted_trials,
    open_storage,
    open_study,
    retry_callback,
    worker_identity,
)
from detect.tune.trial_run import read_fitness, run_training, train_command

log = logging.getLogger(__name__)


class TrialFailed(Exception):
    """A trial that ended without a value: train.py failed, or the trial was not needed (surplus)."""


@dataclass
class Attempt:
    number: int | None = None
    surplus: bool = False


def make_sampler(opts: TuneOptions, number: int = 0):
    """TPE seeded by (seed, trial number): a resumed search or a second worker does not repeat the first draws.
    The constant liar counts running trials as bad ones, so that parallel workers do not all try the same spot."""
    import optuna

    return optuna.samplers.TPESampler(seed=(opts.seed + number) % 2**32, n_startup_trials=opts.startup_trials,
                                      constant_liar=True)


def make_pruner(opts: TuneOptions):
    import optuna

    if opts.pruner == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=opts.prune_startup, n_warmup_steps=opts.prune_after)
    if opts.pruner == "threshold":
        return optuna.pruners.ThresholdPruner(lower=opts.prune_below, n_warmup_steps=opts.prune_after)
    return optuna.pruners.NopPruner()


def _states():
    from optuna.trial import TrialState

    return TrialState


def next_move(study, total: int) -> str:
    """run (a trial to start or a retry to take), wait (only running trials are left) or done."""
    TrialState = _states()
    finished = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
    running = len(study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)))
    if finished + running < total:
        return "run"
    return "wait" if running and finished < total else "done"


def is_surplus(study, number: int, total: int) -> bool:
    """Whether trial `number` comes after the first `total` trials that are finished or running."""
    TrialState = _states()
    counted = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING))
    return sum(t.number < number for t in counted) >= total


def write_hyp(path: Path, hyp: dict, header: str) -> None:
    atomic_write_text(path, f"# {header}\n" + yaml.safe_dump(hyp, sort_keys=False))


def _failure_line(log_file: Path) -> str:
    """The line of a train.log that says why it failed (else its last line)."""
    try:
        lines = [line.strip() for line in log_file.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    said = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
    return (said or lines or [""])[-1][-300:]


def _frozen(study, number: int):
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def set_aside_earlier_run(run_dir: Path) -> Path | None:
    """A new trial's folder that holds a run already is an earlier search's (its storage deleted or another one
    named): renamed to <folder>.earlier-<time>, said in a warning, so that this trial is not scored with that
    run's results.csv. Returns where it went, or None."""
    if not ((run_dir / "results.csv").exists() or (run_dir / "last.pt").exists()):
        return None
    aside = run_dir.with_name(f"{run_dir.name}.earlier-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.rename(aside)
    log.warning("%s held a run of an earlier search (not this study's): moved to %s", run_dir, aside.name)
    return aside


def objective(trial, opts: TuneOptions, attempt: Attempt, device_args=(), env=None) -> float:
    """A trial: draw its hyperparameters, run (or resume) its train.py, report each epoch's fitness, prune."""
    import optuna

    attempt.number, attempt.surplus = trial.number, False
    trial.study.sampler = make_sampler(opts, trial.number)  # before any draw; see make_sampler
    if is_surplus(trial.study, trial.number, opts.trials):
        attempt.surplus = True
        trial.set_user_attr("note", f"not run: the study had its {opts.trials} trials")
        raise TrialFailed("surplus")
    trial.set_user_attr(WORKER_ATTR, worker_identity())
    trial.set_user_attr("note", "")  # a retry starts with its failed original's attributes
    params = suggest_all(opts.space, trial)
    hyp = {**read_hyp_file(opts.base_hyp), **params}
    trial.set_user_attr("hyp", hyp)
    retry_of = _frozen(trial.study, trial.number).system_attrs.get("failed_trial")  # set by the retry callback
    run_dir = Path(trial.user_attrs.get("run_dir") or opts.study_dir / f"trial_{trial.number:03d}")
    resume = retry_of is not None and (run_dir / "last.pt").is_file()
    if retry_of is not None and not resume:  # nothing to continue here: a run of its own
        run_dir = opts.study_dir / f"trial_{trial.number:03d}"
    if not resume:
        set_aside_earlier_run(run_dir)
    trial.set_user_attr("run_dir", str(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    hyp_file = run_dir / "trial_hyp.yaml"
    write_hyp(hyp_file, hyp, f"trial {trial.number} of study {opts.study}: train.py --hyp this file")
    log.info("trial %d%s: %s -> %s", trial.number, f" (retry of {retry_of}, resumed)" if resume else
             f" (retry of {retry_of})" if retry_of is not None else "",
             " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items()), run_dir)

    reported = [0]  # the last epoch reported

    def report(epoch: int, fitness: float) -> None:
        trial.report(fitness, epoch)
        reported[0] = epoch

    def should_prune() -> bool:
        # the last epoch is the run's end, not a stop: the trial completes with its best fitness (a pruned trial's
        # value would be Optuna's, the last fitness)
        return reported[0] < opts.epochs and trial.should_prune()

    done, note = read_fitness(run_dir / "results.csv") if resume else ([], "")
    if done and done[-1][0] >= opts.epochs:  # the interrupted run had finished: its rows are the result
        for epoch, fitness in done:
            report(epoch, fitness)
        result_rows, stopped, code = done, False, 0
    else:
        command = train_command(opts.nproc_per_trial, run_dir, hyp_file, opts.epochs, opts.train_args,
                                device_args, resume=resume)
        result = run_training(command, run_dir, report, should_prune, env=env)
        result_rows, stopped, code, note = result.rows, result.stopped, result.returncode, result.note
    trial.set_user_attr("epochs", result_rows[-1][0] if result_rows else 0)
    if stopped:
        epoch, fitness = result_rows[-1]
        trial.set_user_attr("note", f"pruned after epoch {epoch} (fitness {fitness:.4g})")
        raise optuna.TrialPruned(f"fitness {fitness:.4g} after epoch {epoch}")
    if code != 0:
        why = _failure_line(run_dir / "train.log")
        trial.set_user_attr("note", f"train.py exited {code}: {why}")
        raise TrialFailed(f"train.py exited {code} ({run_dir / 'train.log'}): {why}")
    if not result_rows:
        trial.set_user_attr("note", "no evaluated epoch in results.csv")
        raise TrialFailed(f"{run_dir / 'results.csv'}: no evaluated epoch")
    if result_rows[-1][0] < opts.epochs and not note:
        trial.set_user_attr("note", f"train.py stopped after epoch {result_rows[-1][0]} of {opts.epochs}")
        raise TrialFailed(f"train.py stopped after epoch {result_rows[-1][0]} of {opts.epochs} (signalled?)")
    if note:
        trial.set_user_attr("note", note)
    return max(fitness for _, fitness in result_rows)


def _outcome(study, number: int) -> tuple[bool, str]:
    """(whether trial `number` failed, a line saying how it ended)."""
    t = _frozen(study, number)
    seconds = (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete else 0.0
    value = f"fitness {t.value:.4g}" if t.state == _states().COMPLETE else t.user_attrs.get("note", "")
    complete = study.get_trials(deepcopy=False, states=(_states().COMPLETE,))
    best = max(complete, key=lambda c: c.value) if complete else None
    tail = f" (best {best.value:.4g}, trial {best.number})" if best is not None else ""
    return t.state == _states().FAIL, f"trial {number} {t.state.name.lower()}: {value}, {seconds:.0f} s{tail}"


def run_worker(opts: TuneOptions, device_args=(), env=None) -> int:
    """Trials until the study has its --trials finished: 0, or 1 after --max-failures failures in a row."""
    from optuna.exceptions import UpdateFinishedTrialError

    storage = open_storage(opts.storage, opts.heartbeat_s, opts.grace_s)
    study = open_study(storage, opts.study, make_sampler(opts), make_pruner(opts))
    failures, attempt = 0, Attempt()
    while True:
        # one worker of this machine at a time: SQLite does not lock the rows a check reads, and two workers
        # failing one dead trial together would queue its retry twice
        with exclusive_lock(opts.study_dir / ".interrupted.lock"):
            fail_interrupted_trials(study, storage)
        move = next_move(study, opts.trials)
        if move == "done":
            return 0
        if move == "wait":
            time.sleep(min(5, opts.heartbeat_s))
            continue
        attempt.number = None
        try:
            study.optimize(lambda trial: objective(trial, opts, attempt, device_args, env), n_trials=1,
                           catch=(TrialFailed,))
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: Optuna failed the trial; queue it again for the next run
            if attempt.number is not None:
                frozen = _frozen(study, attempt.number)
                if frozen.state == _states().FAIL and retry_callback(storage) is not None:
                    retry_callback(storage)(study, frozen)
                log.warning("interrupted: trial %d failed and queued again; the same command resumes the search",
                            attempt.number)
            raise
        except (UpdateFinishedTrialError, ValueError) as e:  # Optuna's words when our trial was failed meanwhile
            if attempt.number is None or not (isinstance(e, UpdateFinishedTrialError) or "Cannot tell" in str(e)):
                raise
            log.warning("trial %s was failed by another worker while it ran here (no heartbeat for the grace period: "
                        "was this process stopped?); its train.py is stopped and a retry runs in its place",
                        attempt.number)
            continue
        if attempt.surplus or attempt.number is None:
            continue
        failed, line = _outcome(study, attempt.number)
        failures = failures + 1 if failed else 0
        (log.warning if failed else log.info)(line)
        if failures >= opts.max_failures:
            log.error("%d trials in a row failed (their train.log says why); this worker stops", failures)
            return 1
