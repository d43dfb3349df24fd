"""The routing section (issue 27): per depth-mixing arm, how its sites' mixing weights behaved,
each statistic per token first and then averaged (``stats.routing``), with the alarm's
verdict. The worst site's top-1 mass and entropy over training come from the trials' recorded
summaries; the per-site values at the end from their last profile. An arm whose sites read
one source per token has a softmax that no longer mixes: its loss says nothing about depth
mixing, only about the one path it fell onto."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from record.schema import Metric
from reports.document import Paragraph, Section, Table
from reports.figures import collapsed_in_any_seed, deepest, measured_by_all, seed_mean
from reports.sections.cells import fmt
from reports.sweep import SweepData
from stats.routing import ALARM_PREFIX, COLLAPSED_SHARE, SATURATED
from trainers.config import TrainConfig

# The recorded summaries this section reads over training (reports.load.CURVE_METRICS).
TRACED = (Metric.ROUTING_TOP1_MAX, Metric.ROUTING_ENTROPY_MIN)
# At most this many steps of the worst site's top-1 mass are shown: the first, the last and
# evenly between (a trial records a profile at every validation).
STEPS_SHOWN = 4


def routing_section(data: SweepData) -> Section | None:
    done = deepest(data.view.comparable)
    if Metric.ROUTING_TOP1_MAX not in done:
        return None
    done = done[done[Metric.ROUTING_TOP1_MAX].notna()]
    if done.empty:
        return None
    trace = data.curves[data.curves["metric"].isin(TRACED)]
    steps = _shown_steps(trace[trace["run_id"].isin(list(done["run_id"]))])
    rows = [_arm_row(arm, g, trace, steps, data) for arm, g in done.groupby("arm", sort=False)]
    columns = (
        "arm",
        "seeds",
        *(f"top-1 max, step {s}" for s in steps),
        "top-1 max (end)",
        "entropy min (end)",
        "entropy mean (end)",
        "spread max (end)",
        "verdict",
    )
    blocks: list[Any] = [
        Paragraph(
            "Routing health of every depth-mixing arm (deepest setting, finished trials, mean "
            "over seeds). Per token: the top-1 mass (the largest weight), the normalized entropy "
            "(1 uniform, 0 one source) and the logit spread (largest minus smallest logit, a "
            "softmax only), then averaged over tokens; *max* and *min* are the worst site's. "
            "The alarm trips where a site has collapsed: on over "
            f"{COLLAPSED_SHARE:.0%} of its tokens the top-1 mass exceeds train.routing_alarm "
            f"(default {TrainConfig().routing_alarm:g}) while the runner-up sits more than "
            f"{SATURATED:g} nats below the top, so the one source that could take over gets "
            "too little weight, and gradient, to be read again; a site that only leans on "
            "one source, or has a stale source far down, is not counted. A trial recorded "
            "before that share was measured is judged by its token-averaged top-1 mass and "
            "logit spread. The verdict counts the seeds it tripped in."
        ),
        Table(columns, tuple(r for r, _ in rows), caption="Routing over training"),
    ]
    sites = [(arm, line) for _, (arm, line) in rows if line]
    if sites:
        blocks.append(
            Table(
                ("arm", "top-1 mass per site (end)", "entropy per site (end)"),
                tuple((arm, *line) for arm, line in sites),
                caption="Per site at the end of training, in sublayer order with the output "
                "site last (mean over seeds; '-' a site with one source)",
            )
        )
    ranked = [r for arm, g in done.groupby("arm", sort=False) if (r := _ranking(arm, g, data))]
    if ranked:
        blocks.append(
            Table(
                ("arm", "sites", "top source differs", "rank correlation", "largest importance"),
                tuple(ranked),
                caption="Depth weight against causal importance at the end of training (mean "
                "over seeds): at how many sites with two or more sources the most-weighted "
                "source is not the one whose removal costs the most loss, the mean Spearman "
                "correlation of the two rankings over sites with three or more sources, and the "
                "largest loss change (nats) with its site and source",
            )
        )
    return Section("Routing", tuple(blocks))


def _shown_steps(trace: pd.DataFrame) -> list[int]:
    """The recorded steps every arm's trials share, at most ``STEPS_SHOWN`` of them."""
    if trace.empty:
        return []
    per_run = trace[trace["metric"] == Metric.ROUTING_TOP1_MAX].groupby("run_id")["step"]
    common = sorted(set.intersection(*(set(s) for _, s in per_run)))
    if len(common) <= STEPS_SHOWN:
        return [int(s) for s in common]
    picks = np.linspace(0, len(common) - 1, STEPS_SHOWN).round().astype(int)
    return [int(common[i]) for i in picks]


def _arm_row(
    arm: str, g: pd.DataFrame, trace: pd.DataFrame, steps: list[int], data: SweepData
) -> tuple[tuple[str, ...], tuple[str, tuple[str, str] | None]]:
    ids = list(g["run_id"])
    top1 = trace[(trace["metric"] == Metric.ROUTING_TOP1_MAX) & trace["run_id"].isin(ids)]
    at = [top1[top1["step"] == s]["value"].mean() for s in steps]
    spread = g.get(Metric.ROUTING_SPREAD_MAX, pd.Series(dtype=float)).mean()
    row = (
        str(arm),
        str(len(g)),
        *(fmt(v, 3) for v in at),
        fmt(g[Metric.ROUTING_TOP1_MAX].mean(), 3),
        fmt(g[Metric.ROUTING_ENTROPY_MIN].mean(), 3),
        fmt(g[Metric.ROUTING_ENTROPY].mean(), 3),
        fmt(spread, 1),
        _verdict(g, data),
    )
    return row, (str(arm), _per_site(g, data))


def _verdict(g: pd.DataFrame, data: SweepData) -> str:
    """ "healthy" or "collapsed in k of n seeds", with the collapsed sites where the profiles
    say which."""
    tripped = sum(
        isinstance(r, str) and r.startswith(ALARM_PREFIX) for r in g.get("reason", pd.Series())
    )
    if not tripped:
        return "healthy"
    text = f"collapsed in {tripped} of {len(g)} seeds"
    if data.depth_weights and all(r in data.depth_weights for r in g["run_id"]):
        collapsed = collapsed_in_any_seed(
            g, data.depth_weights, data.routing_top1, data.routing_spread, data.routing_collapsed
        )
        sites = np.flatnonzero(collapsed)
        if len(sites):
            text += f" (sites {', '.join(map(str, sites))})"
    return text


def _per_site(g: pd.DataFrame, data: SweepData) -> tuple[str, str] | None:
    """Each site's top-1 mass and entropy at the end, mean over the arm's seeds."""
    ids = [r for r in g["run_id"] if r in data.routing_top1 and r in data.routing_entropy]
    if not ids:
        return None
    top1 = np.mean([data.routing_top1[r] for r in ids], axis=0)
    entropy = np.mean([data.routing_entropy[r] for r in ids], axis=0)
    top1[np.isnan(entropy)] = np.nan  # a site with one source: its top-1 mass is 1 by force
    return _line(top1), _line(entropy)


def _ranking(arm: str, g: pd.DataFrame, data: SweepData) -> tuple[str, ...] | None:
    """Where the seed-mean depth weights and the seed-mean causal importance rank an arm's
    sources differently; None unless every seed measured the importance."""
    runs = list(g["run_id"])
    if not measured_by_all(data.source_importance, runs):
        return None
    weight = seed_mean(data.depth_weights, runs)
    importance = seed_mean(data.source_importance, runs)
    sites = [j for j in range(len(weight)) if np.sum(~np.isnan(importance[j])) >= 2]
    if not sites:
        return None
    differs = [j for j in sites if _top(weight[j]) != _top(importance[j])]
    rhos = [_spearman(weight[j], importance[j]) for j in sites]
    rhos = [r for j, r in zip(sites, rhos, strict=True) if np.sum(~np.isnan(importance[j])) >= 3]
    site, source = np.unravel_index(np.nanargmax(importance), importance.shape)
    listed = f" (sites {', '.join(map(str, differs))})" if differs else ""
    return (
        str(arm),
        str(len(sites)),
        f"{len(differs)}{listed}",
        fmt(float(np.mean(rhos)), 2) if rhos else "—",
        f"{importance[site, source]:+.3f} (site {site}, source {source})",
    )


def _top(values: np.ndarray) -> int:
    return int(np.nanargmax(values))


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation over the sources both have (ties broken by order)."""
    both = ~np.isnan(a) & ~np.isnan(b)
    ra, rb = (np.argsort(np.argsort(v[both])).astype(float) for v in (a, b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(ra) > 2 else math.nan


def _line(values: np.ndarray) -> str:
    return " ".join("-" if math.isnan(v) else f"{v:.2f}" for v in values)
