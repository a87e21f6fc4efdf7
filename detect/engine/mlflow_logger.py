"""MLflow behind the run-logger interface (detect.engine.run_loggers), on rank 0: one MLflow run per training
run, with the options and hyperparameters as params, each epoch's results and evaluation as metrics at step =
the epoch, the plots and best.pt as artifacts, tags (cfg, data, world size, git commit, run folder, note) and the
run's status. `--resume` continues the same MLflow run: its id is kept in the run folder (RUN_FILE).

Optional: `pip install -e ".[mlflow]"` (mlflow-skinny, the tracking client, with SQLAlchemy and alembic for a
`sqlite:///` store); `mlflow ui` needs the full `mlflow` package. The store is MLFLOW_TRACKING_URI's, else for a
resumed run the one its RUN_FILE records, else MLflow's default (sqlite:///mlflow.db in the working folder). A
server that does not answer within PROBE_TIMEOUT_S is one warning and the run goes on without MLflow (MLflow's own
client retries for minutes).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from detect.engine.run_loggers import RunInfo, RunLogger
from detect.runtime.files import atomic_write_text
from detect.runtime.tensorboard import SCALAR_TAGS

log = logging.getLogger(__name__)

RUN_FILE = "mlflow.json"  # in the run folder: the store and the run id a resumed run continues
# results row key -> metric: TensorBoard's tags, and the two it leaves out
EPOCH_METRICS = {**SCALAR_TAGS, "fitness": "val/fitness", "time": "speed/epoch_s"}
MAX_PARAM_LENGTH = 500  # the longest param value every MLflow version accepts; longer ones are cut
BATCH = 100  # params per log_batch call (MLflow's limit)
PROBE_TIMEOUT_S = 5.0  # the first contact with a tracking server: MLflow's client would retry for minutes


def mlflow_available() -> bool:
    return importlib.util.find_spec("mlflow") is not None


def flatten(values: dict, prefix: str = "") -> dict[str, str]:
    """{"opts": {"epochs": 3}} -> {"opts.epochs": "3"}: nested dicts joined with dots, every value as text."""
    flat = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        else:
            text = str(value)
            flat[name] = text if len(text) <= MAX_PARAM_LENGTH else text[: MAX_PARAM_LENGTH - 3] + "..."
    return flat


def git_commit(folder: Path | None) -> str | None:
    """The commit checked out in `folder`, or None (not a git checkout, no git, any failure)."""
    if folder is None:
        return None
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def metric_key(text: str) -> str:
    """A class name as one part of a metric name: MLflow takes letters, digits, _ - . : / and spaces in a name that
    posixpath.normpath leaves as it is, of at most 250 characters; a class name is one level, so its slashes and
    a name of dots only become _, and it is cut to 200 characters."""
    key = re.sub(r"[^\w\-.: ]", "_", text)[:200]
    return "_" * max(len(key), 1) if not key.strip(". ") else key


def class_metric_keys(names) -> dict[str, str]:
    """{class name: its metric_key}, made unique: a name that cleans up like another gets its place in `names`
    appended (and more if that is taken too): otherwise one class's AP would overwrite the other's."""
    keys = [metric_key(n) for n in names]
    seen = {k: keys.count(k) for k in keys}
    taken, out = set(), {}
    for i, (name, key) in enumerate(zip(names, keys)):
        if seen[key] > 1 or key in taken:
            key = f"{key}_{i}"
            while key in taken or key in seen:
                key += "_"
        taken.add(key)
        out[name] = key
    return out


def absolute_uri(uri: str) -> str:
    """`uri` with a relative SQLite file or folder made absolute: the store a run records must be the same store
    when it resumes from another working folder."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////") and ":memory:" not in uri:
        return f"sqlite:///{Path(uri[len('sqlite:///'):]).resolve()}"
    if "://" not in uri and not uri.startswith(("databricks", "uc:")):  # a plain folder: a file store
        return Path(uri).resolve().as_uri()
    return uri


def recorded_run(run_dir: Path) -> dict:
    """The run folder's RUN_FILE ({"tracking_uri", "run_id"}), or {} when there is none; unreadable: ValueError."""
    path = run_dir / RUN_FILE
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path} is not readable ({type(e).__name__}: {e})") from e
    if not isinstance(saved, dict) or not isinstance(saved.get("run_id"), str):
        raise ValueError(f"{path} names no MLflow run (expected {{\"tracking_uri\": ..., \"run_id\": ...}})")
    return saved


def continues_mlflow_run(opts, run_dir: Path) -> bool:
    """A resumed run whose folder has a RUN_FILE goes on logging to MLflow, even without --mlflow or
    MLFLOW_TRACKING_URI in this shell (the run began with MLflow on)."""
    return opts.resume is not None and (run_dir / RUN_FILE).is_file()


def check_reachable(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise ConnectionError naming `uri` when an http(s) tracking server gives no answer within `timeout_s`;
    any HTTP answer (even an error status: a proxy, a login) counts as reachable. Other stores: nothing to do."""
    if not uri.startswith(("http:", "https:")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s):
            pass
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise ConnectionError(f"the MLflow tracking server {uri} did not answer within {timeout_s:.0f} s "
                              f"({reason}); check MLFLOW_TRACKING_URI or start the server") from None


class MlflowLogger(RunLogger):
    """One MLflow run of a training run. `experiment`: the experiment a new run goes into (made if missing);
    `tracking_uri`: None for MLFLOW_TRACKING_URI or MLflow's default; `source_dir`: the checkout whose commit is
    tagged. Nothing is contacted before `start`."""

    name = "MLflow"

    def __init__(self, experiment: str = "detect", tracking_uri: str | None = None, source_dir: Path | None = None):
        self.experiment, self.tracking_uri, self.source_dir = experiment, tracking_uri, source_dir
        self.client = self.run_id = None

    def start(self, info: RunInfo) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        saved = self._recorded(info.run_dir) if info.resumed else {}
        uri = self._store(saved) or mlflow.get_tracking_uri()
        check_reachable(uri)  # before MLflow's client, which retries an absent server for minutes
        self.client = MlflowClient(uri)
        params = flatten({"opts": info.options, "hyp": info.hyp})
        self.run_id = self._continued_run(info.run_dir, saved, uri) if info.resumed else None
        if self.run_id is None:
            self.run_id = self._new_run(info, uri)
            self._log_params(params)
        else:
            self.client.update_run(self.run_id, status="RUNNING")
            if "note" in self.client.get_run(self.run_id).data.tags:  # the stop's note; the end sets its own
                self.client.delete_tag(self.run_id, "note")
            self._log_resumed_params(params)
        run = self.client.get_run(self.run_id)
        local = not uri.startswith(("http:", "https:", "databricks"))  # a server shows its runs itself
        log.info("MLflow: run %s (%s) in experiment %r of %s%s", run.info.run_name, self.run_id,
                 self.client.get_experiment(run.info.experiment_id).name, uri,
                 f"; to see it: mlflow ui --backend-store-uri {uri}" if local else "")

    def _new_run(self, info: RunInfo, uri: str) -> str:
        options = info.options
        tags = {"cfg": options.get("cfg") or f"the cfg of {options.get('weights')}", "data": str(options.get("data")),
                "world_size": str(info.world_size), "run_dir": str(info.run_dir.resolve())}
        if commit := git_commit(self.source_dir):
            tags["mlflow.source.git.commit"] = commit
        run = self.client.create_run(self._experiment_id(), tags=tags, run_name=info.run_dir.name)
        atomic_write_text(info.run_dir / RUN_FILE, json.dumps({"tracking_uri": absolute_uri(uri),
                                                               "run_id": run.info.run_id}))
        return run.info.run_id

    def _experiment_id(self) -> str:
        from mlflow.exceptions import MlflowException

        found = self.client.get_experiment_by_name(self.experiment)
        if found is not None:
            return found.experiment_id
        try:
            return self.client.create_experiment(self.experiment)
        except MlflowException:  # made meanwhile by another run (parallel trials): take it
            found = self.client.get_experiment_by_name(self.experiment)
            if found is None:
                raise
            return found.experiment_id

    def _recorded(self, run_dir: Path) -> dict:
        try:
            return recorded_run(run_dir)
        except ValueError as e:
            log.warning("MLflow: %s; the resumed run is logged as a new MLflow run", e)
            return {}

    def _store(self, saved: dict) -> str | None:
        """The tracking URI: the one given (MLFLOW_TRACKING_URI, or the logger's) over the one the resumed run
        recorded, said in one line when they differ; None: MLflow's default."""
        given = self.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or None
        recorded = saved.get("tracking_uri")
        if given and recorded and absolute_uri(given) != absolute_uri(recorded):
            log.warning("MLflow: MLFLOW_TRACKING_URI %s is used, not the store %s that this run's %s records (its "
                        "run %s continues only if it is in %s; unset the variable to go on in the recorded store)",
                        given, recorded, RUN_FILE, saved["run_id"], given)
        return given or recorded

    def _continued_run(self, run_dir: Path, saved: dict, uri: str) -> str | None:
        """The MLflow run this run folder's RUN_FILE names, if it is in this store; else None (a new MLflow run,
        said why)."""
        from mlflow.exceptions import MlflowException

        if not saved:
            log.info("MLflow: %s names no run; the resumed run is logged as a new MLflow run", run_dir / RUN_FILE)
            return None
        try:
            self.client.get_run(saved["run_id"])
        except MlflowException as e:
            log.warning("MLflow: run %s (%s) is not in %s (%s); the resumed run is logged as a new MLflow run",
                        saved["run_id"], run_dir / RUN_FILE, uri, e)
            return None
        return saved["run_id"]

    def _log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in params.items()]
        for i in range(0, len(items), BATCH):
            self.client.log_batch(self.run_id, params=items[i:i + BATCH])

    def _log_resumed_params(self, params: dict[str, str]) -> None:
        """A param cannot change: the new ones are logged, a changed one (--epochs, --resume, ...) as tag
        `resumed.<name>`."""
        logged = self.client.get_run(self.run_id).data.params
        self._log_params({k: v for k, v in params.items() if k not in logged})
        for key, value in params.items():
            if key in logged and logged[key] != value:
                self.client.set_tag(self.run_id, f"resumed.{key}", value)

    def _log_metrics(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(v), now, step) for key, v in values.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def log_epoch(self, step: int, row: dict) -> None:
        self._log_metrics(step, {name: row.get(key) for key, name in EPOCH_METRICS.items()})

    def log_evaluation(self, step: int, metrics: dict[str, float], per_class: dict[str, dict[str, float]]) -> None:
        values = {f"coco/{k}": v for k, v in metrics.items() if k not in ("map50", "map")}  # those two: log_epoch's
        keys = class_metric_keys(list(per_class))
        for name, aps in per_class.items():
            values[f"class_AP50/{keys[name]}"] = aps["ap50"]
            values[f"class_AP/{keys[name]}"] = aps["ap"]
        self._log_metrics(step, values)

    def log_plot(self, path: Path) -> None:
        self.client.log_artifact(self.run_id, str(path))

    def log_checkpoints(self, best: Path | None, last: Path | None) -> None:
        """best.pt as an artifact; last.pt (about three times its size: weights, EMA and optimiser state) stays in
        the run folder for --resume, its path a tag."""
        if best is not None:
            self.client.log_artifact(self.run_id, str(best))
        if last is not None:
            self.client.set_tag(self.run_id, "last_pt", str(last.resolve()))

    def finish(self, status: str, note: str = "") -> None:
        if note:
            self.client.set_tag(self.run_id, "note", note)
        self.client.set_terminated(self.run_id, status)
