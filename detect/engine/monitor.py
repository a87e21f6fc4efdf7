"""What a training run writes into its folder on rank 0: the pictures (`RunMonitor`: labels.png at the start,
train_batch*.jpg of the first batches, results.png after each evaluation and at the end, the evaluation plots
(detect.plots.evaluation) whenever best.pt improves), and the run loggers of the folder (`ResultsCsv`,
`TensorBoardLogger`); `make_loggers` gathers those with MLflow's (detect.engine.run_loggers).

Rendering happens once per evaluation, not per step; a plot that fails logs a warning and training goes on.
"""

from __future__ import annotations

import csv
import io
import logging
import os
from collections.abc import Callable
from pathlib import Path

from detect.engine.run_loggers import RunLogger, RunLoggers
from detect.runtime.files import atomic_write_text
from detect.runtime.tensorboard import TensorBoardLog

log = logging.getLogger(__name__)

CSV_FIELDS = ("epoch", "box", "obj", "cls", "lr", "map50", "map", "fitness", "img_s", "time", "note")

TRAIN_MOSAICS = 3  # train_batch0..2.jpg: the first batches of the first epoch


class RunMonitor:
    """The plots of one run; create it on rank 0 only. `on_plot(path)` hears of every picture written (the run
    loggers' `log_plot`).

    Hooks: `on_batch(epoch, index, images, targets, paths)` (Trainer), `on_evaluation(result)` (the evaluator
    callable of detect.engine.setup), `on_epoch_end(row)` after results.csv got the row (its `best` key is True when
    best.pt was just written).
    """

    def __init__(self, run_dir: str | Path, names, epochs: int, val_source=None, plots: bool = True,
                 on_plot: Callable[[Path], None] | None = None):
        self.run_dir, self.names, self.epochs = Path(run_dir), list(names), epochs
        self.val_source, self.plots, self.on_plot = val_source, plots, on_plot
        self._evaluation = None  # the result of this epoch's evaluation, if any

    def _guarded(self, what: str, draw: Callable[[], object]) -> None:
        """Draw; the files `draw` returns (a path or a list of them) go to `on_plot`."""
        try:
            written = draw()
        except Exception as e:  # noqa: BLE001 (a picture is never worth a failed run)
            log.warning("could not write %s: %s: %s", what, type(e).__name__, e)
            return
        if self.on_plot is not None:
            for path in written if isinstance(written, (list, tuple)) else [written]:
                if path is not None:
                    self.on_plot(Path(path))

    def plot_labels(self, records) -> None:
        """labels.png of the training labels (once, for a new run)."""
        if self.plots:
            from detect.plots.labels import label_statistics, plot_labels

            self._guarded("labels.png", lambda: plot_labels(label_statistics(records), self.names,
                                                            self.run_dir / "labels.png"))

    def on_batch(self, epoch: int, index: int, images, targets, paths=()) -> None:
        if self.plots and epoch == 0 and index < TRAIN_MOSAICS:
            from detect.data.augmentation.device_augment import DeviceBatch
            from detect.data.augmentation.device_paint import paint_uint8
            from detect.plots.mosaics import batch_tiles, draw_mosaic

            path = self.run_dir / f"train_batch{index}.jpg"
            pixels = paint_uint8(images) if isinstance(images, DeviceBatch) else images
            self._guarded(path.name, lambda: draw_mosaic(batch_tiles(pixels.numpy(), targets.numpy(), paths),
                                                         self.names, path))

    def on_evaluation(self, result) -> None:
        self._evaluation = result

    def on_epoch_end(self, row: dict) -> None:
        evaluation, self._evaluation = self._evaluation, None
        if not self.plots:
            return
        if evaluation is not None or row["epoch"] >= self.epochs:
            from detect.plots.results import plot_results, read_results_csv

            self._guarded("results.png", lambda: plot_results(read_results_csv(self.run_dir / "results.csv"),
                                                              self.run_dir / "results.png"))
        if row.get("best") and evaluation is not None and self.val_source is not None:
            from detect.plots.evaluation import write_eval_plots

            self._guarded("the evaluation plots", lambda: write_eval_plots(self.run_dir, evaluation.match,
                                                                           self.val_source))


def chain(*callbacks: Callable | None) -> Callable:
    """One callable calling each given callback in turn with the same arguments."""
    present = [c for c in callbacks if c is not None]

    def call(*args):
        for callback in present:
            callback(*args)

    return call


class ResultsCsv(RunLogger):
    """results.csv of a run, one row per epoch; the whole file is rewritten atomically, so a reader (or a kill
    mid-write) never sees a half row."""

    name = "results.csv"

    def __init__(self, path: Path):
        self.path = path

    def log_epoch(self, step: int, row: dict) -> None:
        out = io.StringIO()
        old = self.path.read_text() if self.path.exists() else ""
        fields = old.splitlines()[0].split(",") if old else list(CSV_FIELDS)  # a resumed run keeps its columns
        w = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        if not old:
            w.writeheader()
        w.writerow({k: (f"{row[k]:.6g}" if isinstance(row.get(k), float) else row.get(k, "")) for k in fields})
        try:
            atomic_write_text(self.path, old + out.getvalue())
        except OSError as e:  # a report, not state: the checkpoint decides whether the run can go on
            log.warning("%s not updated (%s: %s); it is as it was, and training goes on", self.path,
                        type(e).__name__, e)
        log.info("epoch %d: box %.4f obj %.4f cls %.4f lr %.2e mAP@0.5 %s (%.1f s)", row["epoch"], row["box"],
                 row["obj"], row["cls"], row["lr"], f"{row['map50']:.4f}" if "map50" in row else "-", row["time"])


class TensorBoardLogger(RunLogger):
    """The epoch scalars in a TensorBoard event file of the run folder (detect.runtime.tensorboard)."""

    name = "TensorBoard"

    def __init__(self, run_dir: Path):
        self.run_dir, self.board = run_dir, None

    def start(self, info) -> None:
        self.board = TensorBoardLog(self.run_dir)

    def log_epoch(self, step: int, row: dict) -> None:
        self.board.log_epoch(row)

    def finish(self, status: str, note: str = "") -> None:
        self.board.close()


def make_loggers(opts, run_dir: Path) -> RunLoggers:
    """The run's loggers (rank 0's): results.csv always; TensorBoard with --tensorboard; MLflow with --mlflow,
    MLFLOW_TRACKING_URI in the environment (which alone, without the package installed, is a warning), or a resumed
    run that logged to MLflow (its mlflow.json)."""
    from detect.engine.mlflow_logger import MlflowLogger, continues_mlflow_run, mlflow_available
    from detect.runtime.assets import package_dir

    loggers = [ResultsCsv(run_dir / "results.csv")]
    if opts.tensorboard:
        loggers.append(TensorBoardLogger(run_dir))
    if opts.mlflow or os.environ.get("MLFLOW_TRACKING_URI") or continues_mlflow_run(opts, run_dir):
        if mlflow_available():
            loggers.append(MlflowLogger(opts.mlflow_experiment, source_dir=package_dir()))
        else:  # --mlflow without the package is refused before the run (detect.engine.options)
            log.warning("MLFLOW_TRACKING_URI is set (or the resumed run logged to MLflow) but mlflow is not "
                        "installed: this run is not logged to MLflow "
                        "(pip install -e \".[mlflow]\")")
    return RunLoggers(loggers)
