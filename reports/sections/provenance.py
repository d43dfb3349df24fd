"""The provenance section: what ran, when, from which command and code, on what hardware, how
many trials ended in each status, and why each trial outside the statistics is outside."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from record.redact import redact
from record.schema import COMPARABLE, Status
from reports.document import Paragraph, Section, Table
from reports.merge import SWEEP_COLUMN, separating_keys, sweeps_holding
from reports.outcomes import WORDS, counts
from reports.sections.cells import MAX_ROWS
from reports.sweep import SweepData

# Why a trial has this status, where its run does not say (an old record, or a status that
# carries no reason).
DEFAULT_REASON: dict[Status, str] = {
    Status.FAILED: "see the run's logs",
    Status.KILLED: "interrupted; run the same command again to resume it",
    Status.STOPPED_EARLY: "stopped by the scheduler (ASHA)",
}
LIVE_REASON = (
    "no outcome recorded yet: still training, or interrupted (then the same command resumes it)"
)


def provenance(data: SweepData) -> Section:
    p, t = data.parents, data.trials
    found = counts(t)
    running = p["run_status"].iloc[-1] == "RUNNING"
    rows = [
        ("sweep", data.name),
        ("space", str(p["space"].iloc[-1])),
        ("command", shown_command(str(p["command"].iloc[-1]))),
        ("invocations", str(int(p["plans"].clip(lower=1).sum()))),
        ("plans", _plans(data)),
        ("first start", _when(p["start"].min())),
        ("last end", "still running" if running else _when(p["end"].max())),
        ("git commit", ", ".join(c[:12] for c in _values(t, "git_commit")) or "unknown"),
        (
            "versions",
            ", ".join(f"{k} {v}" for k, v in p["versions"].iloc[-1].items()) or "not recorded",
        ),
        ("hardware", "; ".join(_values(t, "hardware")) or "not recorded"),
        ("MLflow store", relative_to_here(redact(data.uri))),
        ("trials", run_counts(found, len(data.skipped))),
    ]
    if data.superseded:
        rows.append(("archived", _archived(data.superseded)))
    blocks: list[Any] = [Table(("", "value"), tuple(rows))]
    if data.sweeps:
        blocks.extend(_sweeps(data))
    if running:
        blocks.append(
            Paragraph(
                "This sweep is still running, or its last invocation was interrupted: the "
                f"report covers the {found[Status.FINISHED]} trials finished so far.",
                "warning",
            )
        )
    reasons = _reasons(t, data.skipped)
    if reasons:
        caption = "not in the statistics"
        if len(reasons) > MAX_ROWS:
            caption += f" (first {MAX_ROWS} of {len(reasons)})"
        blocks.append(
            Table(("trial", "outcome", "at step", "reason"), tuple(reasons[:MAX_ROWS]), caption)
        )
    return Section("Provenance", tuple(blocks))


def _sweeps(data: SweepData) -> list[Any]:
    """A report over several sweeps: each sweep's own provenance in one row, and what keeps
    their trials from being compared, where anything does."""
    held, parents = sweeps_holding(data.trials), sweeps_holding(data.parents)
    rows = []
    for sweep in data.sweeps:
        mine = parents[parents[SWEEP_COLUMN] == sweep]
        trials = held[held[SWEEP_COLUMN] == sweep]
        rows.append(
            (
                sweep,
                shown_command(str(mine["command"].iloc[-1])) if len(mine) else "?",
                run_counts(counts(trials), 0).removesuffix(", 0 skipped"),
                _when(mine["start"].min()) if len(mine) else "?",
                "; ".join(_values(trials, "hardware")) or "not recorded",
            )
        )
    blocks: list[Any] = [
        Table(
            ("sweep", "command", "trials it holds", "first start", "hardware"),
            tuple(rows),
            "the sweeps this report covers; arms are matched by configuration, and a trial "
            "recorded in more than one of them (same configuration and seed) is counted once",
        )
    ]
    apart = separating_keys(data.trials)
    if apart:
        detail = "; ".join(f"`{k}` ({' / '.join(v)})" for k, v in apart.items())
        blocks.append(
            Paragraph(
                f"The sweeps differ in {detail}: their trials are different configurations, "
                "kept in separate arms, and no seed pairing or comparison crosses them.",
                "note",
            )
        )
    return blocks


# The program as a recorded command line may spell it: the installed script, or the module run
# with ``python -m nas.cli`` (sys.argv[0] is then the module's file).
_PROGRAM = re.compile(r"^\S*(?:/bin/nas|/nas/cli\.py)(?=\s|$)")


def relative_to_here(text: str, here: Path | None = None) -> str:
    """``text`` with the absolute paths inside the working folder written relative to it: a
    report shows ``sqlite:///gallery/mlflow.db``, not the checkout's place on the machine that
    made it. Paths elsewhere are kept as they are."""
    root = str((here or Path.cwd()).resolve()).rstrip("/") + "/"
    return text.replace(root, "") if root != "/" else text


def shown_command(command: str, here: Path | None = None) -> str:
    """A recorded command line as a reader would type it: ``nas ...``, paths relative."""
    return relative_to_here(_PROGRAM.sub("nas", command), here)


def run_counts(found: dict[Status, int], skipped: int) -> str:
    """ "4 finished, 1 diverged, 2 skipped": finished always, other statuses where any."""
    shown = [f"{k} {WORDS[s]}" for s, k in found.items() if k or s is Status.FINISHED]
    return ", ".join([*shown, f"{skipped} skipped"])


def _values(trials: pd.DataFrame, column: str) -> list[str]:
    """The distinct recorded values of a column (None where a trial did not record it)."""
    return sorted({str(v) for v in trials[column].dropna() if str(v)}) if len(trials) else []


def _plans(data: SweepData) -> str:
    if not data.plans:
        return "not recorded (the sweep ran before plans were kept)"
    if data.plan == "latest":
        n, keys = len(data.plans), len(data.plans[-1]["keys"])
        return f"the latest only (plan {n} of {n}, {keys} trials): `--plan latest`"
    return f"{len(data.plans)} recorded; this report covers the trials of all of them"


def _archived(n: int) -> str:
    runs = "parent run" if n == 1 else "parent runs"
    return f"{n} earlier {runs} archived by `nas sweep --restart`: their trials are left out"


def _when(ts: Any) -> str:
    return "?" if pd.isna(ts) else pd.Timestamp(ts).strftime("%Y-%m-%d %H:%M UTC")


def _label(row: pd.Series) -> str:
    if row["status"] == Status.INFEASIBLE:
        return str(row["key"])
    return str(row["arm"]) + ("" if pd.isna(row["seed"]) else f" seed {row['seed']}")


def _reasons(trials: pd.DataFrame, skipped: Sequence[dict[str, str]]) -> list[tuple[str, ...]]:
    """One row per grid cell never launched and per trial outside the statistics, in the
    order of ``Status``."""
    out: list[tuple[str, ...]] = [
        (s.get("arm", "?"), "skipped", "—", s.get("reason", "")) for s in skipped
    ]
    if trials.empty:
        return out
    for status in Status:
        if status in COMPARABLE:
            continue
        for _, row in trials[trials["status"] == status].iterrows():
            step = "—" if pd.isna(row["status_step"]) else str(row["status_step"])
            reason = row["reason"] if isinstance(row["reason"], str) else None
            words = WORDS[status]
            if status is Status.KILLED and row["run_status"] == "RUNNING":
                # No outcome yet and MLflow still has the run open: it may be training now, or
                # its driver died without closing it; the store cannot tell which.
                words, reason = "running or interrupted", LIVE_REASON
            out.append(
                (_label(row), words, step, reason or DEFAULT_REASON.get(status, "not recorded"))
            )
    return out
