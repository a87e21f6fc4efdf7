"""`train.py` / `detect-train`: build everything from the options and run the loop, under python or torchrun.

    torchrun --nproc_per_node=2 train.py            # the default job: small cfg, synthetic data, CPU or GPU
    python train.py --cfg cfg/yolov3-tiny.cfg --data data/coco.yaml --weights yolov3-tiny.weights --freeze backbone

The pieces are built by `detect.engine.setup.build_trainer`; this module runs them and turns failures into
one line and an exit status.
"""

from __future__ import annotations

import logging
import signal
import sys

from detect.engine.options import TrainOptions, parse_options
from detect.engine.resume import explain_group_failure
from detect.engine.setup import build_trainer
from detect.engine.trainer import Trainer
from detect.engine.trainer_state import TrainState
from detect.runtime import dist
from detect.runtime.log import setup_logging

log = logging.getLogger(__name__)


def run(opts: TrainOptions, ctx: dist.DistContext) -> TrainState:
    trainer = build_trainer(opts, ctx)
    previous = signal.signal(signal.SIGTERM, _sigterm_handler(trainer))
    try:
        state = trainer.fit()
    except Exception as e:
        explain_group_failure(e, ctx, trainer.setup.run_dir / "last.pt")
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        trainer.setup.train_loader.close()
    log.info("done: %s (best fitness %.4f)", trainer.setup.run_dir, state.best_fitness)
    return state


def _sigterm_handler(trainer: Trainer):
    def handle(signum, frame):
        if trainer.stop_signal:  # a second SIGTERM: stop now
            raise SystemExit(128 + signum)
        trainer.stop_signal = True

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
        run(opts, ctx)
    except KeyboardInterrupt:
        log.warning("interrupted")
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
