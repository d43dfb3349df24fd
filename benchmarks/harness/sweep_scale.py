"""A sweep of hundreds of tiny trials end to end, once on each kind of store: ``nas sweep smoke
--seeds 0,...,N/2-1`` (its two arms: N trials of 20 steps) at concurrency 2, on a SQLite file and
through an MLflow tracking server (``tests.tracking_server``) on a fresh PostgreSQL database;
then ``nas report`` on the sweep.

    .venv/bin/python -m benchmarks.harness.sweep_scale [--trials N] [--quick] [--stores sqlite,server]

Figures per store: trials per minute; at 10, 50, 100 and N trials in (each over the 10
completions up to there), the wall time per trial (concurrency x the interval between
completions), the trial's own MLflow run, the idle gap between a slot's trials, the driver's
CPU seconds per trial (the work Tune's bookkeeping does per trial; the goal: at N within 1.5x of
at 10) and the driver's peak resident memory so far; disk under the storage path at the end;
the record checked (one child run per trial key, every trial finished with each validation
step, no (metric, step) twice, read from the database itself); the metric keys of a trial run
(per-layer arrays must be artifacts, not metrics); and how long ``nas report`` takes (goal:
under 30 s), with its read of the store (``reports.load.load_sweep``) alone.

Not in ``make bench`` (about 10 minutes at 200 trials on 2 cores, past its budget with the
rest): ``make bench-scale``. Run it alone: trials, driver and server share the machine's cores.
PostgreSQL comes from ``NAS_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``); the benchmark creates a database of its own
there and drops it afterwards.
"""

from __future__ import annotations

import argparse
import bisect
import importlib
import json
import os
import re
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import machine, md_table

NAME = "sweep_scale"
SPACE = "smoke"  # two arms, 20 steps, validation at 10 and 20
ARMS = 2
VAL_STEPS = 2
CONCURRENCY = 2
WINDOW = 10  # completions each figure at "n trials in" is taken over
POSTGRES = os.environ.get("NAS_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
# A metric key naming one layer or block (``.../layer_3``, ``.../block/12``, ``..._7``): per-layer
# values belong in the profile artifacts, not in one metric key per layer.
PER_LAYER = re.compile(r"(layer|block|site)s?[_/.]?\d+|[_/.]\d+$")
TRIAL_ROLE = "tags.`nas.role` = 'trial'"
# Tune's own state files (every trial's state, the variant generator's, the tuner's pickle)
TUNE_STATE = ("experiment_state", "basic-variant-state", "search_gen_state", "tuner.pkl")


@dataclass
class Sample:
    t: float  # epoch seconds
    rss: int  # the driver's resident memory, bytes
    cpu: float  # the driver's user + system CPU seconds so far
    load: float  # the machine's 1-minute load average (other work on it distorts the figures)


@dataclass
class Sampler:
    """The driver process's memory and CPU time, every ``every`` seconds, in a thread."""

    pid: int
    every: float = 0.5
    samples: list[Sample] = field(default_factory=list)

    def run(self) -> None:
        psutil = _psutil()
        proc = psutil.Process(self.pid)
        try:
            while proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                cpu = proc.cpu_times()
                rss, load = proc.memory_info().rss, os.getloadavg()[0]
                self.samples.append(Sample(time.time(), rss, cpu.user + cpu.system, load))
                time.sleep(self.every)
        except psutil.NoSuchProcess:
            pass

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        return thread


def _psutil() -> Any:
    """psutil: installed, or the copy Ray ships (``import ray`` puts it on the path)."""
    try:
        return importlib.import_module("psutil")
    except ImportError:
        importlib.import_module("ray")
        return importlib.import_module("psutil")


def seeds(trials: int) -> str:
    return ",".join(str(s) for s in range(max(1, trials // ARMS)))


def sweep(uri: str, folder: Path, trials: int) -> tuple[float, list[Sample]]:
    """``nas sweep`` to the end, sampled; its wall seconds and the driver's samples."""
    cmd = [sys.executable, "-m", "nas.cli", "sweep", SPACE, "--tracking-uri", uri]
    cmd += ["--storage-path", str(folder / "ray"), "--concurrency", str(CONCURRENCY)]
    cmd += ["--seeds", seeds(trials)]
    log = folder / "sweep.log"
    start = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=folder, stdout=out, stderr=subprocess.STDOUT)
        sampler = Sampler(proc.pid)
        thread = sampler.start()
        code = proc.wait()
    wall = time.perf_counter() - start
    thread.join(timeout=5)
    if code != 0:
        raise RuntimeError(f"nas sweep exited with {code}: {log.read_text()[-3000:]}")
    return wall, sampler.samples


@dataclass(frozen=True)
class TrialRun:
    key: str
    start: float  # epoch seconds
    end: float
    metrics: tuple[str, ...]
    status: str


def trial_runs(uri: str) -> list[TrialRun]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(SPACE)
    assert exp is not None, "the sweep recorded nothing"
    runs = client.search_runs([exp.experiment_id], TRIAL_ROLE, max_results=50_000)
    return [
        TrialRun(
            key=r.data.tags["nas.trial_key"],
            start=r.info.start_time / 1000,
            end=(r.info.end_time or 0) / 1000,
            metrics=tuple(sorted(r.data.metrics)),
            status=r.data.tags.get("nas.status", ""),
        )
        for r in runs
    ]


def _at(samples: list[Sample], t: float) -> Sample:
    """The last sample taken at or before ``t`` (the first one before any)."""
    i = bisect.bisect_right([s.t for s in samples], t) - 1
    return samples[max(i, 0)]


def at_count(runs: list[TrialRun], samples: list[Sample], n: int) -> dict[str, float]:
    """The figures over the completions (lo, n], lo = max(1, n - WINDOW), n counted from 1."""
    ends = sorted(r.end for r in runs)
    starts = sorted(r.start for r in runs)
    by_end = sorted(runs, key=lambda r: r.end)
    lo = max(1, n - WINDOW)
    span = ends[n - 1] - ends[lo - 1]
    window = by_end[lo:n]
    # a slot's next trial starts when one ends: the k-th start follows the (k - c)-th end
    gaps = [starts[k] - ends[k - CONCURRENCY] for k in range(max(lo, CONCURRENCY), n)]
    first, last = _at(samples, ends[lo - 1]), _at(samples, ends[n - 1])
    return {
        "trials": n,
        "wall_s_per_trial": CONCURRENCY * span / (n - lo),
        "trial_run_s": statistics.mean(r.end - r.start for r in window),
        "gap_s": statistics.median(gaps) if gaps else float("nan"),
        "driver_cpu_s_per_trial": (last.cpu - first.cpu) / (n - lo),
        "driver_rss_mb": max(s.rss for s in samples if s.t <= ends[n - 1]) / 2**20,
    }


def counts(trials: int) -> list[int]:
    return sorted({n for n in (10, 50, 100, trials // 2, trials) if 2 <= n <= trials})


def throughput(runs: list[TrialRun], wall: float) -> dict[str, float]:
    ends = sorted(r.end for r in runs)
    first_start = min(r.start for r in runs)
    steady = ends[-1] - ends[min(9, len(ends) - 1)]
    return {
        "per_min_end_to_end": 60 * len(runs) / wall,
        "per_min_first_to_last": 60 * len(runs) / (ends[-1] - first_start),
        "per_min_steady": 60 * (len(ends) - 10) / steady if len(ends) > 10 else float("nan"),
    }


DUPLICATES = """
SELECT COUNT(*) FROM (
  SELECT m.run_uuid, m.key, m.step FROM metrics m
  JOIN tags t ON t.run_uuid = m.run_uuid AND t.key = 'nas.role' AND t.value = 'trial'
  GROUP BY m.run_uuid, m.key, m.step HAVING COUNT(*) > 1
) AS d"""
VAL_STEPS_PER_RUN = """
SELECT MIN(n), MAX(n) FROM (
  SELECT t.run_uuid, COUNT(DISTINCT m.step) AS n FROM tags t
  LEFT JOIN metrics m ON m.run_uuid = t.run_uuid AND m.key = 'val/loss'
  WHERE t.key = 'nas.role' AND t.value = 'trial' GROUP BY t.run_uuid
) AS v"""
TRIAL_KEYS = """
SELECT COUNT(DISTINCT m.key) FROM metrics m
JOIN tags t ON t.run_uuid = m.run_uuid AND t.key = 'nas.role' AND t.value = 'trial'"""


def sql(db: Any) -> dict[str, Any]:
    """What the database itself holds: (run, metric, step) triples recorded more than once,
    the fewest and most validation steps a trial run holds, distinct metric keys over all
    trial runs. ``db``: an open sqlite3 or psycopg connection."""
    dup = db.execute(DUPLICATES).fetchone()[0]
    lo, hi = db.execute(VAL_STEPS_PER_RUN).fetchone()
    keys = db.execute(TRIAL_KEYS).fetchone()[0]
    return {"duplicate_metric_steps": dup, "val_steps_min": lo, "val_steps_max": hi, "keys": keys}


def check_record(uri: str, runs: list[TrialRun], db: Any, trials: int) -> dict[str, Any]:
    """Every record present exactly once."""
    per_key = Counter(r.key for r in runs)
    keys = sorted({k for r in runs for k in r.metrics})
    found = sql(db)
    ok = (
        len(per_key) == trials
        and set(per_key.values()) == {1}
        and {r.status for r in runs} == {"finished"}
        and found["duplicate_metric_steps"] == 0
        and found["val_steps_min"] == found["val_steps_max"] == VAL_STEPS
    )
    return {
        "trial_runs": len(runs),
        "trial_keys": len(per_key),
        "runs_per_key_max": max(per_key.values()),
        "statuses": dict(Counter(r.status for r in runs)),
        **found,
        "metric_keys_per_run": max(len(r.metrics) for r in runs),
        "per_layer_metric_keys": [k for k in keys if PER_LAYER.search(k)],
        "profile_artifacts": profile_files(uri),
        "ok": ok,
    }


def profile_files(uri: str) -> int:
    """How many dilution profiles (JSON) one trial run holds as artifacts."""
    from mlflow.tracking import MlflowClient

    from record.schema import PROFILE_FOLDER

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(SPACE)
    assert exp is not None, "the sweep recorded nothing"
    run = client.search_runs([exp.experiment_id], TRIAL_ROLE, max_results=1)[0]
    files = client.list_artifacts(run.info.run_id, PROFILE_FOLDER)
    return sum(f.path.endswith(".json") for f in files)


def disk(folder: Path) -> dict[str, float]:
    """Bytes under the storage path, and the share in Tune's experiment state files."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    state = [p for p in files if p.name.startswith(TUNE_STATE)]
    return {
        "storage_mb": sum(p.stat().st_size for p in files) / 2**20,
        "tune_state_mb": sum(p.stat().st_size for p in state) / 2**20,
        "files": len(files),
    }


def report(uri: str, folder: Path) -> dict[str, float]:
    """``nas report`` end to end (a fresh process), then its read of the store alone."""
    cmd = [sys.executable, "-m", "nas.cli", "report", SPACE, "--tracking-uri", uri]
    cmd += ["--out", str(folder / "report")]
    start = time.perf_counter()
    subprocess.run(cmd, cwd=folder, check=True, capture_output=True)
    wall = time.perf_counter() - start
    from reports.load import load_sweep

    load_sweep(uri, SPACE)  # imports and connections paid once
    start = time.perf_counter()
    load_sweep(uri, SPACE)
    return {"report_s": wall, "load_s": time.perf_counter() - start}


@contextmanager
def sqlite_store(folder: Path) -> Iterator[tuple[str, Any]]:
    path = folder / "mlflow.db"
    yield f"sqlite:///{path}", lambda: sqlite3.connect(path)


@contextmanager
def server_store(folder: Path) -> Iterator[tuple[str, Any]]:
    """An MLflow server on a database of its own, created here and dropped afterwards."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from tests.tracking_server import TrackingServer  # dev tooling: the tests' own server

    name = f"nas_scale_{secrets.token_hex(4)}"
    info = conninfo_to_dict(POSTGRES)
    auth = str(info.get("user", "postgres"))
    auth += f":{info['password']}" if info.get("password") else ""
    url = f"postgresql://{auth}@{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/{name}"
    with psycopg.connect(POSTGRES, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        server = TrackingServer(url, folder / "artifacts", folder / "mlflow-server.log")
        try:
            server.start()
            yield server.url, lambda: psycopg.connect(url)
        finally:
            server.kill()
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


STORES = {"sqlite": sqlite_store, "server": server_store}


def measure(store: str, trials: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, STORES[store](Path(tmp)) as (uri, connect):
        folder = Path(tmp)
        wall, samples = sweep(uri, folder, trials)
        runs = trial_runs(uri)
        with closing(connect()) as db:
            record = check_record(uri, runs, db, trials)
        return {
            "store": store,
            "trials": len(runs),
            "wall_s": wall,
            **throughput(runs, wall),
            "at": [at_count(runs, samples, n) for n in counts(len(runs))],
            "driver_peak_rss_mb": max(s.rss for s in samples) / 2**20,
            "driver_cpu_s": samples[-1].cpu,
            "load_avg_mean": statistics.mean(s.load for s in samples),
            "disk": disk(folder / "ray"),
            "record": record,
            **report(uri, folder),
        }


def run(trials: int, stores: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {"name": NAME, "space": SPACE, "machine": machine()}
    result["concurrency"] = CONCURRENCY
    result["stores"] = [measure(s, trials) for s in stores]
    return result


def growth(m: dict[str, Any], key: str) -> float:
    """The figure at N trials in over the figure at 10 (or the first count, below 10)."""
    base = next((a for a in m["at"] if a["trials"] == 10), m["at"][0])
    return float(m["at"][-1][key] / base[key])


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"`nas sweep {SPACE}` with N trials of 20 steps at concurrency {result['concurrency']}, "
        "then `nas report`; goals: the driver's CPU per trial at N within 1.5x of at 10 trials, "
        "`nas report` under 30 s.",
        "",
    ]
    rows = []
    for m in result["stores"]:
        rec = m["record"]
        rows.append(
            [
                m["store"],
                str(m["trials"]),
                f"{m['wall_s']:.0f}",
                f"{m['per_min_end_to_end']:.1f} ({m['per_min_steady']:.1f})",
                f"{m['driver_peak_rss_mb']:.0f}",
                f"{growth(m, 'driver_cpu_s_per_trial'):.2f}x",
                f"{m['disk']['storage_mb']:.0f} ({m['disk']['tune_state_mb']:.1f})",
                "yes" if rec["ok"] else "**no**",
                f"{rec['metric_keys_per_run']} ({len(rec['per_layer_metric_keys'])})",
                f"{m['report_s']:.1f} ({m['load_s']:.1f})",
            ]
        )
    header = [
        "store",
        "trials",
        "wall (s)",
        "trials/min (steady)",
        "driver peak RSS (MB)",
        "driver CPU/trial, N vs 10",
        "storage MB (Tune state)",
        "record exact",
        "metric keys/run (per-layer)",
        "`nas report` s (read)",
    ]
    lines += md_table(header, rows)
    for m in result["stores"]:
        load = f"load average {m['load_avg_mean']:.1f} on {result['machine']['cpu_count']} cores"
        lines += ["", f"{m['store']}: per trial over the {WINDOW} completions up to n ({load})", ""]
        lines += md_table(
            [
                "n",
                "wall/trial (s)",
                "trial run (s)",
                "slot gap (s)",
                "driver CPU/trial (s)",
                "driver RSS (MB)",
            ],
            (
                [
                    str(a["trials"]),
                    f"{a['wall_s_per_trial']:.2f}",
                    f"{a['trial_run_s']:.2f}",
                    f"{a['gap_s']:.3f}",
                    f"{a['driver_cpu_s_per_trial']:.3f}",
                    f"{a['driver_rss_mb']:.0f}",
                ]
                for a in m["at"]
            ),
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or NAME).splitlines()[0])
    ap.add_argument("--trials", type=int, default=200, help="trials per sweep (default 200)")
    ap.add_argument("--quick", action="store_true", help="10 trials: checks the script runs")
    ap.add_argument("--stores", default="sqlite,server", help="comma-separated: sqlite, server")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    stores = args.stores.split(",")
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        raise SystemExit(f"unknown store(s) {', '.join(unknown)}; choose from: {', '.join(STORES)}")
    result = run(10 if args.quick else args.trials, stores)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{NAME}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(markdown(result))


if __name__ == "__main__":
    main()
