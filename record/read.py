"""The read primitives writer and reader share: a sweep's parent runs and trial runs, which of
them ``nas sweep --restart`` left live, one run, and the sweeps a store holds. A run read to be
interpreted (its status, seed, reason) is first brought to the current shape (``upgraded``,
``record.upgrade``); the searches return MLflow's runs as stored, which only route.

The searches are MLflow's ``search_runs`` over one experiment, by the tags ``record.schema``
names; ``MAX_RUNS`` is the most runs one search returns (a sweep of more trials than that is
past what the harness records).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from record.client import open_store
from record.errors import first_line
from record.redact import redact
from record.schema import ROLE_SWEEP, ROLE_TRIAL, Tag
from record.upgrade import RunRecord, upgrade
from record.uri import missing_sqlite

MAX_RUNS = 50_000


@dataclass(frozen=True)
class RecordedRun:
    """One run as recorded: params (strings, as MLflow keeps them), tags, latest metrics, and
    where its artifacts are (its dilution profiles, for a trial)."""

    run_id: str
    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]
    artifact_uri: str = ""


@dataclass(frozen=True)
class UpgradedData:
    """A run's data as MLflow's ``Run.data`` offers it, in the current shape."""

    params: dict[str, str]
    tags: dict[str, str]
    metrics: dict[str, float]


@dataclass(frozen=True)
class UpgradedRun:
    """An MLflow run (``info`` as stored) whose ``data`` is in the current shape."""

    info: Any
    data: UpgradedData


def upgraded(run: Any) -> UpgradedRun:
    """An MLflow run with its params, tags and metrics brought to the current shape
    (``record.upgrade.upgrade``); ValueError, one line naming the run, for a record no step
    can read."""
    data = run.data
    try:
        found = upgrade(RunRecord(dict(data.params), dict(data.tags), dict(data.metrics)))
    except ValueError as err:
        raise ValueError(f"run {run.info.run_id}: {err}") from None
    return UpgradedRun(
        run.info, UpgradedData(dict(found.params), dict(found.tags), dict(found.metrics))
    )


def artifact_text(client: Any, run_id: str, path: str) -> str | None:
    """A text file run ``run_id`` keeps as an artifact; None where it has none."""
    return downloaded_text(lambda folder: client.download_artifacts(run_id, path, folder))


def downloaded_text(download: Callable[[str], str]) -> str | None:
    """The text of the one artifact ``download`` copies into the folder it is given (a
    temporary one, gone after) and whose local path it returns; None where the store has no
    such artifact."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            found = download(tmp)
        except Exception:  # MLflow raises its own or OSError for a missing artifact
            return None
        return Path(found).read_text()


def runs_by_role(client: Any, experiment_id: str, role: str) -> list[Any]:
    """Every run of the experiment with ``nas.role`` = ``role`` (``ROLE_SWEEP``,
    ``ROLE_TRIAL``), archived or not."""
    query = f"tags.`{Tag.ROLE}` = '{role}'"
    return list(client.search_runs([experiment_id], query, max_results=MAX_RUNS))


def live(parents: list[Any], trials: list[Any]) -> tuple[list[Any], list[Any]]:
    """The parents ``--restart`` did not archive, and the trials that are not theirs."""
    archived = {r.info.run_id for r in parents if r.data.tags.get(Tag.SUPERSEDED) == "true"}
    return (
        [r for r in parents if r.info.run_id not in archived],
        [r for r in trials if r.data.tags.get(Tag.PARENT) not in archived],
    )


def sweep_parents(client: Any, experiment_id: str, key: str) -> list[Any]:
    """The live parent runs of the sweep whose state lives at ``key`` (``nas.sweep_key``)."""
    query = f"tags.`{Tag.SWEEP_KEY}` = '{key}'"
    runs = client.search_runs([experiment_id], query, max_results=100)
    return [r for r in runs if r.data.tags.get(Tag.SUPERSEDED) != "true"]


def children(client: Any, experiment_id: str, parent_run_id: str) -> list[Any]:
    """The trial runs of one parent run."""
    query = f"tags.`{Tag.PARENT}` = '{parent_run_id}'"
    return list(client.search_runs([experiment_id], query, max_results=MAX_RUNS))


def child(client: Any, experiment_id: str, parent_run_id: str, key: str) -> Any:
    """The trial run of one parent with trial key ``key``, or None."""
    query = f"tags.`{Tag.PARENT}` = '{parent_run_id}' and tags.`{Tag.TRIAL_KEY}` = '{key}'"
    found = client.search_runs([experiment_id], query, max_results=1)
    return found[0] if found else None


def load_run(uri: str, run_id: str, flag: str = "--from-run") -> RecordedRun:
    """One run's params, tags and latest metrics; ValueError (one line, naming ``flag``) when
    the store cannot be opened or holds no such run."""
    from mlflow.exceptions import MlflowException

    try:
        run = open_store(uri).get_run(run_id)
    except MlflowException as err:
        message = f"{flag} {run_id}: no such run in {uri} ({first_line(err)})"
        raise ValueError(redact(message)) from None
    try:
        data = upgraded(run).data
    except ValueError as err:
        raise ValueError(f"{flag} {err}") from None
    return RecordedRun(run_id, data.params, data.tags, data.metrics, run.info.artifact_uri)


def live_sweep(uri: str, name: str) -> tuple[Any, list[Any], list[Any], list[Any]]:
    """(client, every parent run, the live parents, the live trials) of sweep ``name``;
    ValueError, one line naming the sweeps the store holds, when there is no such sweep."""
    client = open_store(uri)
    exp = client.get_experiment_by_name(name)
    every = runs_by_role(client, exp.experiment_id, ROLE_SWEEP) if exp else []
    if not every:
        known = ", ".join(n for n, _ in list_sweeps(uri)) or "none"
        raise ValueError(redact(f"no sweep named {name!r} in {uri}; sweeps there: {known}"))
    parents, trials = live(every, runs_by_role(client, exp.experiment_id, ROLE_TRIAL))
    return client, every, parents, trials


def live_trial_id(uri: str, sweep: str, arm: str, seed: int) -> str:
    """The run id of the live trial of ``sweep`` (an experiment name) with that arm and seed.
    ValueError, one line saying what the store holds instead, when there is none or more than
    one (a record written by hand or an older version may repeat an arm's seed)."""
    _, _, _, trials = live_sweep(uri, sweep)
    arms = sorted({str(r.data.tags.get(Tag.ARM)) for r in trials})
    if arm not in arms:
        raise ValueError(f"sweep {sweep!r} has no arm {arm!r}; arms: {', '.join(arms) or 'none'}")
    of_arm = [upgraded(r) for r in trials if r.data.tags.get(Tag.ARM) == arm]
    found = [r.info.run_id for r in of_arm if run_seed(r) == seed]
    if not found:
        seeds = sorted({s for r in of_arm if (s := run_seed(r)) is not None})
        raise ValueError(
            f"sweep {sweep!r}, arm {arm!r} has no seed {seed}; seeds: {', '.join(map(str, seeds))}"
        )
    if len(found) > 1:
        raise ValueError(
            f"sweep {sweep!r}, arm {arm!r}, seed {seed} holds {len(found)} live trials; "
            f"name one by run id: {', '.join(sorted(found))}"
        )
    return found[0]


def run_seed(run: Any) -> int | None:
    """A trial run's seed (its ``nas.seed`` tag, the run ``upgraded``); None where it recorded
    none."""
    text = run.data.tags.get(Tag.SEED)
    return None if text is None else int(text)


def list_sweeps(uri: str) -> list[tuple[str, int]]:
    """(sweep name, number of trial runs) for every experiment holding a ``nas sweep``; the
    trials of parents archived by ``--restart`` are not counted."""
    client = open_store(uri)
    found = []
    for exp in client.search_experiments():
        parents = runs_by_role(client, exp.experiment_id, ROLE_SWEEP)
        if parents:
            _, trials = live(parents, runs_by_role(client, exp.experiment_id, ROLE_TRIAL))
            found.append((exp.name, len(trials)))
    return sorted(found)


def sweep_experiments(uri: str) -> list[tuple[str, str, dict[str, str]]]:
    """(name, experiment id, experiment tags) of every experiment holding a ``nas sweep``, by
    name; none where the store is a SQLite file not created yet."""
    if missing_sqlite(uri):
        return []
    client = open_store(uri)
    found = [
        (exp.name, exp.experiment_id, dict(exp.tags))
        for exp in client.search_experiments()
        if runs_by_role(client, exp.experiment_id, ROLE_SWEEP)
    ]
    return sorted(found)
