"""The seeds section: what the seeds run could detect, comparison by comparison (the seed noise,
the minimum detectable effect, the seeds an effect would need, ``reports.power``), the arms
whose seeds spread more than the others', and each seed's final loss, so that an outlier seed
is seen rather than averaged away."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from record.schema import Metric
from reports.ablation import ArmRow
from reports.document import Block, Paragraph, Section, Table
from reports.power import (
    DEFAULT_EFFECT,
    MIN_SEEDS,
    POWER,
    SEEDS_CAP,
    comparison_mde,
    comparison_seeds,
    estimable,
    noisy_arms,
    sd_range,
)
from reports.sections.cells import MAX_ROWS, fmt, fmt_diff
from reports.sweep import SweepData
from stats.compare import Comparison, family_size, first_step_alpha

SHOWN_SEEDS = 12  # an arm's seeds listed one by one; more are cut, and the cell says so


def seed_section(data: SweepData, rows: list[ArmRow], given: float | None = None) -> Section | None:
    """``rows``: the results table's; ``given``: the effect to size seeds for (``--effect``), else
    the one the sweep's ``--seeds auto`` was sized for, else ``DEFAULT_EFFECT``. None where no
    arm is compared with a baseline and no arm has two seeds."""
    effect, why = seeds_effect(data, given)
    compared = [r for r in rows if r.comparison is not None]
    comparisons = [r.comparison for r in compared if r.comparison]
    alpha = first_step_alpha(comparisons)
    tested = family_size([c.p for c in comparisons])
    blocks: list[Block] = [] if data.seeds_auto is None else [_chosen(data.seeds_auto)]
    estimated = [c.n for c in comparisons if c.n >= MIN_SEEDS]
    if estimated:
        blocks += [_intro(effect, why, alpha, tested), _table(compared, rows, effect, alpha)]
        blocks.append(_caveat(min(estimated)))
    if any(_paired(c) for c in comparisons):
        blocks.append(PAIRING)
    blocks += [_sentence(r, effect, alpha) for r in compared[:MAX_ROWS]]
    if len(compared) > MAX_ROWS:
        blocks.append(Paragraph(f"(The first {MAX_ROWS} of {len(compared)} comparisons.)"))
    blocks += _noisy(rows)
    if any(len(r.seeds) >= 2 for r in rows):
        blocks.append(_each_seed(data.view.comparable, rows))
    if not blocks:
        return None
    return Section("Seeds: noise and what this sweep could detect", tuple(blocks))


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def seeds_effect(data: SweepData, given: float | None) -> tuple[float, str]:
    """The effect the section sizes seeds for, and why that one: a report about a sweep that
    ``--seeds auto`` sized answers the question the sweep was sized for unless told otherwise."""
    if given is not None:
        return given, " (`--effect`)"
    recorded = (data.seeds_auto or {}).get("effect")
    if recorded is not None:
        return float(recorded), " (the effect this sweep's `--seeds auto` was sized for)"
    return DEFAULT_EFFECT, (
        " (the default: the smallest gain of Block AttnRes over the PreNorm baseline that the "
        "AttnRes paper reports, Table 2, at 194M–528M parameters)"
    )


def _intro(effect: float, why: str, alpha: float, m: int) -> Paragraph:
    return Paragraph(
        "What each comparison's seeds could detect. The seed noise is the standard deviation of "
        "the per-seed differences where the comparison is paired, and of each arm's seeds where "
        "it is not (Welch). The minimum detectable effect (MDE) is the smallest |Δ| that the "
        f"comparison's two-sided t-test detects with {_pct(POWER)} probability at the seeds "
        "run, from the noncentral t distribution; the seeds needed are the fewest seeds per arm "
        f"that would detect |Δ| = {effect:g} nats{why} with the same probability. Both use "
        f"α = {_alpha(alpha)}, Holm's first step over the {m} comparison{'s' if m != 1 else ''} "
        "the results table tests: the strictest level a comparison can face, and one that "
        "suffices whatever the others show (a p at or below it stays below 0.05 after Holm's "
        "correction). Unpaired comparisons are sized for Student's two-sample t; Welch's test, "
        "which they run, has less power at few seeds (in simulation, 70% where Student's has 80% "
        "at 3 seeds per arm and α = 0.05), so there the MDE understates."
    )


def _chosen(state: dict[str, Any]) -> Paragraph:
    """How ``nas sweep --seeds auto`` chose the seeds, from its record (``SEEDS_FILE``)."""
    pilot = len(state.get("pilot_seeds", []))
    if "seeds" not in state:
        return Paragraph(f"`--seeds auto`: the pilot of {pilot} seeds has not settled yet.", "note")
    needs = "; ".join(_need(arm, c) for arm, c in state["comparisons"].items())
    return Paragraph(
        f"`--seeds auto` chose {state['seeds']} seeds per arm from a pilot of {pilot}, from the "
        "pilot's noise alone (never its Δ): the seeds each comparison needs to detect "
        f"{state['effect']:g} nats at {_pct(state['power'])} power and α = "
        f"{_alpha(state['alpha_each'])} each, at most {state['max_seeds']} ({needs}).",
        "note",
    )


def _need(arm: str, c: dict[str, Any]) -> str:
    """One comparison's sizing as ``--seeds auto`` recorded it."""
    if c["sd"] is None:
        return f"{arm} vs {c['baseline']}: {c['n']} pairs, noise not estimated"
    need = "over the cap" if c["needed"] is None else str(c["needed"])
    return f"{arm} vs {c['baseline']}: sd {fmt(c['sd'])} over {c['n']} pairs, {need}"


def _alpha(alpha: float) -> str:
    return f"{alpha:.3g}" if math.isfinite(alpha) else "—"


# What "paired by seed" pairs, as tests/trainers/test_seed_pairing.py and test_data.py check it.
PAIRING = Paragraph(
    "A paired test pairs each arm's seed with the baseline's same seed. A seed fixes the "
    "training windows and their order (drawn from a generator of their own, so the same for "
    "every arm of the same sequence length and batch) and the initial weights: under one seed "
    "every wiring starts from the same values wherever it shares a parameter with the baseline "
    "(DeepNorm excepted, whose rule rescales them); a wiring's own parameters start from its "
    "own init. Pairs therefore differ by the wiring, not by their data or starting point.",
    "note",
)


def _caveat(n: int) -> Paragraph:
    low, high = sd_range(n)
    return Paragraph(
        f"The noise is estimated from the same seeds: from {n} seeds the true standard "
        f"deviation lies between {low:.2f} and {high:.2f} times the estimate (95%), and the MDE "
        "and the seeds needed scale with it. They size the next sweep; they do not guarantee it.",
        "note",
    )


def _noise(c: Comparison, rows: dict[str, ArmRow], r: ArmRow) -> str:
    if c.n < MIN_SEEDS:
        return f"not estimated ({c.n} seed{'s' if c.n != 1 else ''})"
    if c.test == "paired t":
        return f"{fmt(c.sd)} (differences)"
    base = rows[r.baseline].final.sd if r.baseline in rows else math.nan
    return f"{fmt(r.final.sd)} (arm), {fmt(base)} (baseline)"


def _paired(c: Comparison) -> bool:
    return c.test == "paired t"


def _needed_cell(c: Comparison, effect: float, alpha: float) -> str:
    if not estimable(c, alpha):
        return "—"
    n = comparison_seeds(c, effect, alpha)
    return f"> {SEEDS_CAP}" if n is None else str(n)


def _table(compared: list[ArmRow], rows: list[ArmRow], effect: float, alpha: float) -> Table:
    by_arm = {r.arm: r for r in rows}
    cells = []
    for r in compared[:MAX_ROWS]:
        c = r.comparison
        assert c is not None
        cells.append(
            (
                r.arm,
                str(r.baseline),
                str(c.n),
                c.test,
                _noise(c, by_arm, r),
                fmt(comparison_mde(c, alpha)),
                _needed_cell(c, effect, alpha),
            )
        )
    columns = (
        "arm",
        "baseline",
        "seeds",
        "test",
        "seed noise (sd)",
        f"MDE ({_pct(POWER)} power)",
        f"seeds for |Δ| = {effect:g}",
    )
    caption = f"what each comparison could detect, at α = {_alpha(alpha)} (Holm's first step)"
    if len(compared) > MAX_ROWS:
        caption += f" (first {MAX_ROWS} of {len(compared)} comparisons)"
    return Table(columns, tuple(cells), caption)


def _sentence(r: ArmRow, effect: float, alpha: float) -> Paragraph:
    """One sentence a reader can act on."""
    c = r.comparison
    assert c is not None
    head = f"`{r.arm}` vs `{r.baseline}`: Δ {fmt_diff(c)}"
    if not estimable(c, alpha):
        seeds = f"{c.n} seed{'s' if c.n != 1 else ''}"
        return Paragraph(
            f"{head} from {seeds}: the seed noise cannot be estimated from fewer than "
            f"{MIN_SEEDS} seeds per arm, so this sweep cannot say what it could detect, nor how "
            f"many seeds an effect of {effect:g} would need; run at least {MIN_SEEDS} "
            f"(`--seeds {','.join(map(str, range(MIN_SEEDS)))}`)."
        )
    n = comparison_seeds(c, effect, alpha)
    if n is None:
        need = f"more than {SEEDS_CAP} seeds per arm would be needed to detect {effect:g}"
    elif n <= c.n:
        need = f"its {c.n} seeds already suffice to detect {effect:g}"
    else:
        need = f"about {n} seeds per arm would detect {effect:g}"
    return Paragraph(
        f"{head}; with {c.n} seeds this sweep could detect |Δ| ≥ {fmt(comparison_mde(c, alpha))}; {need}."
    )


def _noisy(rows: list[ArmRow]) -> list[Paragraph]:
    spreads = {r.arm: (r.final.sd, r.final.n) for r in rows}
    found = noisy_arms(spreads)
    return [
        Paragraph(
            f"`{arm}`'s seeds spread more than the other arms': sd {fmt(spreads[arm][0])} over "
            f"{spreads[arm][1]} seeds, {ratio:.1f}× the other arms' pooled sd (F test, p {_p(p)} "
            f"after Holm over the arms with at least {MIN_SEEDS} seeds). A noisy arm "
            "is itself a finding: a wiring whose outcome depends on the seed trains less "
            "reliably (at depth, often a sign of instability), and its comparisons can detect "
            "less.",
            "warning",
        )
        for arm, (ratio, p) in found.items()
    ]


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _each_seed(done: pd.DataFrame, rows: list[ArmRow]) -> Table:
    """Each arm's seeds with their final validation loss, in the results table's order."""
    final = Metric.FINAL_VAL_LOSS
    cells = []
    for r in rows[:MAX_ROWS]:
        g = done[done["arm"] == r.arm].sort_values("seed")
        pairs = [f"{int(s)}: {fmt(float(v))}" for s, v in zip(g["seed"], g[final], strict=True)]
        listed = ", ".join(pairs[:SHOWN_SEEDS])
        if len(pairs) > SHOWN_SEEDS:
            listed += f", … ({SHOWN_SEEDS} of {len(pairs)} shown)"
        spread = r.final.sd
        cells.append((r.arm, listed or "—", fmt(spread)))
    caption = "each finished seed's final validation loss (seed: loss), and the sd over seeds"
    if len(rows) > MAX_ROWS:
        caption += f" (first {MAX_ROWS} of {len(rows)} arms)"
    return Table(("arm", "final val loss by seed", "sd"), tuple(cells), caption)
