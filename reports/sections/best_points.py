"""A search's arms at their best points, as the results section says it: which settings the
search tuned per arm, that each arm is compared at its best point (``reports.normalize``'s
``best_points``) and what that choice costs in honesty, and each arm's best point beside its
mean over every point that finished. Nothing for a grid, or for a search that sampled no
training setting."""

from __future__ import annotations

from record.schema import Metric
from reports.ablation import ArmRow
from reports.document import Block, Paragraph, Table
from reports.normalize import TrialView, point_of
from reports.sections.cells import fmt, fmt_ci


def best_point_blocks(view: TrialView, rows: list[ArmRow]) -> list[Block]:
    """The sentence and the table; none where the view tunes nothing."""
    if not view.tuned:
        return []
    return [Paragraph(_sentence(view.tuned), "note"), _table(view, rows)]


def _names(keys: tuple[str, ...]) -> str:
    quoted = [f"`{k}`" for k in keys]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _sentence(tuned: tuple[str, ...]) -> str:
    return (
        f"This search sampled {_names(tuned)} per trial, so the table above compares each arm "
        "(its configuration without those settings) at its best point: the sampled values "
        "with the lowest mean final validation loss over the point's seeds (a seed that did "
        "not finish disqualifies the point), and every statistic and test in it uses only "
        "that point's trials. Comparing all of an arm's trials would mix good and bad "
        "settings. The best of several sampled points is an optimistic estimate of an arm's "
        "loss, the more so the more points the search gave it, and the tests above do not "
        "correct for that selection; the table below shows each "
        "arm's best point, how many of its points finished, and its mean over all of them."
    )


def _table(view: TrialView, rows: list[ArmRow]) -> Table:
    """Per arm in the results' order: its best point's values, its loss there, the points
    that finished and the mean over every finished trial."""
    best = {str(a): g for a, g in view.comparable.groupby("arm")}
    every = {str(a): g for a, g in view.sampled.groupby("arm")} if len(view.sampled) else {}
    cells = []
    for r in rows:
        at = best.get(r.arm)
        point = point_of(at.iloc[0], view.tuned) if at is not None else ("—",) * len(view.tuned)
        sampled = every.get(r.arm)
        n = (
            len({point_of(t, view.tuned) for _, t in sampled.iterrows()})
            if sampled is not None
            else 0
        )
        mean = float(sampled[Metric.FINAL_VAL_LOSS].mean()) if sampled is not None else float("nan")
        cells.append((r.arm, *point, fmt_ci(r.final), str(len(r.seeds)), str(n), fmt(mean)))
    columns = (
        "arm",
        *(k.split(".")[-1] for k in view.tuned),
        "final val loss at best",
        "seeds at best",
        "points finished",
        "mean final val loss, all finished trials",
    )
    return Table(columns, tuple(cells), "each arm's best point (the comparison's trials)")
