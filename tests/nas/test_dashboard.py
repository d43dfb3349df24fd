"""What a sweep records for the MLflow UI, on a real SQLite store: the experiment's kind and
saved runs-table view, a trial's run name and one-line description."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nas.store.dashboard import VIEW_KEY, runs_url
from nas.store.tracking import TrialRun, open_sweep, set_outcome
from record.schema import EXPERIMENT_KIND, ExperimentTag, Metric, Status, Tag


def _client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def test_a_sweep_tags_its_experiment_also_one_recorded_before(tmp_path: Path) -> None:
    """An experiment created without the tags (an older sweep) gets the kind and the saved
    view when a sweep opens it; the view's columns are keys the record writes, in MLflow's
    ``kind.`key``` form, and the printed URL names the view."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_id = _client(uri).create_experiment("old")
    open_sweep(uri, "old", "key", {}, {})
    tags = _client(uri).get_experiment(exp_id).tags
    assert tags[ExperimentTag.KIND] == EXPERIMENT_KIND
    view = json.loads(tags[ExperimentTag.SHARED_VIEW_PREFIX + VIEW_KEY])
    named = {f"metrics.`{v}`" for k, v in vars(Metric).items() if not k.startswith("_")}
    named |= {f"tags.`{v}`" for k, v in vars(Tag).items() if not k.startswith("_")}
    named |= {"params.`model.n_layers`", "params.`model.residual`"}
    assert set(view["selectedColumns"]) <= named
    assert view["orderByKey"] in view["selectedColumns"]
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": Tag.ARM}]
    assert view["groupBy"]["aggregateFunction"] == "average"
    url = runs_url("http://127.0.0.1:5000", exp_id, tags)
    assert url.endswith(
        f"/#/experiments/{exp_id}/runs?workflowType=machine_learning&viewStateShareKey={VIEW_KEY}"
    )


def test_a_trial_run_is_named_and_described_in_one_line(tmp_path: Path) -> None:
    """A trial's run is named by arm and seed; its description says it runs, then how it ended
    with its final validation loss (the trial's own end), or with the latest validation loss
    where the driver ended it."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, "s", "key", {}, {})
    tags = {Tag.ARM: "block_attnres", Tag.SEED: "3"}
    done = TrialRun(record, "k1", {"train.lr": 0.01}, tags)
    run = _client(uri).get_run(done.run_id)
    assert run.info.run_name == "block_attnres seed 3"
    assert run.data.tags[Tag.NOTE] == "block_attnres seed 3: running"
    done.log_metrics({Metric.FINAL_VAL_LOSS: 3.14159}, step=20)
    done.end(Status.FINISHED)
    note = _client(uri).get_run(done.run_id).data.tags[Tag.NOTE]
    assert note == "block_attnres seed 3: finished, final val loss 3.1416"
    stopped = TrialRun(record, "k2", {"train.lr": 0.02}, {**tags, Tag.SEED: "4"})
    stopped.log_metrics({Metric.VAL_LOSS: 4.5}, step=10)
    stopped.flush()
    set_outcome(record, "k2", Status.STOPPED_EARLY)
    note = _client(uri).get_run(stopped.run_id).data.tags[Tag.NOTE]
    assert note == "block_attnres seed 4: stopped_early, final val loss 4.5000"


def test_a_finished_trial_with_a_routing_alarm_names_it_in_reason_and_description(
    tmp_path: Path,
) -> None:
    """A trial that finished with collapsed routing keeps the alarm as its reason, and its
    description says it after the final loss."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, "s", "key", {}, {})
    done = TrialRun(record, "k1", {"train.lr": 0.01}, {Tag.ARM: "attnres", Tag.SEED: "0"})
    done.log_metrics({Metric.FINAL_VAL_LOSS: 2.5}, step=80)
    alarm = "routing alarm (top-1 mass > 0.95): site 1 collapsed onto the embedding by step 40"
    done.end(Status.FINISHED, alarm, 80)
    tags = _client(uri).get_run(done.run_id).data.tags
    assert tags[Tag.REASON] == alarm
    assert tags[Tag.NOTE] == f"attnres seed 0: finished, final val loss 2.5000; {alarm}"
