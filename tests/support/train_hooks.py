"""train.py with test hooks, for the torchrun tests (tests/test_multinode*.py); never imported by the package.

    python -m torch.distributed.run ... tests/support/train_hooks.py <train.py flags>

Environment (read here only):
- DETECT_TEST_STEP_SLEEP=S: every micro-batch takes S seconds longer (epochs long enough to cut into);
- DETECT_TEST_HANG=RANK:MICRO:SECONDS: that global rank sleeps SECONDS before micro-batch MICRO (a hang, not a
  crash: the process stays alive);
- DETECT_TEST_FSIZE_AFTER_EPOCH=EPOCHS:BYTES: after that many epochs, rank 0 may write no file larger than BYTES
  (RLIMIT_FSIZE, SIGXFSZ ignored so that writes fail with EFBIG, as on a full disk).
"""

import os
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from detect import train
from detect.engine.trainer import Trainer


def _install_hooks() -> None:
    step_sleep = float(os.environ.get("DETECT_TEST_STEP_SLEEP", "0"))
    hang = os.environ.get("DETECT_TEST_HANG")
    hang_rank, hang_micro, hang_s = (int(hang.split(":")[0]), int(hang.split(":")[1]),
                                     float(hang.split(":")[2])) if hang else (-1, -1, 0.0)
    fsize = os.environ.get("DETECT_TEST_FSIZE_AFTER_EPOCH")
    original_step, original_epoch = Trainer._micro_step, Trainer.train_epoch

    def micro_step(self, images, targets, micro_index, sync):
        if step_sleep:
            time.sleep(step_sleep)
        if self.setup.ctx.rank == hang_rank and micro_index == hang_micro:
            time.sleep(hang_s)
        return original_step(self, images, targets, micro_index, sync)

    def train_epoch(self):
        if fsize and self.setup.ctx.rank == 0 and self.state.epoch == int(fsize.split(":")[0]):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            limit = int(fsize.split(":")[1])
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        return original_epoch(self)

    Trainer._micro_step, Trainer.train_epoch = micro_step, train_epoch


if __name__ == "__main__":
    _install_hooks()
    sys.exit(train.main(sys.argv[1:]))
