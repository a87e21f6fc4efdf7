"""A real MLflow tracking store for the tests: a SQLite backend store and artifact folders in a temporary
folder, made once per test module (MLflow's schema migrations take seconds), one experiment per test.

    store = MlflowStore.create(tmp_path_factory.mktemp("mlflow"))
    name = store.experiment("resume")        # runs logged into it keep their artifacts under store.root
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.uri)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class MlflowStore:
    uri: str
    root: Path
    client: object  # mlflow.tracking.MlflowClient

    @classmethod
    def create(cls, root: Path) -> MlflowStore:
        from mlflow.tracking import MlflowClient

        uri = f"sqlite:///{root / 'mlflow.db'}"
        client = MlflowClient(uri)
        client.search_experiments()  # creates the schema now, not inside the first test's run
        return cls(uri, root, client)

    def experiment(self, name: str) -> str:
        """A new experiment whose artifacts go under this store's folder (not MLflow's ./mlruns default)."""
        self.client.create_experiment(name, artifact_location=(self.root / "artifacts" / name).as_uri())
        return name

    def runs(self, experiment: str) -> list:
        """Every run of the experiment, oldest first."""
        found = self.client.get_experiment_by_name(experiment)
        return sorted(self.client.search_runs([found.experiment_id]), key=lambda r: r.info.start_time)

    def history(self, run_id: str, metric: str) -> list[tuple[int, float]]:
        """(step, value) of each logged value of `metric`, by step."""
        return sorted((m.step, m.value) for m in self.client.get_metric_history(run_id, metric))

    def artifacts(self, run_id: str) -> set[str]:
        return {a.path for a in self.client.list_artifacts(run_id)}
