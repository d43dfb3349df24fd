"""How trials ended, for the report: which trials a comparison may use, which ones say something
about their configuration, and the words the report uses for each status. Pure functions over
the trial frame of ``reports.load`` (its ``status`` column holds ``Status`` values)."""

from __future__ import annotations

import pandas as pd

from record.schema import COMPARABLE, SETTLED, Metric, Status

# Statuses that are a result about the configuration: it trained and the outcome stands. An
# infeasible trial never trained; a failed one (a crash, perhaps the machine's) is retried and
# a killed one resumed, so neither is an outcome yet. Divergence rates are over these.
OUTCOMES = SETTLED - {Status.INFEASIBLE}

# The report's words for a status, as in "1 of 3 seeds diverged". Every status has one.
WORDS: dict[Status, str] = {
    Status.FINISHED: "finished",
    Status.DIVERGED: "diverged",
    Status.TIMED_OUT: "timed out",
    Status.FAILED: "failed",
    Status.INFEASIBLE: "infeasible",
    Status.STOPPED_EARLY: "stopped early",
    Status.KILLED: "interrupted",
}


def comparable(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials whose final metrics a comparison may use (``COMPARABLE``, with a final loss)."""
    if trials.empty:
        return trials
    ok = trials["status"].isin(COMPARABLE)
    return trials[ok & trials.get(Metric.FINAL_VAL_LOSS, pd.Series(dtype=float)).notna()]


def with_outcome(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials that trained to an outcome (``OUTCOMES``): the denominators of divergence rates."""
    return trials[trials["status"].isin(OUTCOMES)] if not trials.empty else trials


def configured(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials with a full configuration: all but the infeasible ones (which carry only the
    point the search proposed)."""
    return trials[trials["status"] != Status.INFEASIBLE] if not trials.empty else trials


def diverged(trials: pd.DataFrame) -> pd.Series:
    """True for each trial that diverged."""
    return trials["status"] == Status.DIVERGED


def counts(trials: pd.DataFrame) -> dict[Status, int]:
    """Trials per status, every status present (zero where none)."""
    found = trials["status"].value_counts() if not trials.empty else pd.Series(dtype=int)
    return {s: int(found.get(s.value, 0)) for s in Status}


def describe(found: dict[Status, int], noun: str = "seeds") -> str:
    """Counts per status in words: "all 3 seeds finished", or each status other than finished
    as "1 of 3 seeds diverged, 1 of 3 timed out"."""
    n = sum(found.values())
    others = [(s, k) for s, k in found.items() if k and s is not Status.FINISHED]
    if not others:
        return f"all {n} {noun} finished" if n != 1 else f"1 {noun.removesuffix('s')} finished"
    (status, k), *rest = others
    words = [f"{k} of {n} {noun} {WORDS[status]}"] + [f"{j} of {n} {WORDS[s]}" for s, j in rest]
    return ", ".join(words)
