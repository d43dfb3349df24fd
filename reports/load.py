"""A sweep's record as data frames: everything the report does after this is a pure function
over them. The runs are found through ``record.read``, the primitives the writer uses too."""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from record.read import RecordedRun, downloaded_text, live_sweep, run_seed, upgraded
from record.schema import (
    BEST_VAL_LOSS,
    COORDCHECK_INDEX,
    LR_STAGE_FILE,
    PLANS_FOLDER,
    PROFILE_FOLDER,
    SEEDS_FILE,
    SKIPPED_FILE,
    SPACE_FILE,
    Metric,
    Tag,
)
from reports.normalize import trial_reason, trial_status
from reports.sweep import SITE_ARRAYS, TRIAL_COLUMNS, RecordedCoordCheck, SweepData

# The validation metrics, and the routing summaries the report follows over training.
CURVE_METRICS = (
    Metric.VAL_LOSS,
    Metric.VAL_BPB,
    Metric.ROUTING_TOP1_MAX,
    Metric.ROUTING_ENTROPY_MIN,
)
# Reading a sweep of hundreds of trials: run ids per bulk metric query (SQLite builds before
# 3.32 bind at most 999 variables), no limit on the rows it returns, and how many requests
# are in flight at once where each trial is its own call (a tracking server, artifact files).
BULK_RUNS = 500
NO_LIMIT = 2**62
READERS = 8
# Tags every trial run carries, old record or new, and the one every run that records its
# ``nas.status`` carries as well (a TrialSpec's seed): a trial's identity. A run without one is
# a damaged record and the report refuses it. Reason and step are not among them: the driver
# writes no step for a trial it marks killed or failed, and a run without them reads as
# "not recorded".
TRIAL_TAGS = (Tag.TRIAL_KEY, Tag.ARM)
STATUS_TAGS = (Tag.SEED,)
PARENT_TAGS = (Tag.COMMAND, Tag.SPACE, Tag.VERSIONS)


def load_sweep(uri: str, name: str) -> SweepData:
    """The sweep ``name`` from the store at ``uri``. ValueError (one line) when there is no such
    sweep, or when its runs lack tags that every run of a sweep carries."""
    client, every, parents, trials = live_sweep(uri, name)
    if not parents:
        raise ValueError(f"sweep {name!r}: every parent run was archived by --restart")
    _check_tags(name, parents, PARENT_TAGS, "parent")
    _check_tags(name, trials, None, "trial")
    # From here on every run is in the current shape (record.upgrade), whatever wrote it
    parents, trials = [upgraded(r) for r in parents], [upgraded(r) for r in trials]
    parents = sorted(parents, key=lambda r: r.info.start_time)
    plans = {r.info.run_id: _plans(_artifacts(uri, r), r.info.run_id) for r in parents}
    curves = _curves(client, trials)
    profiles, arrays = _profiles(uri, trials)
    latest = _artifacts(uri, parents[-1])
    return SweepData(
        name=name,
        uri=uri,
        parents=pd.DataFrame([_parent_row(r, len(plans[r.info.run_id])) for r in parents]),
        space=_yaml_artifact(latest, SPACE_FILE),
        trials=_trial_frame(trials, curves),
        curves=curves,
        profiles=profiles,
        **arrays,
        skipped=_yaml_artifact(latest, SKIPPED_FILE) or [],
        plans=[plan for found in plans.values() for plan in found],
        superseded=len(every) - len(parents),
        lr_stage=_yaml_artifact(latest, LR_STAGE_FILE),
        seeds_auto=_yaml_artifact(latest, SEEDS_FILE),
        coordchecks=_coordchecks(latest),
    )


def _curves(client: Any, trials: list[Any]) -> pd.DataFrame:
    """The validation metrics' histories: ``trials`` in order, then ``CURVE_METRICS``, each
    history in the store's order (timestamp, step, value)."""
    wanted = {k: [r.info.run_id for r in trials if k in r.data.metrics] for k in CURVE_METRICS}
    history = _histories(client, wanted)
    return pd.DataFrame(
        [
            {"run_id": r.info.run_id, "metric": key, "step": m.step, "value": m.value}
            for r in trials
            for key in CURVE_METRICS
            for m in history.get((r.info.run_id, key), ())
        ],
        columns=["run_id", "metric", "step", "value"],
    )


def _histories(client: Any, wanted: dict[str, list[str]]) -> dict[tuple[str, str], list[Any]]:
    """(run id, metric) -> its history, for the runs listed under each metric. A database store
    answers one query per metric for a batch of runs; any other (a tracking server) one request
    per run and metric, ``READERS`` at a time. ``MlflowClient`` has no bulk call of its own, so
    the store is reached through its private ``_tracking_client``."""
    store: Any = getattr(getattr(client, "_tracking_client", None), "store", None)
    if hasattr(store, "get_metric_history_bulk"):  # SqlAlchemyStore: sqlite://, postgresql://
        found: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for key, run_ids in wanted.items():
            for i in range(0, len(run_ids), BULK_RUNS):
                batch = run_ids[i : i + BULK_RUNS]
                for m in store.get_metric_history_bulk(batch, key, max_results=NO_LIMIT):
                    found[(m.run_id, key)].append(m)
        return found
    pairs = [(run_id, key) for key, run_ids in wanted.items() for run_id in run_ids]
    return dict(zip(pairs, _each(lambda p: client.get_metric_history(*p), pairs), strict=True))


def _each(read: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``read`` over ``items`` from ``READERS`` threads, results in the order of ``items``: each
    is a round trip to the store, so a sweep of hundreds of trials waits on them together."""
    with ThreadPoolExecutor(READERS) as pool:
        return list(pool.map(read, items))


def _artifacts(uri: str, run: Any) -> Any:
    """The run's artifact repository, from the artifact URI its search result carries.
    ``MlflowClient``'s artifact calls look the run up again on every call and search the
    experiment's logged models besides (four store queries per file); nothing here logs a
    model, so the run's own repository holds every file they would find."""
    return _repository(uri, run.info.artifact_uri)


def _repository(uri: str, artifact_uri: str) -> Any:
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    return get_artifact_repository(artifact_uri, tracking_uri=uri)


def _trial_frame(trials: list[Any], curves: pd.DataFrame) -> pd.DataFrame:
    rows = [_trial_row(r) for r in trials]
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(TRIAL_COLUMNS))
    for column in ("seed", "status_step"):
        frame[column] = frame[column].astype("Int64")
    best = curves[curves.metric == Metric.VAL_LOSS].groupby("run_id")["value"].min()
    frame[BEST_VAL_LOSS] = frame["run_id"].map(best).astype(float)
    return frame


def _required(run: Any, names: tuple[str, ...] | None) -> list[str]:
    """The tags ``run`` lacks among ``names`` (None: those a trial run must carry)."""
    tags = run.data.tags
    if names is None:
        names = TRIAL_TAGS + (STATUS_TAGS if Tag.STATUS in tags else ())
    return [n for n in names if n not in tags]


def _check_tags(sweep: str, runs: list[Any], names: tuple[str, ...] | None, role: str) -> None:
    """A run without a tag every such run carries is a damaged record: say which, in one line,
    rather than reading an empty value into the report."""
    missing = [(r.info.run_id, m) for r in runs if (m := _required(r, names))]
    if missing:
        shown = "; ".join(f"run {rid} lacks {', '.join(m)}" for rid, m in missing[:3])
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise ValueError(f"sweep {sweep!r}: {len(missing)} {role} runs lack tags: {shown}{more}")


def _number(text: str) -> Any:
    """Params come back as strings: numbers become numbers, the rest stays text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _trial_row(run: Any) -> dict[str, Any]:
    tags = run.data.tags
    try:
        status = trial_status(tags, run.info.status)
        seed = run_seed(run)
    except ValueError as err:
        raise ValueError(f"run {run.info.run_id}: {err}") from None
    step = tags.get(Tag.STATUS_STEP)
    return {
        "run_id": run.info.run_id,
        "status": status.value,
        "reason": trial_reason(tags),
        "status_step": None if step is None else int(step),
        "run_status": run.info.status,
        "key": tags[Tag.TRIAL_KEY],
        "arm": tags[Tag.ARM],
        "seed": seed,
        # Where the trial ran and with what: not recorded on every trial (an infeasible one
        # never reached a node), so missing, never an empty string, where absent.
        "node": tags.get(Tag.NODE),
        "hardware": tags.get(Tag.HARDWARE),
        "git_commit": tags.get(Tag.GIT_COMMIT),
        "version": tags.get(Tag.VERSION),
        "start": _time(run.info.start_time),
        "end": _time(run.info.end_time),
        # what final/device_hours counts and final/peak_flops came from
        # (trainers.measure.device_cost)
        "device_unit": tags.get(Tag.DEVICE_UNIT),
        "peak_flops_source": tags.get(Tag.PEAK_FLOPS_SOURCE),
        **_kernels(tags),
        **{k: _number(v) for k, v in run.data.params.items()},
        **run.data.metrics,
    }


# The kernels a trial ran (trainers.training.paths), as the trial row's columns; a trial recorded
# before they were tags has none, so an older sweep's frame (and its tidy files) gains no column.
KERNEL_TAGS = {"compiled": Tag.COMPILED, "depth_path": Tag.DEPTH_PATH}


def _kernels(tags: Any) -> dict[str, str]:
    return {column: tags[tag] for column, tag in KERNEL_TAGS.items() if tag in tags}


def _time(ms: int | None) -> Any:
    return pd.to_datetime(ms, unit="ms", utc=True) if ms else pd.NaT


def _parent_row(run: Any, plans: int) -> dict[str, Any]:
    tags = run.data.tags
    return {
        "run_id": run.info.run_id,
        "run_status": run.info.status,
        "start": _time(run.info.start_time),
        "end": _time(run.info.end_time),
        "command": tags[Tag.COMMAND],
        "space": tags[Tag.SPACE],
        "versions": json.loads(tags[Tag.VERSIONS]),
        "plans": plans,
        **run.data.metrics,
    }


def _plans(repo: Any, run_id: str) -> list[dict[str, Any]]:
    """The plan files ``plans/NNNN.json`` on a parent run (its artifact ``repo``), in invocation
    order (the zero-padded ordinal sorts as text); none for a sweep recorded before plans were
    kept."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            folder = Path(repo.download_artifacts(PLANS_FOLDER, tmp))
        except Exception:  # MLflow raises its own or OSError for a missing artifact
            return []
        plans = []
        for path in sorted(folder.glob("*.json")):
            plan = json.loads(path.read_text())
            if not isinstance(plan, dict) or not isinstance(plan.get("keys"), list):
                raise ValueError(f"run {run_id}: {PLANS_FOLDER}/{path.name} holds no list of keys")
            plans.append(plan)
        return plans


def _yaml_artifact(repo: Any, name: str) -> Any:
    """A YAML file the sweep logged on its parent run (its artifact ``repo``); None when there
    is none (a sweep recorded by an older version)."""
    import yaml

    text = _text_artifact(repo, name)
    return None if text is None else yaml.safe_load(text)


def _coordchecks(repo: Any) -> tuple[RecordedCoordCheck, ...]:
    """The coord checks the sweep recorded on its parent run (its artifact ``repo``), each with
    its table; none for a sweep that recorded none."""
    from trainers.measure.coordcheck_table import from_csv

    text = _text_artifact(repo, COORDCHECK_INDEX)
    index = json.loads(text) if text else []  # JSON, not YAML: YAML reads 1e-05 as a string
    out = []
    for entry in index:
        text = _text_artifact(repo, entry["file"]) if "file" in entry else None
        try:
            table = tuple(from_csv(text)) if text else None
        except ValueError:  # a table this version cannot read: shown as not readable
            table = None
        out.append(RecordedCoordCheck(entry, table))
    return tuple(out)


def _text_artifact(repo: Any, name: str) -> str | None:
    """A text file on a run (its artifact ``repo``); None where there is none."""
    return downloaded_text(lambda folder: repo.download_artifacts(name, folder))


def _last_profile(repo: Any) -> dict[str, Any] | None:
    """A trial's last dilution profile (the JSON with the highest step) from its artifact
    ``repo``; None without one."""
    files = sorted(a.path for a in repo.list_artifacts(PROFILE_FOLDER) if a.path.endswith(".json"))
    if not files:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        return dict(json.loads(Path(repo.download_artifacts(files[-1], tmp)).read_text()))


Arrays = dict[str, np.ndarray]


def _profiles(uri: str, trials: list[Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Each trial's last dilution profile, per block, and its per-site arrays
    (``SITE_ARRAYS``: depth weights, routing statistics, source importance) where it recorded
    them (profiles before issue 27 have no routing statistics); the files are fetched
    ``READERS`` at a time."""
    rows: list[dict[str, Any]] = []
    arrays: dict[str, Arrays] = {name: {} for name in SITE_ARRAYS}
    found = _each(lambda run: _last_profile(_artifacts(uri, run)), trials)
    for run, data in zip(trials, found, strict=True):
        if data is None:
            continue
        rows.extend(_profile_rows(run.info.run_id, data))
        for name in SITE_ARRAYS:
            if data.get(name) is not None:
                arrays[name][run.info.run_id] = np.array(data[name], dtype=float)
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS), arrays


def run_profile(uri: str, run: RecordedRun) -> pd.DataFrame:
    """One trial's last dilution profile, a row per block (``PROFILE_COLUMNS``, as in
    ``SweepData.profiles``); empty where it recorded none."""
    data = _last_profile(_repository(uri, run.artifact_uri))
    rows = [] if data is None else _profile_rows(run.run_id, data)
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


PROFILE_COLUMNS = ["run_id", "block", "output_norm", "stream_norm", "grad_norm"]


def _profile_rows(run_id: str, data: dict[str, Any]) -> list[dict[str, Any]]:
    """A profile file's per-block norms as rows, blocks numbered from 1."""
    n = int(data["n_layers"])
    grad = data.get("grad_norm") or [np.nan] * n
    return [
        {
            "run_id": run_id,
            "block": block + 1,
            "output_norm": _float(data["output_norm"][block]),
            "stream_norm": _float(data["stream_norm"][block]),
            "grad_norm": _float(grad[block]),
        }
        for block in range(n)
    ]


def _float(x: Any) -> float:
    return float("nan") if x is None else float(x)
