"""The search section (searches only): the best trials, PED-ANOVA importance and, for two
objectives, the Pareto front."""

from __future__ import annotations

from typing import Any

from record.schema import FINAL_OF, Metric
from reports import figures
from reports.document import Figure, Paragraph, Section, Table
from reports.importance import importance
from reports.normalize import varied_axes
from reports.sections.cells import fmt
from reports.sweep import SweepData


def search_section(data: SweepData) -> Section | None:
    space = data.space or {}
    if space.get("kind") != "search":
        return None
    done = data.view.comparable
    if done.empty:
        return Section("Search", (Paragraph("No trial has finished yet.", "warning"),))
    objectives = space.get("objectives") or [{"metric": Metric.VAL_LOSS, "mode": "min"}]
    keys = [FINAL_OF.get(o["metric"], o["metric"]) for o in objectives]
    first = done.sort_values(keys[0], ascending=objectives[0].get("mode", "min") == "min")
    rows = tuple(
        (str(r["arm"]), *[fmt(float(r[k])) for k in keys]) for _, r in first.head(10).iterrows()
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
        blocks.extend(_front(done.reset_index(drop=True), keys, objectives))
    return Section("Search", tuple(blocks))


def _front(done: Any, keys: list[str], objectives: list[dict[str, Any]]) -> list[Any]:
    from search_spaces.pareto import pareto_front

    points = done[keys].to_numpy(float).tolist()
    front = pareto_front(points, [o.get("mode", "min") for o in objectives])
    out: list[Any] = []
    image = figures.pareto(done, keys, front, keys)
    if image:
        out.append(Figure("pareto", image.png, "Trials and the Pareto front.", image.pdf))
    rows = tuple((str(done.iloc[i]["arm"]), *[fmt(points[i][j]) for j in range(2)]) for i in front)
    out.append(Table(("trial", *keys), rows, "Pareto front"))
    return out
