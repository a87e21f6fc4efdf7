"""`train.py` / `detect-train`: build everything from the options and run the loop, under python or torchrun.

    torchrun --nproc_per_node=2 train.py            # the default job: small cfg, synthetic data, CPU or GPU
    python -m detect.train                          # the same from anywhere (detect-train when installed)
    python train.py --cfg cfg/yolov3-tiny.cfg --data data/coco.yaml --weights yolov3-tiny.weights --freeze backbone

The pieces are built by `detect.engine.setup.build_trainer`; this module runs them and turns failures into
one line and an exit status.
"""

from __future__ import annotations

import logging
import signal
import sys
import time

from detect.engine.options import TrainOptions, parse_options
from detect.engine.resume import explain_group_failure
from detect.engine.run_loggers import FAILED, FINISHED, KILLED
from detect.engine.setup import build_trainer
from detect.engine.trainer import Trainer
from detect.engine.trainer_state import TrainState
from detect.runtime import dist
from detect.runtime.log import setup_logging

log = logging.getLogger("detect.train")  # not __name__: under `python -m detect.train` that is __main__


def run(opts: TrainOptions, ctx: dist.DistContext) -> TrainState:
    trainer = build_trainer(opts, ctx)
    previous = {sig: signal.signal(sig, _stop_handler(trainer)) for sig in (signal.SIGTERM, signal.SIGINT)}
    run_dir, loggers = trainer.setup.run_dir, trainer.setup.loggers
    last = run_dir / "last.pt"
    try:
        state = trainer.fit()
    except BaseException as e:
        if isinstance(e, Exception):
            explain_group_failure(e, ctx, last)
        if loggers is not None:
            loggers.end(run_dir, *_failure_status(e))
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        trainer.setup.train_loader.close()
        close_evaluation = getattr(trainer.setup.evaluate_fn, "close", None)  # a test's plain callable has none
        if close_evaluation is not None:
            close_evaluation()
    if state.stop_requested:
        note = (f"stopped ({state.stop_reason}) in epoch {state.epoch + 1} of {opts.epochs}, after "
                f"{state.batch_in_epoch} of its batches: {last} holds the run; continue it with --resume {last}")
        log.warning("%s", note)
    else:
        note = state.stop_reason if state.stopped_early else ""
        log.info("done: %s (best fitness %.4f)", run_dir, state.best_fitness)
    if loggers is not None:
        loggers.end(run_dir, KILLED if state.stop_requested else FINISHED, note)
    return state


def _failure_status(e: BaseException) -> tuple[str, str]:
    """(status, note) the run loggers end with when training raised `e`."""
    if isinstance(e, KeyboardInterrupt):
        return KILLED, "Ctrl-C twice: stopped at once, without saving"
    if isinstance(e, SystemExit):
        return KILLED, "stopped at once by a second signal, without saving"
    return FAILED, f"{type(e).__name__}: {e}"


STOP_NAMES = {signal.SIGTERM: "SIGTERM", signal.SIGINT: "Ctrl-C"}
# a signal again within this many seconds is the same stop delivered twice, not a second one: under torchrun a
# terminal's Ctrl-C reaches every rank from the terminal and again from torchrun, which passes it on
REPEAT_GRACE_S = 1.0


def _stop_handler(trainer: Trainer):
    """SIGTERM (schedulers, torchrun) and Ctrl-C (the terminal signals every rank) ask the ranks to stop after the
    current step, all at the same one, and save last.pt mid-epoch; the same signal again (REPEAT_GRACE_S or more
    later) stops at once."""
    first = []  # when the first signal came

    def handle(signum, frame):
        if trainer.stop_signal:  # the second time: now, without saving
            if first and time.monotonic() - first[0] < REPEAT_GRACE_S:
                return
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        first.append(time.monotonic())
        trainer.stop_signal, trainer.stop_reason = True, STOP_NAMES.get(signum, f"signal {signum}")
        log.info("%s: finishing this step, then saving last.pt (the same again stops at once, without saving)",
                 trainer.stop_reason)

    return handle


def main(argv=None) -> int:
    try:
        opts = parse_options(argv)
    except (ValueError, FileNotFoundError) as e:
        print(f"train.py: error: {e}", file=sys.stderr)
        return 2
    rank, world, _ = dist.env_rank()
    setup_logging(rank, world)
    ctx = None
    try:
        ctx = dist.init_distributed(opts.device, opts.dist_timeout)
        state = run(opts, ctx)
        if state.stop_requested and state.stop_reason == STOP_NAMES[signal.SIGINT]:
            return 130  # the shell's convention for Ctrl-C, also when everything was saved
    except KeyboardInterrupt:  # a second Ctrl-C, or one before training started
        log.warning("interrupted (Ctrl-C, twice or before training began): nothing more was saved; a run folder "
                    "with a last.pt continues with --resume PATH/last.pt (--resume alone takes the newest)")
        return 130
    except (ValueError, FileNotFoundError) as e:  # bad input (a file, a value): one line and exit 2, like the tools
        log.error("training failed: %s", e, exc_info=log.isEnabledFor(logging.DEBUG))
        return 2
    except Exception as e:
        log.error("training failed: %s: %s", type(e).__name__, e, exc_info=log.isEnabledFor(logging.DEBUG))
        return 1
    finally:
        dist.destroy(ctx)
    return 0


if __name__ == "__main__":
    sys.exit(main())
