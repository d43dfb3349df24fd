"""The report's results table in a few lines of plain text, for a terminal: what ``nas sweep``
ends with. The rows are the report's first table's (``reports.ablation.arm_rows``: the same
trials, baselines, tests and Holm correction) and the minimum detectable effect is its seeds
section's (``reports.power.comparison_mde`` at Holm's first-step level); only the layout is this
module's."""

from __future__ import annotations

import textwrap

from reports.ablation import ArmRow, arm_rows
from reports.outcomes import describe
from reports.power import MIN_SEEDS, POWER, comparison_mde
from reports.sections.cells import fmt, fmt_ci, fmt_diff
from reports.sweep import SweepData
from stats.compare import family_size, first_step_alpha

MAX_ARMS = 12  # the best arms shown; `nas report` lists them all
WIDTH = 100  # the notes are wrapped to it
NONE_FINISHED = "arms: no trial finished, so there is nothing to compare"


def results_brief(data: SweepData, baseline: str | None = None) -> list[str]:
    """Per arm its mean final validation loss with its 95% interval and seeds, its Δ against
    its baseline with the test, Holm-adjusted p and verdict, and the minimum detectable effect;
    then what the reader must know to read it (one seed, no baseline, trials that did not
    finish). One line when no trial finished. ``baseline``: as ``nas report --baseline``."""
    rows = arm_rows(data.view, baseline)
    if not any(r.final.n for r in rows):
        return [NONE_FINISHED]
    compared = [r.comparison for r in rows if r.comparison is not None]
    tested = family_size([c.p for c in compared])
    alpha = first_step_alpha(compared)
    columns = _columns(bool(compared), bool(tested))
    shown = rows[:MAX_ARMS]
    cells = [_cells(r, alpha) for r in shown]
    table = [columns, *(tuple(c[name] for name in columns) for c in cells)]
    title = "arms by mean final validation loss (± half-width of the 95% interval over seeds)"
    lines = [f"{title}:", *(f"  {line}" for line in _aligned(table))]
    if len(rows) > MAX_ARMS:
        lines.append(f"  (the best {MAX_ARMS} of {len(rows)} arms; `nas report` lists them all)")
    notes = _notes(rows, len(compared), tested) + _unfinished(shown)
    return lines + [line for note in notes for line in textwrap.wrap(note, WIDTH)]


MDE = f"MDE ({100 * POWER:.0f}%)"
COLUMNS: tuple[str, ...] = (
    "arm",
    "final val loss",
    "seeds",
    "Δ vs baseline [95% CI]",
    "test",
    "p (Holm)",
    "verdict",
    MDE,
)


def _columns(compared: bool, tested: bool) -> tuple[str, ...]:
    """Every column where a comparison was tested; Δ and the verdict where none could be (one
    seed per arm); the arm's own where nothing is compared."""
    if tested:
        return COLUMNS
    return (*COLUMNS[:4], "verdict") if compared else COLUMNS[:3]


def _cells(r: ArmRow, alpha: float) -> dict[str, str]:
    """The row's cells by column; those of a comparison empty where the arm has none (the
    baseline itself, an arm without one, or one that did not finish)."""
    c = r.comparison
    cells = dict.fromkeys(COLUMNS, "")
    cells.update({"arm": r.arm, "final val loss": fmt_ci(r.final), "seeds": str(len(r.seeds))})
    cells["verdict"] = r.verdict
    if c is not None:
        cells.update({"Δ vs baseline [95% CI]": fmt_diff(c), "test": c.test})
        cells.update({"p (Holm)": fmt(c.p_adjusted, 3), MDE: fmt(comparison_mde(c, alpha))})
    return cells


def _aligned(table: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[j]) for row in table) for j in range(len(table[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]


def _notes(rows: list[ArmRow], compared: int, tested: int) -> list[str]:
    """What the table needs said: how to read Δ, and what is missing and why."""
    notes = []
    if tested:
        notes.append(
            "Δ: arm minus its baseline (negative is better); t-test paired by seed where both "
            f"finished the same seeds, Welch's otherwise; p Holm-corrected over {tested} "
            f"test{'s' if tested != 1 else ''}; better/worse: significant at 5%. MDE: the "
            f"smallest |Δ| the test detects with {100 * POWER:.0f}% power at its seeds (— under "
            f"{MIN_SEEDS} seeds)."
        )
    elif compared:
        notes.append("Δ: arm minus its baseline (negative is better).")
    elif len(rows) == 1:
        notes.append("one arm: no Δ to compute.")
    else:
        notes.append("no standard/pre arm to compare with: `nas report --baseline ARM` names one.")
    if max(len(r.seeds) for r in rows) < 2:
        seeds = ",".join(map(str, range(MIN_SEEDS)))
        notes.append(
            "one seed per arm: no interval and no test (each needs 2 seeds per arm), no MDE "
            f"({MIN_SEEDS})."
        )
        notes.append(f"Rerun with `--seeds {seeds}` for all three.")
    return notes


def _unfinished(rows: list[ArmRow]) -> list[str]:
    """How the arms' other trials ended (diverged, failed, stopped early...), where they have
    any: their statistics rest on the finished ones only."""
    return [
        f"{r.arm}: {describe(r.statuses)}; its statistics are over the {len(r.seeds)} finished."
        for r in rows
        if sum(r.statuses.values()) > len(r.seeds)
    ]
