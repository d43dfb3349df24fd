"""What a sweep prints at the end: the trials ranked (or the Pareto front of a multi-objective
search), the failed, infeasible and skipped ones with reasons, where the results are and what to
run next; and the sweep-level metrics for the parent run."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from nas.live import label
from nas.trial import SweepContext
from reports.load import first_line
from search_spaces.pareto import pareto_front


@dataclass(frozen=True)
class Finished:
    label: str
    metrics: dict[str, Any]
    config: dict[str, Any]

    @property
    def loss(self) -> float:
        return float(self.metrics["val_loss"])


def summarize(
    results: Any, ctx: SweepContext, plan: Any, uri: str, completed: set[str]
) -> dict[str, float]:
    """Print the summary and return the sweep-level metrics.

    A trial counts as finished when its trainable reported completion (``nas_complete``), or
    when a sweep process saw it end (a scheduler's early stop); otherwise it was interrupted."""
    finished: list[Finished] = []
    failed: list[tuple[str, str]] = []
    infeasible: list[tuple[str, str]] = []
    unfinished: list[str] = []
    for r in results:
        name, metrics = label(r.config, ctx), r.metrics or {}
        if r.error:
            failed.append((name, first_line(r.error)))
        elif metrics.get("nas_infeasible"):
            infeasible.append((name, str(metrics.get("nas_reason", ""))))
        elif not metrics.get("nas_complete") and metrics.get("trial_id") not in completed:
            unfinished.append(name)
        elif metrics.get("val_loss") is not None:
            finished.append(Finished(name, dict(metrics), dict(r.config)))
    finished.sort(key=lambda f: f.loss)
    print(
        f"\nsweep {plan.name}: {len(finished)} finished, {len(failed)} failed, "
        f"{len(infeasible)} infeasible, {len(unfinished)} unfinished, "
        f"{len(plan.skipped)} skipped"
    )
    objectives = plan.space.objectives
    if len(objectives) > 1:
        _print_front(finished, objectives)
    else:
        for f in finished[:10]:
            print(f"  val_loss {f.loss:.4f}  {f.label}  ({int(f.metrics.get('step', 0))} steps)")
    for name, reason in failed:
        print(f"  failed {name}: {reason}")
    for name, reason in infeasible:
        print(f"  infeasible {name}: {reason}")
    for s in plan.skipped:
        print(f"  skipped {s.arm}: {s.reason}")
    if unfinished:
        print(f"  interrupted ({', '.join(unfinished)}): run the same command again to resume")
    _print_next(plan, uri)
    summary = {
        "sweep/finished": float(len(finished)),
        "sweep/failed": float(len(failed)),
        "sweep/infeasible": float(len(infeasible)),
        "sweep/unfinished": float(len(unfinished)),
        "sweep/skipped": float(len(plan.skipped)),
    }
    if finished:
        summary["sweep/best_val_loss"] = finished[0].loss
        _print_best(finished[0].config, ctx, plan)
    return summary


def _print_front(finished: list[Finished], objectives: Any) -> None:
    keys = [o.key for o in objectives]
    points = [[float(f.metrics.get(k, math.nan)) for k in keys] for f in finished]
    front = pareto_front(points, [o.mode for o in objectives])
    print(f"  Pareto front ({', '.join(o.metric + ' ' + o.mode for o in objectives)}):")
    for i in front:
        values = "  ".join(f"{k} {v:.4g}" for k, v in zip(keys, points[i], strict=True))
        print(f"    {values}  {finished[i].label}")


def _print_next(plan: Any, uri: str) -> None:
    print(f"runs recorded in MLflow at {uri} (experiment {plan.name})")
    print(f"Tune state and checkpoints in {plan.storage / plan.name}")
    from nas.tracking import resolve_tracking_uri

    store = "" if uri == resolve_tracking_uri(None) else f" --tracking-uri {uri}"
    print(f"next: `nas report {plan.name}{store}` for the report, `nas ui{store}` to browse")


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
    print(f"best configuration by val_loss (also in {path}; `nas train --config` takes it):")
    print("".join(f"  {line}\n" for line in text.splitlines()), end="")
