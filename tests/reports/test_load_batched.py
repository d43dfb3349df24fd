"""``reports.load`` reads a sweep's validation curves in batches: on a database store one query
per metric for many runs, on any other store (a tracking server) one request per run and metric
from a few threads. Either way the curves are exactly what one ``get_metric_history`` per run and
metric gives, in the same order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from record.schema import Metric
from reports import load


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[Any]]:
    """Five runs: steps logged out of order, a step logged twice, a run without ``val/bpb``,
    a run with no validation metric at all."""
    from mlflow.tracking import MlflowClient

    root: Path = tmp_path_factory.mktemp("batched")
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.create_experiment("batched")
    for i in range(5):
        run_id = client.create_run(exp).info.run_id
        if i == 4:
            client.log_metric(run_id, Metric.TRAIN_LOSS, 1.0, step=1)
            continue
        for step, t in ((20, 1000), (10, 2000), (30, 3000), (20, 4000)):
            client.log_metric(run_id, Metric.VAL_LOSS, i + step / 100, timestamp=t, step=step)
            if i != 2:
                client.log_metric(run_id, Metric.VAL_BPB, i - step / 100, timestamp=t, step=step)
    return client, client.search_runs([exp])


def one_call_each(client: Any, trials: list[Any]) -> pd.DataFrame:
    """The curves as read before batching: one ``get_metric_history`` per run and metric."""
    return pd.DataFrame(
        [
            {"run_id": r.info.run_id, "metric": key, "step": m.step, "value": m.value}
            for r in trials
            for key in load.CURVE_METRICS
            if key in r.data.metrics
            for m in client.get_metric_history(r.info.run_id, key)
        ],
        columns=["run_id", "metric", "step", "value"],
    )


class NoBulk:
    """A client whose store has no bulk call, as a tracking server's ``RestStore`` has none."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def get_metric_history(self, run_id: str, key: str) -> list[Any]:
        return list(self.client.get_metric_history(run_id, key))


def test_database_store_reads_in_batches_the_same_curves(
    recorded: tuple[Any, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SQL store answers with its bulk query (batches of two runs here), never a call per
    run, and the frame equals one call per run and metric."""
    client, trials = recorded
    expected = one_call_each(client, trials)
    store = client._tracking_client.store

    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a metric history was read one run at a time")

    monkeypatch.setattr(store, "get_metric_history", refused)
    monkeypatch.setattr(load, "BULK_RUNS", 2)
    got = load._curves(client, trials)
    assert len(got) == 4 * 4 + 3 * 4  # four runs with val/loss, three with val/bpb, 4 points
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


def test_other_stores_read_concurrently_the_same_curves(recorded: tuple[Any, list[Any]]) -> None:
    """Without a bulk call, one request per run and metric from threads, in the same order."""
    client, trials = recorded
    got = load._curves(NoBulk(client), trials)
    pd.testing.assert_frame_equal(got, one_call_each(client, trials), check_exact=True)
