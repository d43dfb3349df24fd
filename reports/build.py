"""A sweep's report as a ``Document``: the sections in reading order, and the report's tables
as data (``trials.csv``, ``arms.csv``), all made from the sweep's normalized view."""

from __future__ import annotations

from reports import sections
from reports.document import Document, Section
from reports.sweep import SweepData
from reports.tidy import csv_files


def build_report(
    data: SweepData, baseline: str | None = None, effect: float | None = None
) -> Document:
    """Pure: the same data give the same document. Raises ValueError for an unknown
    ``baseline`` arm. ``effect``: the difference (nats) the seeds section sizes seeds for; None:
    the one a ``--seeds auto`` sweep recorded, else ``DEFAULT_EFFECT``."""
    results, rows = sections.main_table(data, baseline)
    sized, _ = sections.seeds_effect(data, effect)
    parts: list[Section | None] = [
        sections.provenance(data),
        results,
        sections.seed_section(data, rows, effect),
        sections.lr_section(data),
        sections.transfer_section(data),
        sections.coordcheck_section(data),
        sections.cost_section(data, rows),
        sections.time_matched_section(data, rows),
        sections.axis_effects(data),
        sections.routing_section(data),
        sections.figure_section(data),
        sections.search_section(data),
        sections.compute_section(data),
        sections.budget_section(data),
        sections.reference_section(data, rows),
    ]
    n = len(data.view.comparable)
    subtitle = f"{n} finished trial{'' if n == 1 else 's'}"
    if data.plan == "latest":
        subtitle += ", latest plan only"
    return Document(
        f"Sweep report: {data.name}",
        tuple(p for p in parts if p is not None),
        subtitle=subtitle,
        data_files=csv_files(data, rows, sized),
    )
