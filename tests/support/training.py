"""Tiny training runs the tests share: a generated dataset and quiet hyperparameters, a trainer that stops as if
SIGTERM arrived, and train.py with relative paths as a user types them."""

from detect.engine.options import TrainOptions
from detect.engine.trainer import Trainer
from detect.train import main

QUIET_HYP = ("lr0: 0.02\nwarmup_epochs: 0\nwarmup_min_steps: 1\nema_tau: 5\nbn_momentum: 0.1\n"
             "hsv_h: 0\nhsv_s: 0\nhsv_v: 0\ntranslate: 0\nscale: 0\nfliplr: 0.5\nmosaic: 0\n")


def tiny_options(tmp, **changes) -> TrainOptions:
    data = tmp / "tiny.yaml"
    data.write_text(f"format: synthetic\npath: {tmp / 'gen'}\nseed: 1\ntrain_images: 16\nval_images: 8\n"
                    "image_sizes: [64]\nmin_side: 10\nmax_side: 28\nmax_objects: 3\n")
    hyp = tmp / "hyp.yaml"
    hyp.write_text(QUIET_HYP)
    base = dict(data=str(data), hyp=str(hyp), img_size=64, batch_size=4, nbs=8, epochs=3, workers=0,
                project=str(tmp / "runs"), name="t", exist_ok=True, device="cpu", cache_dir=str(tmp / "cache"))
    base.update(changes)
    return TrainOptions(**base)


class StopAtStep(Trainer):
    """Behaves as if SIGTERM arrived at optimiser step `stop_at`."""

    stop_at = None

    def _optimizer_step(self):
        lr = super()._optimizer_step()
        if self.stop_at is not None and self.state.step == self.stop_at:
            self.stop_signal = True
        return lr


TINY_DATA = ("format: synthetic\npath: gen\nseed: 1\ntrain_images: 8\nval_images: 4\nimage_sizes: [64]\n"
             "min_side: 10\nmax_side: 28\nmax_objects: 2\n")


def train_tiny(*extra):
    """train.py on TINY_DATA in the current folder (tiny.yaml, hyp.yaml), one line per option."""
    return main(["--data", "tiny.yaml", "--hyp", "hyp.yaml", "--img-size", "64", "--batch-size", "4", "--nbs", "8",
                 "--workers", "0", "--device", "cpu", "--project", "runs", "--name", "r", "--cache-dir", "cache",
                 "--no-plots", *extra])
