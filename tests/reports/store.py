"""A real MLflow store written run by run as ``nas sweep`` records a sweep (no Ray): parent runs,
nested trial runs with the tags a record's trial carries, plan files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from record.schema import PLANS_FOLDER, ROLE_SWEEP, ROLE_TRIAL, Status, Tag


class Store:
    """Writes sweeps the way ``nas sweep`` records them: parent runs and nested trial runs."""

    def __init__(self, uri: str) -> None:
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.uri = uri

    def parent(self, sweep: str, start: int, **tags: str) -> str:
        exp = self.client.get_experiment_by_name(sweep)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(sweep)
        base = {
            Tag.ROLE: ROLE_SWEEP,
            Tag.SWEEP: sweep,
            Tag.COMMAND: f"nas sweep {sweep}",
            Tag.SPACE: sweep,
            Tag.VERSIONS: json.dumps({"python": "3.11"}),
        }
        run = self.client.create_run(exp_id, start_time=start, tags={**base, **tags})
        self.client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    def trial(self, parent: str, key: str, run_status: str | None, **tags: str) -> str:
        exp_id = self.client.get_run(parent).info.experiment_id
        base = {Tag.PARENT: parent, Tag.ROLE: ROLE_TRIAL, Tag.TRIAL_KEY: key, Tag.ARM: "arm"}
        run = self.client.create_run(exp_id, tags={**base, **tags})
        self.client.log_param(run.info.run_id, "train.seed", "0")
        if run_status is not None:  # None: left RUNNING, as a driver killed mid-trial leaves it
            self.client.set_terminated(run.info.run_id, run_status)
        return run.info.run_id

    def plans(self, parent: str, tmp: Path, *plans: dict[str, Any]) -> None:
        for i, plan in enumerate(plans, start=1):
            path = tmp / f"{i:04d}.json"
            path.write_text(json.dumps(plan))
            self.client.log_artifact(parent, str(path), PLANS_FOLDER)


def new(status: Status, step: int = 20, reason: str | None = None) -> dict[str, str]:
    """The tags a new record's trial carries."""
    tags = {Tag.STATUS: status.value, Tag.STATUS_STEP: str(step), Tag.SEED: "0"}
    return tags | ({Tag.REASON: reason} if reason else {})
