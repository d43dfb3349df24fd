"""The report's sections, each a pure function from a ``SweepData`` to a ``Section`` (or None
where the sweep has nothing for it), one module per section. They say what the runs show, with
their uncertainty, and say so plainly where the data cannot answer (one seed, no baseline,
trials that did not finish, a published effect that does not appear)."""

from __future__ import annotations

from reports.sections.budget import budget_section
from reports.sections.coordcheck import coordcheck_section
from reports.sections.cost import cost_section
from reports.sections.effects import axis_effects
from reports.sections.lr_stage import lr_section
from reports.sections.lr_transfer import transfer_section
from reports.sections.plots import figure_section
from reports.sections.provenance import provenance
from reports.sections.reference import reference_section
from reports.sections.results import main_table
from reports.sections.routing import routing_section
from reports.sections.scaling import compute_section
from reports.sections.search import search_section
from reports.sections.seeds import seed_section, seeds_effect
from reports.sections.time_matched import time_matched_section

__all__ = [
    "axis_effects",
    "budget_section",
    "compute_section",
    "coordcheck_section",
    "cost_section",
    "figure_section",
    "lr_section",
    "main_table",
    "provenance",
    "reference_section",
    "routing_section",
    "search_section",
    "seed_section",
    "seeds_effect",
    "time_matched_section",
    "transfer_section",
]
