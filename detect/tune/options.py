"""Command-line options of `python -m detect.tune` and the train.py arguments after `--`.

Everything a user can get wrong is checked here, before a storage is opened or a trial started: the flags, the
space file, and the train.py arguments (parsed by train.py's own parser, files included).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from detect.runtime.commands import DefaultsHelpFormatter, check_at_least
from detect.tune.space import DEFAULT_SPACE, Param, load_space

PRUNERS = ("median", "threshold", "none")
# train.py flags the search sets itself for every trial
OWNED_TRAIN_FLAGS = {"project": "--project", "name": "--name", "exist_ok": "--exist-ok", "resume": "--resume",
                     "epochs": "--epochs"}


@dataclass(frozen=True)
class TuneOptions:
    study: str
    study_dir: Path  # <project>/<study>: the trials' run folders, the report
    storage: str  # SQLAlchemy URL
    space_file: Path
    space: dict[str, Param]
    trials: int
    epochs: int
    seed: int
    startup_trials: int
    pruner: str
    prune_startup: int
    prune_after: int  # the first epoch whose fitness may prune a trial
    prune_below: float | None
    workers_per_node: int
    nproc_per_trial: int
    heartbeat_s: int
    max_failures: int
    train_args: tuple[str, ...] = ()  # after `--`, minus --hyp
    base_hyp: Path | None = None  # train.py's --hyp: the keys a trial does not search
    device_given: bool = False  # train_args name --device (the workers leave it alone)
    report_only: bool = False
    worker: bool = False  # one of the processes --workers-per-node started: trials only, no report
    argv: tuple[str, ...] = field(default=(), compare=False)  # the tune flags, for the worker processes

    @property
    def grace_s(self) -> int:
        """Seconds without a heartbeat after which a running trial's worker counts as gone."""
        return 3 * self.heartbeat_s


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m detect.tune", formatter_class=DefaultsHelpFormatter,
        usage="python -m detect.tune [options] [-- train.py arguments]",
        description="Search training hyperparameters with Optuna (TPE, pruning on each epoch's fitness). Each "
                    "trial is a train.py run with its own --hyp file; the trials live in a storage that several "
                    "processes or machines share, and the same command again resumes the search.",
        epilog="Everything after -- goes to every trial's train.py, e.g. -- --cfg cfg/yolov3-tiny.cfg --weights "
               "W --data data/kangaroo.yaml --img-size 416 --batch-size 8. Its --hyp file gives the keys the space "
               "does not search. docs/tuning.md has the details.")
    p.add_argument("--study", default="study", metavar="NAME",
                   help="study name: the same name and storage resume a search")
    p.add_argument("--project", default="runs/tune", metavar="DIR", help="folder holding the study folders")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="SQLAlchemy URL of the trials, e.g. postgresql://user:pass@host/db for several machines "
                        "(default: sqlite:///<project>/<study>/study.db)")
    p.add_argument("--space", default=None, metavar="FILE",
                   help=f"search-space yaml (default: cfg/{DEFAULT_SPACE.name}, made "
                        "for fine-tunes)")
    p.add_argument("--trials", type=int, metavar="N", default=20,
                   help="finished trials (complete or pruned) the study ends with, counting those already there")
    p.add_argument("--epochs", type=int, metavar="E", default=10, help="train.py --epochs of every trial")
    p.add_argument("--seed", type=int, metavar="S", default=0,
                   help="sampler seed (each trial draws with seed + its number)")
    p.add_argument("--startup-trials", type=int, metavar="N", default=10,
                   help="trials drawn at random before TPE models the results")
    p.add_argument("--pruner", default="median", choices=PRUNERS,
                   help="median: stop a trial whose fitness is below the median of the earlier trials at the same "
                        "epoch; threshold: stop one below --prune-below; none: run every trial to the end")
    p.add_argument("--prune-startup", type=int, metavar="N", default=3,
                   help="median: complete trials before any is pruned")
    p.add_argument("--prune-after", type=int, metavar="E", default=None,
                   help="the first epoch whose fitness may prune a trial (default: a quarter of --epochs, at "
                        "least 1)")
    p.add_argument("--prune-below", type=float, metavar="F", default=None,
                   help="threshold: the lowest fitness a trial may keep")
    p.add_argument("--workers-per-node", type=int, metavar="N", default=1,
                   help="worker processes on this machine, each running one trial at a time (one GPU each, or "
                        "--nproc-per-trial GPUs; CPU threads shared when there is no GPU)")
    p.add_argument("--nproc-per-trial", type=int, metavar="K", default=1,
                   help="train.py processes of one trial: more than 1 runs torchrun --nproc_per_node K train.py")
    p.add_argument("--heartbeat", type=int, default=20, metavar="SECONDS",
                   help="a worker stamps its running trial this often; a trial unstamped for 3 times as long "
                        "counts as interrupted and is retried")
    p.add_argument("--max-failures", type=int, metavar="N", default=3,
                   help="a worker stops after this many trials in a row failed (train.py exited with an error)")
    p.add_argument("--report-only", action="store_true",
                   help="write the report of the study (table, best hyp.yaml, pictures) and run no trial")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # a process --workers-per-node starts
    return p


def split_argv(argv: list[str]) -> tuple[list[str], list[str]]:
    """(the tune's own arguments, train.py's after the first `--`)."""
    if "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file, its path escaped (a ? or a % in a folder name stays in the path)."""
    from sqlalchemy.engine import URL

    return URL.create("sqlite", database=str(path)).render_as_string(hide_password=False)


def shown_url(url: str) -> str:
    """A storage URL for a log line or an error: its password hidden."""
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 (not a URL SQLAlchemy reads: shown as given, it holds no parsed password)
        return url


def check_train_args(train_args: list[str], epochs: int) -> tuple[Path | None, tuple[str, ...], bool]:
    """(the base --hyp file, the arguments without it, whether --device is given), after train.py's own parser
    accepted them; flags the search sets for every trial are refused."""
    from detect.engine.options import (  # torch: not for --report-only
        HYP_FROM_CFG,
        given_options,
        parse_options,
    )

    try:
        given = given_options(train_args)
    except SystemExit:  # argparse printed the unknown flag
        raise ValueError("the train.py arguments after -- are not valid (train.py's error above)") from None
    owned = [flag for dest, flag in OWNED_TRAIN_FLAGS.items() if dest in given]
    if owned:
        raise ValueError(f"{', '.join(owned)} after --: the search sets these for every trial (--epochs is the "
                         "tune's own flag; each trial's run folder is under the study folder)")
    parse_options([*train_args, "--epochs", str(epochs)])  # files, values and the hyp file, as train.py checks them
    args, base_hyp, rest = list(train_args), None, []
    while args:
        word = args.pop(0)
        flag, equals, value = word.partition("=")
        # --hyp, or a prefix of it, which train.py's parser takes as --hyp (given says it did)
        if "hyp" in given and len(flag) > 3 and "--hyp".startswith(flag):
            base_hyp = value if equals else (args.pop(0) if args else None)
        else:
            rest.append(word)
    if base_hyp == HYP_FROM_CFG:
        raise ValueError("--hyp cfg cannot be searched over: write the keys you want into a hyp file and pass it")
    return (Path(base_hyp).resolve() if base_hyp else None), tuple(rest), "device" in given


def tune_options(argv: list[str]) -> TuneOptions:
    """The checked options of a command line (`python -m detect.tune` arguments, `--`, train.py arguments)."""
    own, train_args = split_argv(argv)
    args = build_parser().parse_args(own)
    study_dir = Path(args.project).resolve() / args.study
    for flag, value in (("--trials", args.trials), ("--epochs", args.epochs), ("--heartbeat", args.heartbeat),
                        ("--workers-per-node", args.workers_per_node), ("--nproc-per-trial", args.nproc_per_trial),
                        ("--max-failures", args.max_failures)):
        check_at_least(flag, value)
    if not 0 <= args.seed < 2**32:  # NumPy's seeds; each trial draws with seed + its number (mod 2^32)
        raise ValueError(f"--seed must be in 0..{2**32 - 1}, got {args.seed}")
    check_at_least("--startup-trials", args.startup_trials, 0)
    check_at_least("--prune-startup", args.prune_startup, 0)
    prune_after = args.prune_after if args.prune_after is not None else max(1, args.epochs // 4)
    check_at_least("--prune-after", prune_after)
    if args.pruner == "threshold" and args.prune_below is None:
        raise ValueError("--pruner threshold needs --prune-below F (the lowest fitness a trial may keep)")
    base_hyp, rest, device_given = (None, (), False) if args.report_only else check_train_args(train_args,
                                                                                                 args.epochs)
    space_file = Path(args.space).resolve() if args.space else DEFAULT_SPACE
    return TuneOptions(
        study=args.study, study_dir=study_dir, storage=args.storage or sqlite_url(study_dir / "study.db"),
        space_file=space_file, space={} if args.report_only else load_space(space_file), trials=args.trials, epochs=args.epochs,
        seed=args.seed, startup_trials=args.startup_trials, pruner=args.pruner, prune_startup=args.prune_startup,
        prune_after=prune_after, prune_below=args.prune_below, workers_per_node=args.workers_per_node,
        nproc_per_trial=args.nproc_per_trial, heartbeat_s=args.heartbeat, max_failures=args.max_failures,
        train_args=rest, base_hyp=base_hyp, device_given=device_given, report_only=args.report_only,
        worker=args.worker, argv=tuple(own))
