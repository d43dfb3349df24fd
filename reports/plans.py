"""Which invocations' trials a report covers: every plan the sweep recorded, or only the latest
(``nas report --plan latest``). Each ``nas sweep`` invocation keeps its plan (the trial keys it
asked for) on the parent run; a sweep whose plan changed holds trials the latest plan no longer
names, and ``latest`` leaves those out."""

from __future__ import annotations

import dataclasses

# The CLI reads PLAN_CHOICES for its --help: reports.sweep loads no pandas at import.
from reports.sweep import PLAN_CHOICES, SweepData, site_arrays


def select_plan(data: SweepData, choice: str) -> SweepData:
    """``data`` restricted to the trials of the chosen plans. ValueError (one line) for an
    unknown choice, or for ``latest`` on a sweep that recorded no plans."""
    if choice not in PLAN_CHOICES:
        raise ValueError(f"--plan {choice!r}: unknown; choose from {', '.join(PLAN_CHOICES)}")
    if choice == "all":
        return data
    if not data.plans:
        raise ValueError(
            f"--plan latest: sweep {data.name!r} recorded no plans (it ran before plans were "
            "kept); use --plan all"
        )
    keys = set(data.plans[-1]["keys"])
    trials = data.trials[data.trials["key"].isin(keys)]
    kept = set(trials["run_id"])
    return dataclasses.replace(
        data,
        trials=trials,
        curves=data.curves[data.curves["run_id"].isin(kept)],
        profiles=data.profiles[data.profiles["run_id"].isin(kept)],
        **site_arrays([data], kept),
        plan="latest",
    )
