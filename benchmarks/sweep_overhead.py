"""The fixed cost of sweep trials: ``nas sweep SPACE`` end to end in a fresh folder with one
seed and with four, then, from the MLflow record, how much time went into training steps.

    .venv/bin/python -m benchmarks.sweep_overhead [--space smoke] [--concurrency 1]

Figures: ``in_trial`` is (trial_s - step_s) per trial, the trial function's time outside
training steps (MLflow run, Lightning set-up, data, validation, diagnostics, checkpoints);
``marginal`` is what each extra trial adds to the sweep's wall time beyond its training steps
(the difference between the two sweeps, so Ray's start and the driver's fixed work cancel);
``fixed`` is the rest of the one-seed sweep. Run it alone: a second torch process on 2 cores
distorts it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default="smoke")
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    row = {
        "space": args.space,
        "concurrency": args.concurrency,
        **overhead(args.space, args.concurrency),
    }
    print(json.dumps(row, indent=2))
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"sweep_overhead_{args.space}_c{args.concurrency}.json"
    (args.out / name).write_text(json.dumps(row, indent=2) + "\n")


if __name__ == "__main__":
    main()
