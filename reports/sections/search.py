"""The search section (searches only): the best trials, PED-ANOVA importance and, for two
objectives, the Pareto front, over every point the search sampled (the results table compares
each arm at its best point only)."""

from __future__ import annotations

from typing import Any

from record.schema import FINAL_OF, Metric
from reports import figures
from reports.document import Figure, Paragraph, Section, Table
from reports.importance import importance
from reports.normalize import label_of, varied_axes
from reports.sections.cells import fmt
from reports.sweep import SweepData


def search_section(data: SweepData) -> Section | None:
    space = data.space or {}
    if space.get("kind") != "search":
        return None
    done = data.view.sampled  # every point sampled, not only each arm's best
    if done.empty:
        return Section("Search", (Paragraph("No trial has finished yet.", "warning"),))
    objectives = space.get("objectives") or [{"metric": Metric.VAL_LOSS, "mode": "min"}]
    keys = [FINAL_OF.get(o["metric"], o["metric"]) for o in objectives]
    first = done.sort_values(keys[0], ascending=objectives[0].get("mode", "min") == "min")
    rows = tuple(
        (_trial(r, data.view.tuned), *[fmt(float(r[k])) for k in keys])
        for _, r in first.head(10).iterrows()
    )
    blocks: list[Any] = [Table(("trial", *[o["metric"] for o in objectives]), rows, "best trials")]
    found = importance(done, varied_axes(done), keys[0], objectives[0].get("mode", "min"))
    if found:
        blocks.append(
            Table(
                ("parameter", "importance"),
                tuple((k, fmt(v, 3)) for k, v in found),
                "PED-ANOVA importance for the first objective (Optuna)",
            )
        )
    if len(keys) == 2:
        blocks.extend(_front(done.reset_index(drop=True), keys, objectives, data.view.tuned))
    return Section("Search", tuple(blocks))


def _trial(row: Any, tuned: tuple[str, ...]) -> str:
    """A trial's arm and, where the search tuned settings per arm, its values of them."""
    arm = str(row["arm"])
    if not tuned:
        return arm
    return "/".join(p for p in (arm if arm != "base" else "", label_of(row, tuned)) if p)


def _front(
    done: Any, keys: list[str], objectives: list[dict[str, Any]], tuned: tuple[str, ...]
) -> list[Any]:
    from search_spaces.pareto import pareto_front

    points = done[keys].to_numpy(float).tolist()
    front = pareto_front(points, [o.get("mode", "min") for o in objectives])
    out: list[Any] = []
    image = figures.pareto(done, keys, front, keys)
    if image:
        out.append(Figure("pareto", image.png, "Trials and the Pareto front.", image.pdf))
    rows = tuple(
        (_trial(done.iloc[i], tuned), *[fmt(points[i][j]) for j in range(2)]) for i in front
    )
    out.append(Table(("trial", *keys), rows, "Pareto front"))
    return out
