"""The fixed cost of sweep trials: ``nas sweep SPACE`` end to end in a fresh folder with one
seed and with four, then, from the MLflow record, how much time went into training steps.

    .venv/bin/python -m benchmarks.harness.sweep_overhead [--quick] [--out DIR]

Figures: ``in_trial`` is (trial_s - step_s) per trial, the trial function's time outside
training steps (MLflow run, Lightning set-up, data, validation, diagnostics, checkpoints);
``marginal`` is what each extra trial adds to the sweep's wall time beyond its training steps
(the difference between the two sweeps, so Ray's start and the driver's fixed work cancel);
``fixed`` is the rest of the one-seed sweep. Run it alone: a second torch process on 2 cores
distorts it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.common import cli, machine

NAME = "sweep_overhead"


def _trial_metrics(uri: str, experiment: str) -> list[dict[str, float]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, "the sweep recorded nothing"
    runs = client.search_runs([exp.experiment_id], "tags.`nas.role` = 'trial'")
    return [dict(r.data.metrics) for r in runs]


def measure(space: str, concurrency: int, seeds: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        cmd = [sys.executable, "-m", "nas.cli", "sweep", space, "--tracking-uri", uri]
        cmd += ["--storage-path", f"{tmp}/ray", "--concurrency", str(concurrency)]
        cmd += ["--seeds", seeds]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=tmp, check=True, capture_output=True, env=dict(os.environ))
        wall = time.perf_counter() - start
        trials = _trial_metrics(uri, space)
    inside = [m["final/trial_s"] - m["final/step_s"] for m in trials]
    return {
        "trials": len(trials),
        "wall_s": wall,
        "step_s_total": sum(m["final/step_s"] for m in trials),
        "in_trial_s_first": max(inside),  # the first trial in a worker pays its imports
        "in_trial_s_median": statistics.median(inside),
    }


def overhead(space: str, concurrency: int) -> dict[str, object]:
    one, four = measure(space, concurrency, "0"), measure(space, concurrency, "0,1,2,3")
    extra = four["trials"] - one["trials"]
    busy = (four["wall_s"] - one["wall_s"]) * concurrency
    marginal = (busy - (four["step_s_total"] - one["step_s_total"])) / extra
    fixed = one["wall_s"] - one["step_s_total"] / concurrency - marginal * one["trials"]
    return {"one_seed": one, "four_seeds": four, "marginal_s": marginal, "fixed_s": fixed}


def run(quick: bool = False) -> dict[str, Any]:
    """Overhead at concurrency 1 (one seed against four) and the four-seed sweep again at
    concurrency 2, for throughput. ``quick`` skips the concurrency-2 sweep."""
    result: dict[str, Any] = {"name": NAME, "space": "smoke", "machine": machine()}
    result["c1"] = overhead("smoke", 1)
    if not quick:
        result["c2"] = measure("smoke", 2, "0,1,2,3")
    return result


def markdown(result: dict[str, Any]) -> str:
    c1 = result["c1"]
    rows = [("1", c1["one_seed"]), ("1", c1["four_seeds"])]
    if "c2" in result:
        rows.append(("2", result["c2"]))
    lines = [
        "`nas sweep smoke` end to end (a fresh store and Ray each time); goals: ≤ 3 s per trial "
        "beyond its training steps, `smoke` within 60 s at concurrency 2.",
        "",
        f"Marginal cost of a trial beyond its training steps: **{c1['marginal_s']:.2f} s**; "
        f"fixed cost of a sweep (driver, Ray start, first worker's imports): "
        f"{c1['fixed_s']:.1f} s.",
        "",
        "| concurrency | trials | wall (s) | trials/hour | in-trial overhead, median (s) | "
        "first trial in a worker (s) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for conc, m in rows:
        lines.append(
            f"| {conc} | {m['trials']} | {m['wall_s']:.1f} | {3600 * m['trials'] / m['wall_s']:.0f}"
            f" | {m['in_trial_s_median']:.2f} | {m['in_trial_s_first']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
