"""`python -m detect.tune`: a hyperparameter search over train.py with Optuna, in a storage that resumes it.

    python -m detect.tune --study kangaroo --trials 30 --epochs 10 -- --cfg cfg/yolov3-tiny.cfg \\
        --weights ../shared/weights/yolov3-tiny.weights --data data/kangaroo.yaml --img-size 416 --batch-size 8

The options are checked (detect.tune.options), the study is created in its storage, the workers of this machine
run trials until the study has --trials finished (detect.tune.worker), and the report is written from the
storage (detect.tune.report). docs/tuning.md has the whole story.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from detect.runtime.log import setup_logging as setup_console
from detect.tune.launch import WORKER_ENV, own_placement, run_workers
from detect.tune.options import TuneOptions, shown_url, tune_options

log = logging.getLogger("detect.tune")


def setup_logging() -> None:
    """The project's console logging (INFO and up on stdout), each line prefixed with its worker when several run."""
    setup_console(0, 1)
    worker = os.environ.get(WORKER_ENV)
    if worker:
        for handler in logging.getLogger("detect").handlers:
            handler.setFormatter(logging.Formatter(f"[worker {worker.split('/')[0]}] %(message)s"))


def _study(opts: TuneOptions):
    from detect.tune.storage import open_storage, open_study
    from detect.tune.worker import make_pruner, make_sampler

    storage = open_storage(opts.storage, opts.heartbeat_s, opts.grace_s)
    return open_study(storage, opts.study, make_sampler(opts), make_pruner(opts))


def print_study_report(opts: TuneOptions) -> None:
    from detect.tune.report import write_report

    print(write_report(_study(opts), opts.study_dir), flush=True)


def _raise_interrupt(signum, frame):
    # SIGTERM as Ctrl-C: the running trial is stopped (train.py saves last.pt), failed and queued again. Once:
    # a second SIGTERM (a process-group kill reaches a worker directly and through its launcher) would interrupt
    # that stop and kill train.py unsaved; a second Ctrl-C still stops at once
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt


def search(opts: TuneOptions) -> int:
    from detect.tune.worker import run_worker

    if opts.worker or opts.workers_per_node == 1:
        place = own_placement(opts)
        signal.signal(signal.SIGTERM, _raise_interrupt)
        return run_worker(opts, place.device_args, {**os.environ, **place.env})
    return run_workers(opts)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    setup_logging()
    opts = None
    try:
        opts = tune_options(argv)
        if opts.report_only:
            print_study_report(opts)
            return 0
        _study(opts)  # created here, once, before several workers could race to create it
        if not opts.worker:
            log.info("study %s in %s: %d trials of %d epochs over %d hyperparameters (%s); trials in %s",
                     opts.study, shown_url(opts.storage), opts.trials, opts.epochs, len(opts.space), opts.space_file,
                     opts.study_dir)
        code = search(opts)
    except (ValueError, FileNotFoundError) as e:
        print(f"python -m detect.tune: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if opts is not None:
            log.warning("interrupted; the same command resumes the search from %s", shown_url(opts.storage))
        return 130
    if not opts.worker:
        print_study_report(opts)
    return code
