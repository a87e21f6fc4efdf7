"""What a training run reports, through one interface: `RunLogger`, whose implementations are results.csv
(detect.engine.monitor.ResultsCsv), TensorBoard (monitor.TensorBoardLogger) and MLflow
(detect.engine.mlflow_logger.MlflowLogger), and `RunLoggers`, the fan-out the run calls on rank 0 only.

A logger that fails is switched off after one warning: a report is never worth a failed run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

# how a run ended (MLflow's run statuses)
FINISHED, KILLED, FAILED = "FINISHED", "KILLED", "FAILED"

# EvalResult.stats (detect.evaluation.coco.STAT_NAMES, same order) under short names
COCO_STAT_KEYS = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl")


@dataclass(frozen=True)
class RunInfo:
    """What a run is, told to every logger at its start."""

    run_dir: Path
    options: dict  # TrainOptions.to_dict()
    hyp: dict  # Hyp.to_dict()
    world_size: int
    resumed: bool  # --resume (or a restarted group): a logger with its own run continues it


class RunLogger:
    """One place a run reports to; every method does nothing unless a logger overrides it.

    Order: `start` once, then per epoch `log_epoch` (and `log_evaluation` after an evaluation) and `log_plot` for
    each picture written, then `log_checkpoints` and `finish` once at the end, whatever ended the run.
    """

    name = "logger"  # named in the warning when it fails

    def start(self, info: RunInfo) -> None:
        """The run's options and hyperparameters, before its first epoch (also when resumed)."""

    def log_epoch(self, step: int, row: dict) -> None:
        """The results row of epoch `step` (1-based): losses, lr, mAPs when evaluated, fitness, img_s, time, note."""

    def log_evaluation(self, step: int, metrics: dict[str, float], per_class: dict[str, dict[str, float]]) -> None:
        """An evaluation after epoch `step`: `metrics` (map50, map, COCO_STAT_KEYS, voc_map50 with --metric voc*)
        and each class's {"ap50", "ap"} by class name."""

    def log_plot(self, path: Path) -> None:
        """A picture just written into the run folder (written again later: the same name, newer content)."""

    def log_checkpoints(self, best: Path | None, last: Path | None) -> None:
        """The run's checkpoints at its end (None: not written)."""

    def finish(self, status: str, note: str = "") -> None:
        """The run ended: FINISHED (`note`: the early stop's, if any), KILLED (SIGTERM, Ctrl-C) or FAILED (`note`:
        the error line)."""


def evaluation_metrics(result) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """(metrics, per-class AP) of a detect.evaluation EvalResult, as `log_evaluation` takes them."""
    metrics = {"map50": float(result.map50), "map": float(result.map)}
    metrics.update({k: float(v) for k, v in zip(COCO_STAT_KEYS, result.stats)})
    if result.voc is not None:
        metrics["voc_map50"] = float(result.voc.map50)
    per_class = {c.name: {"ap50": float(c.ap50), "ap": float(c.ap)} for c in result.per_class}
    return metrics, per_class


class RunLoggers(RunLogger):
    """The fan-out: each call goes to every logger still on; one that raises is named in a warning once and
    switched off, and the others (and training) go on. Also the run's hooks: `on_evaluation(result)` (the
    evaluator's) and `on_epoch_end(row)` (the Trainer's), which logs the row and then that epoch's evaluation."""

    name = "run loggers"

    def __init__(self, loggers):
        self.loggers = list(loggers)
        self._evaluation = None  # (metrics, per_class) of this epoch's evaluation, until its row arrives
        self._off: list[tuple[RunLogger, str]] = []  # switched off after `start`, and why: still told the end

    def _each(self, method: str, *args) -> None:
        for logger in list(self.loggers):
            try:
                getattr(logger, method)(*args)
            except Exception as e:  # noqa: BLE001 (any failure of a report: warn, switch it off, train on)
                self.loggers.remove(logger)
                why = f"{type(e).__name__}: {e}"
                if method not in ("start", "finish"):  # still told the end (not twice)
                    self._off.append((logger, f"{logger.name} logging stopped in {method} ({why})"))
                log.warning("%s logger failed in %s (%s)%s", logger.name, method, why,
                            "" if method == "finish" else "; it is switched off for the rest of the run, training "
                            "goes on")

    def start(self, info: RunInfo) -> None:
        self._each("start", info)

    def log_epoch(self, step: int, row: dict) -> None:
        self._each("log_epoch", step, row)

    def log_evaluation(self, step: int, metrics: dict[str, float], per_class: dict[str, dict[str, float]]) -> None:
        self._each("log_evaluation", step, metrics, per_class)

    def log_plot(self, path: Path) -> None:
        self._each("log_plot", Path(path))

    def log_checkpoints(self, best: Path | None, last: Path | None) -> None:
        self._each("log_checkpoints", best, last)

    def finish(self, status: str, note: str = "") -> None:
        self._each("finish", status, note)
        # a logger switched off mid-run still gets the end (an MLflow run left RUNNING forever misleads), with why
        # it stopped; best effort: it failed once already
        for logger, why in self._off:
            try:
                logger.finish(status, f"{note}; {why}" if note else why)
            except Exception as e:  # noqa: BLE001
                log.debug("%s logger: finish failed too (%s)", logger.name, e)
        self._off = []

    def on_evaluation(self, result) -> None:
        try:
            self._evaluation = evaluation_metrics(result)
        except Exception as e:  # noqa: BLE001 (the epoch's row is still logged)
            log.warning("the evaluation's metrics are not logged (%s: %s)", type(e).__name__, e)

    def on_epoch_end(self, row: dict) -> None:
        evaluation, self._evaluation = self._evaluation, None
        self.log_epoch(int(row["epoch"]), row)
        if evaluation is not None:
            self.log_evaluation(int(row["epoch"]), *evaluation)

    def end(self, run_dir: Path, status: str, note: str = "") -> None:
        """The checkpoints that exist, then the status: what every way a run ends reports."""
        best, last = (run_dir / name for name in ("best.pt", "last.pt"))
        self.log_checkpoints(best if best.is_file() else None, last if last.is_file() else None)
        self.finish(status, note)
