"""The compute-advantage section: where the sweep spans model sizes, a power law of loss against
training compute per wiring, and the compute multiplier against the baseline wherever one is
defined (each fitted loss falls with compute, over enough distinct compute values); elsewhere
one sentence saying why there is none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from record.schema import Metric
from reports import figures
from reports.ablation import DEPTH_KEY, wiring_label
from reports.compute import MIN_DISTINCT_COMPUTE, Trend, compute_advantage, scaling_trend
from reports.document import Figure, Paragraph, Section, Table
from reports.flops import recorded_flops, trial_flops
from reports.outcomes import diverged
from reports.published import COMPUTE_MULTIPLIER
from reports.sections.cells import fmt
from reports.sweep import SweepData

LOSS = Metric.FINAL_VAL_LOSS
COLUMNS = (
    "wiring",
    "A",
    "alpha [95% CI]",
    "R²",
    "runs",
    "compute values",
    "compute multiplier vs baseline [95% CI]",
)


def compute_section(data: SweepData) -> Section | None:
    """Where the sweep spans model sizes: L = A * C^-alpha per wiring and, where defined, the
    compute multiplier at which the baseline would match each variant (the paper's 1.25x form,
    from these runs)."""
    groups = _groups(data.view.comparable)
    base = next((w for w in groups if w.startswith("standard/pre")), None)
    if base is None or len(groups) < 2:
        return None
    trends = {w: scaling_trend(g["flops"], g[LOSS]) for w, g in groups.items()}
    rows, missing = [], []
    for wiring, g in groups.items():
        multiplier = "—"
        if wiring != base and trends[base].falls and trends[wiring].falls:
            b = groups[base]
            adv = compute_advantage(b["flops"], b[LOSS], g["flops"], g[LOSS])
            multiplier = f"{adv.multiplier:.2f}× [{adv.low:.2f}, {adv.high:.2f}]"
        elif wiring != base:
            missing.append(wiring)
        rows.append(_row(wiring, trends[wiring], multiplier))
    caption = (
        "loss = A · C^−alpha, C = training FLOPs: matrix products forward and backward, the "
        "wiring's included (trainers/flops.py)"
    )
    blocks: list[Any] = [Table(COLUMNS, tuple(rows), caption)]
    blocks.append(_verdict(trends, base, missing, _confound(groups)))
    estimated = _estimated(groups)
    if estimated:
        blocks.append(Paragraph(estimated, "note"))
    lost = int(diverged(data.view.outcome).sum())
    if lost:
        blocks.append(
            Paragraph(
                f"The fits use finished trials only: {lost} diverged trials are not on the curves.",
                "note",
            )
        )
    image = figures.compute_fits(*_curves(groups, trends))
    if image:
        blocks.append(
            Figure(
                "compute_fits", image.png, "Loss against training compute per wiring.", image.pdf
            )
        )
    return Section("Compute advantage", tuple(blocks))


def _groups(done: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Finished trials per wiring, with their FLOPs, where a wiring spans two compute values
    (the least a power law can be fitted to)."""
    if done.empty or done[Metric.FINAL_PARAMS].nunique() < 2:
        return {}
    done = done.assign(
        flops=done.apply(trial_flops, axis=1),
        estimated=done.apply(lambda row: recorded_flops(row) is None, axis=1),
        wiring=done.apply(wiring_label, axis=1),
    )
    return {str(w): g for w, g in done.groupby("wiring") if g["flops"].nunique() >= 2}


def _estimated(groups: dict[str, pd.DataFrame], shown: int = 10) -> str:
    """Which fitted runs have no recorded FLOP count (recorded before ``final/train_flops``) and
    were placed by the earlier estimate instead; empty when none."""
    runs = pd.concat(groups.values())
    old = runs[runs["estimated"]]
    if old.empty:
        return ""
    names = [f"`{r.arm}` seed {r.seed}" for r in old.sort_values(["arm", "seed"]).itertuples()]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return (
        f"{len(old)} of the {len(runs)} fitted runs were recorded before their FLOPs were: "
        f"{', '.join(names[:shown])}{more}. Their compute is the earlier estimate (6 per "
        "non-embedding parameter per token plus attention), which leaves out the wiring's own "
        "products and a tied head's, so it falls short of the recorded count."
    )


def _row(wiring: str, t: Trend, multiplier: str) -> tuple[str, ...]:
    law = t.law
    alpha = f"{law.alpha:.3f} [{t.alpha_low:.3f}, {t.alpha_high:.3f}]"
    return (wiring, f"{law.a:.3g}", alpha, fmt(law.r2, 3), str(law.n), str(t.distinct), multiplier)


def _confound(groups: dict[str, pd.DataFrame]) -> str:
    """Why loss need not fall with compute in this sweep, where its design says: every model
    trained for the same number of steps, so a bigger one spent more compute without more
    training (empty otherwise)."""
    runs = pd.concat(groups.values())
    if runs["train.max_steps"].nunique() != 1:
        return ""
    size = "depth" if runs[DEPTH_KEY].nunique() > 1 else "model size"
    return (
        f"; every run trained for the same number of steps, so {size} is confounded with "
        "compute: a larger model spent more compute without training longer (FLOP budgets, "
        "train.target_flops as in the space compute_frontier, match it)"
    )


def _why_not(wiring: str, t: Trend) -> str:
    if t.distinct < MIN_DISTINCT_COMPUTE:
        return f"`{wiring}` spans {t.distinct} distinct compute values"
    interval = f"alpha {t.alpha_low:.3f} to {t.alpha_high:.3f}"
    if t.alpha_high < 0:
        return f"`{wiring}`'s loss rises with compute ({interval})"
    return f"`{wiring}`'s exponent interval includes zero ({interval})"


def _verdict(trends: dict[str, Trend], base: str, missing: list[str], confound: str) -> Paragraph:
    """What the multiplier column holds: how to read it, or in one sentence why it is empty."""
    if not missing:
        return Paragraph(
            "The multiplier is the factor of compute the baseline would need to reach the "
            "loss the variant reaches, at the geometric mean of the variant's compute, with a "
            f"bootstrap interval over runs. The paper reports {COMPUTE_MULTIPLIER}× for Block "
            "AttnRes at 5.6 PFLOP/s-days, a scale several orders of magnitude above these runs."
        )
    unfit = [w for w in (base, *missing) if not trends[w].falls]
    names = ", ".join(f"`{w}`" for w in missing)
    return Paragraph(
        f"No compute multiplier for {names}: a multiplier is defined only where each fitted "
        f"loss falls with compute over at least {MIN_DISTINCT_COMPUTE} distinct compute "
        f"values, and here {'; '.join(_why_not(w, trends[w]) for w in unfit)}{confound}.",
        "note",
    )


def _curves(
    groups: dict[str, pd.DataFrame], trends: dict[str, Trend]
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Callable[[Any], Any]]]:
    points = {w: (g["flops"].to_numpy(float), g[LOSS].to_numpy(float)) for w, g in groups.items()}
    return points, {w: t.law.loss for w, t in trends.items()}
