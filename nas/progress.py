"""What a sweep prints: one line per validation report and per finished trial while it runs,
and at the end the trials ranked, the skipped and failed ones with reasons, and where to look."""

from __future__ import annotations

import math
import time
from typing import Any

from ray import tune

from nas.trial import SweepContext


def _label(config: dict, ctx: SweepContext) -> str:
    """A trial's readable name: its arm and seed for a grid cell, its values for a search."""
    cell = config.get("cell")
    if cell is not None:
        return f"{ctx.arms[int(cell)]} seed {ctx.cells[int(cell)]['train.seed']}"
    shown = {k.split(".")[-1]: v for k, v in config.items()}
    return ", ".join(
        f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()
    )


class ProgressPrinter(tune.Callback):
    """A compact live log in place of Ray's console output."""

    def __init__(self, ctx: SweepContext) -> None:
        self.ctx = ctx
        self.completed: set[str] = set()  # trials that ended on their own or by the scheduler
        self.start = time.monotonic()
        self.best: dict[str, float] = {}
        self.done = 0

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        loss = result.get("val_loss")
        if loss is None or result.get("nas_complete"):
            return
        best = min(self.best.get(trial.trial_id, math.inf), loss)
        self.best[trial.trial_id] = best
        print(
            f"[{time.monotonic() - self.start:6.0f}s] {trial.trial_id}  "
            f"{_label(trial.config, self.ctx):<40} step {int(result.get('step', 0)):>6}  "
            f"val_loss {loss:.4f}  best {best:.4f}",
            flush=True,
        )

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.done += 1
        self.completed.add(trial.trial_id)
        print(
            f"[{time.monotonic() - self.start:6.0f}s] finished {self.done}/{len(trials)}: "
            f"{_label(trial.config, self.ctx)}",
            flush=True,
        )

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        print(
            f"[{time.monotonic() - self.start:6.0f}s] FAILED {_label(trial.config, self.ctx)}",
            flush=True,
        )


def summarize(
    results: Any, ctx: SweepContext, plan: Any, uri: str, completed: set[str]
) -> dict[str, float]:
    """Print the ranking and return the sweep-level summary metrics for the parent run.

    A trial counts as finished when its trainable reported completion (``nas_complete``), or
    when this process saw it end (a scheduler's early stop); otherwise it was interrupted
    (Tune reports an interrupted trial as TERMINATED too, so its status cannot tell)."""
    rows: list[tuple[float, str, int, dict]] = []
    failed: list[tuple[str, str]] = []
    unfinished: list[str] = []
    for r in results:
        trial_label = _label(r.config, ctx)
        metrics = r.metrics or {}
        if r.error:
            failed.append((trial_label, str(r.error).splitlines()[0]))
        elif not metrics.get("nas_complete") and metrics.get("trial_id") not in completed:
            unfinished.append(trial_label)
        elif metrics.get("val_loss") is not None:
            loss, step = float(metrics["val_loss"]), int(metrics.get("step", 0))
            rows.append((loss, trial_label, step, dict(r.config)))
    rows.sort(key=lambda row: row[0])
    print(
        f"\nsweep {plan.name}: {len(rows)} finished, {len(failed)} failed, "
        f"{len(unfinished)} unfinished, {len(plan.skipped)} skipped"
    )
    for loss, trial_label, step, _ in rows[:10]:
        print(f"  val_loss {loss:.4f}  {trial_label}  ({step} steps)")
    for trial_label, reason in failed:
        print(f"  failed {trial_label}: {reason}")
    for s in plan.skipped:
        print(f"  skipped {s.arm}: {s.reason}")
    if unfinished:
        print(f"  interrupted ({', '.join(unfinished)}): run the same command again to resume")
    print(
        f"runs recorded in MLflow at {uri} (experiment {plan.name}); browse with "
        f"`mlflow ui --backend-store-uri {uri}`"
    )
    print(f"Tune state and checkpoints in {plan.storage / plan.name}")
    summary = {
        "sweep/finished": float(len(rows)),
        "sweep/failed": float(len(failed)),
        "sweep/unfinished": float(len(unfinished)),
        "sweep/skipped": float(len(plan.skipped)),
    }
    if rows:
        summary["sweep/best_val_loss"] = rows[0][0]
        _print_best(rows[0][3], ctx, plan)
    return summary


def _print_best(config: dict, ctx: SweepContext, plan: Any) -> None:
    """The best trial's full configuration as YAML, printed and saved beside the Tune state:
    ``nas train --config`` takes it as it is."""
    import yaml

    from search_spaces.space import apply_point
    from trainers.config import to_dict
    from trainers.config_io import from_dict

    cell = config.get("cell")
    point = ctx.cells[int(cell)] if cell is not None else {**config, "train.seed": ctx.seed}
    text = yaml.safe_dump(to_dict(apply_point(from_dict(ctx.base), point)), sort_keys=False)
    path = plan.storage / plan.name / "best-config.yaml"
    path.write_text(text)
    print(f"best configuration (also in {path}; `nas train --config` takes it):")
    print("".join(f"  {line}\n" for line in text.splitlines()), end="")
