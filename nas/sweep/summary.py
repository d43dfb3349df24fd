"""What a sweep prints at the end, read from the record (not from Tune, which only knows this
invocation's trials): the trials ranked (or the Pareto front of a multi-objective search), every
trial that did not finish with its status and reason, where the results are and what to run next,
then the arms as the report's first table gives them and where the best configuration was
written; and the sweep-level metrics for the parent run."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nas.spec import trial_label
from nas.store.tracking import RecordedTrial
from record.redact import redact
from record.schema import FINAL_OF, Metric, Status
from search_spaces.pareto import pareto_front

BEST_CONFIG = "best-config.yaml"  # beside the Tune state
NOT_STARTED = "not started"  # planned, with no run in the record yet
# Outcomes that leave the sweep to be continued by running the same command again.
UNSETTLED = (Status.KILLED.value, NOT_STARTED, "running")


@dataclass(frozen=True)
class Outcome:
    label: str
    status: str  # a Status value, "running" (a run a crash left open) or NOT_STARTED
    reason: str
    metrics: Mapping[str, float]
    trial: RecordedTrial | None
    planned: bool = True  # in this invocation's plan (an unplanned one never keeps it open)

    @property
    def loss(self) -> float:
        return float(self.metrics.get(Metric.FINAL_VAL_LOSS, math.nan))


def outcomes(planned: Mapping[str, str], recorded: Mapping[str, RecordedTrial]) -> list[Outcome]:
    """One outcome per planned trial (key -> label: the campaign's ``planned``), plus every
    recorded trial the plan does not name (cells an earlier plan had: reported, but they do not
    keep this invocation's plan open)."""
    out = []
    for key, label in planned.items():
        r = recorded.get(key)
        status = NOT_STARTED if r is None else (r.status.value if r.status else "running")
        out.append(Outcome(label, status, r.reason if r else "", r.metrics if r else {}, r))
    for key, r in recorded.items():
        if key not in planned:
            status = r.status.value if r.status else "running"
            label = trial_label(r.arm, r.seed)
            out.append(Outcome(label, status, r.reason, r.metrics, r, planned=False))
    return out


def summarize(
    name: str, results: Sequence[Outcome], objectives: Sequence[Any], skipped: Sequence[Any]
) -> dict[str, float]:
    """Print the summary and return the sweep-level metrics (``sweep/<status>`` counts)."""
    counts = Counter(o.status for o in results)
    finished = sorted(
        (o for o in results if o.status == Status.FINISHED and math.isfinite(o.loss)),
        key=lambda o: o.loss,
    )
    order = [s.value for s in Status] + ["running", NOT_STARTED]
    others = ", ".join(f"{counts[s]} {s}" for s in order[1:] if counts[s])
    print(
        f"\nsweep {name}: {counts[Status.FINISHED.value]} finished"
        + (f", {others}" if others else "")
        + f", {len(skipped)} skipped"
    )
    if len(objectives) > 1:
        _print_front(finished, objectives)
    else:
        for o in finished[:10]:
            steps = int(o.metrics.get(Metric.FINAL_STEPS, 0))
            print(f"  val_loss {o.loss:.4f}  {o.label}  ({steps} steps)")
    for o in results:
        if o.status not in (Status.FINISHED, *UNSETTLED):
            print(f"  {o.status} {o.label}" + (f": {o.reason}" if o.reason else ""))
    for s in skipped:
        print(f"  skipped {s.arm}: {s.reason}")
    unsettled = [o.label for o in results if o.status in UNSETTLED and o.planned]
    if unsettled:
        shown = ", ".join(unsettled[:8]) + (" ..." if len(unsettled) > 8 else "")
        print(f"  not finished ({shown}): run the same command again to continue")
    summary = {f"{Metric.SWEEP_PREFIX}{s.replace(' ', '_')}": float(n) for s, n in counts.items()}
    summary[f"{Metric.SWEEP_PREFIX}unsettled"] = float(len(unsettled))
    summary[f"{Metric.SWEEP_PREFIX}skipped"] = float(len(skipped))
    if finished:
        summary[Metric.SWEEP_BEST_VAL_LOSS] = finished[0].loss
    return summary


def _print_front(finished: list[Outcome], objectives: Sequence[Any]) -> None:
    metrics = [FINAL_OF[o.metric] for o in objectives]
    points = [[float(f.metrics.get(m, math.nan)) for m in metrics] for f in finished]
    front = pareto_front(points, [o.mode for o in objectives])
    print(f"  Pareto front ({', '.join(o.metric + ' ' + o.mode for o in objectives)}):")
    for i in front:
        values = "  ".join(
            f"{o.metric} {v:.4g}" for o, v in zip(objectives, points[i], strict=True)
        )
        print(f"    {values}  {finished[i].label}")


def best(results: Sequence[Outcome]) -> Outcome | None:
    finished = [o for o in results if o.status == Status.FINISHED and math.isfinite(o.loss)]
    return min(finished, key=lambda o: o.loss, default=None)


def print_next(name: str, uri: str, default_uri: str, state: Any) -> None:
    print(f"runs recorded in MLflow at {redact(uri)} (experiment {name})")
    print(f"Tune state and checkpoints in {state}")
    store = "" if uri == default_uri else f" --tracking-uri {redact(uri)}"
    print(f"next: `nas report {name}{store}` for the report, `nas ui{store}` to browse")


def print_end(name: str, uri: str, top: Outcome | None, folder: Path) -> None:
    """The sweep's last screen: its arms as the report's first table gives them (the mean final
    validation loss with its interval and seeds, Δ against the baseline with the test's verdict,
    the minimum detectable effect), then where the best trial's configuration was written."""
    from reports.brief import results_brief
    from reports.load import load_sweep

    try:  # read as `nas report` reads it by default: every plan, the default baselines
        lines = results_brief(load_sweep(uri, name))
    except ValueError as err:  # a record the report cannot read: `nas report` says the same
        lines = [f"arms: the record cannot be summarized ({err})"]
    print("\n" + "\n".join(lines))
    if top is not None:
        folder.mkdir(parents=True, exist_ok=True)
        write_best(top, folder / BEST_CONFIG)


def write_best(o: Outcome, path: Path) -> None:
    """Save the best trial's full configuration, as recorded, as YAML (``nas train --config``
    takes it as it is), and say where in one line."""
    import yaml

    from trainers.config import to_dict
    from trainers.config_io import field_help, from_dict, parse_overrides

    assert o.trial is not None
    keys = field_help()
    pairs = [f"{k}={v}" for k, v in o.trial.params.items() if k in keys]
    path.write_text(yaml.safe_dump(to_dict(from_dict(parse_overrides(pairs))), sort_keys=False))
    print(f"best trial: {o.label} (final val loss {o.loss:.4f}); for `nas train --config`: {path}")
