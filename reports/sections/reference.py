"""The published-reference section: the AttnRes paper's numbers beside this sweep's, and plain
statements of what these runs show about the paper's claims."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from record.schema import Metric
from reports import figures
from reports.ablation import RESIDUAL_KEY, ArmRow, by_seed
from reports.document import Paragraph, Section, Table
from reports.published import (
    TABLE2,
    TABLE2_COLUMNS,
    TABLE4_ATTNRES_BLOCKS,
    TABLE4_BASELINE,
    TABLE4_SUBLAYERS,
    Published,
    attnres_switches,
    paper_arm,
    published_for,
)
from reports.sections.cells import fmt, fmt_ci, fmt_diff, upper
from reports.sweep import SweepData
from stats.compare import Interval, adjust, compare, mean_ci, verdict

ATTNRES = ("attnres", "block_attnres")


def reference_section(data: SweepData, rows: list[ArmRow]) -> Section:
    done = data.view.configured
    residual_of = dict(zip(done["arm"], done.get(RESIDUAL_KEY, pd.Series(dtype=str)), strict=False))
    blocks: list[Any] = [
        Paragraph(
            "Published numbers from the AttnRes paper (Kimi Team 2026), Table 4: a 436M-"
            "parameter MoE model trained on 87.9B tokens. They are at a different scale from "
            "these runs; they are shown for orientation, not as a target these runs should hit.",
            "note",
        )
    ]
    firsts = done.drop_duplicates("arm").set_index("arm")
    published_of = {arm: published_for(row.to_dict()) for arm, row in firsts.iterrows()}
    named = {
        arm: paper_arm(p, firsts.loc[arm].to_dict())
        for arm, p in published_of.items()
        if p is not None
    }
    beside = _beside(rows, published_of, named)
    if beside:
        columns = (
            "arm",
            "paper's arm",
            "published loss",
            "published Δ",
            "this sweep",
            "this sweep's Δ",
            "verdict here",
        )
        blocks.append(Table(columns, tuple(beside), "published (Table 4) beside this sweep"))
    blocks.extend(_block_note(named, published_of))
    switched = _against_parent(data.view.comparable, firsts, published_of, named)
    if switched:
        blocks.append(
            Table(
                (
                    "arm",
                    "against",
                    "paper's arm",
                    "published Δ",
                    "this sweep's Δ [95% CI]",
                    "verdict here",
                    "agreement",
                ),
                tuple(switched),
                "Table 4 is an ablation of Full and Block AttnRes: each switched arm against its "
                "own unswitched AttnRes arm (paired by seed, Holm over this table; Δ = arm − "
                "parent). 'agrees': the same direction as the paper's Δ, significant after "
                "Holm's correction; 'opposite': significant the other way; 'unresolved': not "
                "significant (the seeds section says what this sweep could detect).",
            )
        )
    blocks.append(
        Table(
            TABLE2_COLUMNS,
            tuple(tuple(str(x) for x in row) for row in TABLE2),
            "published Table 2: final validation loss by model size",
        )
    )
    blocks.extend(_findings(rows, residual_of))
    blocks.extend(_profile_findings(data))
    return Section("Published reference and what these runs show", tuple(blocks))


def _block_note(
    named: dict[Any, str], published_of: dict[Any, Published | None]
) -> list[Paragraph]:
    """What N and S mean, where a Block AttnRes arm's N differs from the paper's."""
    if not any(named[arm] != p.label for arm, p in published_of.items() if p is not None):
        return []
    layers, s = TABLE4_SUBLAYERS // 2, TABLE4_SUBLAYERS // TABLE4_ATTNRES_BLOCKS
    return [
        Paragraph(
            "N counts AttnRes blocks (`model.attnres_blocks`), not Transformer blocks: the "
            "sublayers are split into N AttnRes blocks of S sublayers each. Table 4's Block rows "
            f"split the paper's {layers} layers ({TABLE4_SUBLAYERS} sublayers) into N = "
            f"{TABLE4_ATTNRES_BLOCKS} AttnRes blocks of S = {s}; its Fig. 6 finds S = 2, 4 and "
            "8 alike (about 1.746) and S = 16 and 32 nearer the baseline."
        )
    ]


def _beside(
    rows: list[ArmRow], published_of: dict[Any, Published | None], named: dict[Any, str]
) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for r in rows:
        published = published_of.get(r.arm)
        if published is None:
            continue
        out.append(
            (
                r.arm,
                named[r.arm],
                fmt(published.val_loss, 3),
                f"{published.val_loss - TABLE4_BASELINE:+.3f}",
                fmt_ci(r.final),
                fmt_diff(r.comparison)
                if r.comparison
                else ("baseline" if r.baseline == r.arm else "—"),
                r.verdict,
            )
        )
    return out


def _against_parent(
    done: pd.DataFrame,
    firsts: pd.DataFrame,
    published_of: dict[Any, Published | None],
    named: dict[Any, str],
) -> list[tuple[str, ...]]:
    """Each arm of an AttnRes wiring that sets a design switch (``attnres_switches``) against
    the arm of the same residual that sets none: Table 4's own comparison."""
    parents = {
        firsts.loc[arm, RESIDUAL_KEY]: arm
        for arm in firsts.index
        if firsts.loc[arm].get(RESIDUAL_KEY) in ATTNRES and not attnres_switches(firsts.loc[arm])
    }
    pairs = []
    for arm in firsts.index:
        parent = parents.get(firsts.loc[arm].get(RESIDUAL_KEY))
        if parent is None or parent == arm:
            continue
        base, mine = (done[done["arm"] == a] for a in (parent, arm))
        if base.empty or mine.empty:
            continue
        final = Metric.FINAL_VAL_LOSS
        pairs.append((arm, parent, compare(by_seed(base, final), by_seed(mine, final))))
    adjusted = adjust([c for _, _, c in pairs])
    out: list[tuple[str, ...]] = []
    for (arm, parent, _), c in zip(pairs, adjusted, strict=True):
        published, parent_row = published_of.get(arm), published_of.get(parent)
        delta = (
            published.val_loss - parent_row.val_loss
            if published is not None and parent_row is not None
            else math.nan
        )
        here = verdict(c)
        out.append(
            (
                str(arm),
                str(parent),
                named[arm] if published else "—",
                f"{delta:+.3f}" if math.isfinite(delta) else "—",
                fmt_diff(c),
                here,
                _agreement(delta, here),
            )
        )
    return out


def _agreement(published: float, here: str) -> str:
    if not math.isfinite(published):
        return "—"
    if here not in ("better", "worse"):
        return "unresolved"
    return "agrees" if (here == "better") == (published < 0) else "opposite"


def _findings(rows: list[ArmRow], residual_of: dict[Any, Any]) -> list[Paragraph]:
    """Plain statements of what the runs show about the paper's claims, from the numbers."""
    out = []
    for r in rows:
        if residual_of.get(r.arm) not in ATTNRES or r.comparison is None:
            continue
        c, verdict = r.comparison, r.verdict
        if verdict == "better":
            text = f"`{r.arm}` reaches a lower final validation loss than `{r.baseline}` ({fmt_diff(c)}, {c.test}, Holm p = {fmt(c.p_adjusted, 3)}): the direction the paper reports."
        elif verdict == "worse":
            text = f"`{r.arm}` ends with a higher final validation loss than `{r.baseline}` ({fmt_diff(c)}): the opposite of the paper's result, at this scale."
        elif verdict == "too few seeds":
            text = f"`{r.arm}` vs `{r.baseline}`: Δ = {c.diff:+.4f} from too few seeds to test; no conclusion."
        else:
            text = f"`{r.arm}` vs `{r.baseline}`: Δ = {fmt_diff(c)}, not significant after correction; these runs neither confirm nor contradict the paper's gain."
        out.append(Paragraph(text))
    return out


DILUTION = {
    name: Metric.DILUTION_PREFIX + name
    for name in ("output_growth", "stream_growth", "grad_front_load")
}


def _summary(g: pd.DataFrame, name: str) -> Interval:
    """Mean and interval of one dilution summary over the trials ``g`` (empty where none)."""
    column = DILUTION[name]
    return mean_ci(g[column].dropna().tolist() if column in g else [])


def _profile_findings(data: SweepData) -> list[Paragraph]:
    """The paper's Fig. 5 shapes, checked against each residual type's dilution summaries at the
    deepest setting."""
    done = figures.deepest(data.view.comparable)
    if done.empty or DILUTION["output_growth"] not in done:
        return []
    lines = [
        (
            str(res),
            _summary(g, "output_growth"),
            _summary(g, "stream_growth"),
            _summary(g, "grad_front_load"),
        )
        for res, g in done.groupby(RESIDUAL_KEY)
    ]
    out = [
        Paragraph(
            "Per-layer shapes at the deepest setting (means over trials with 95% intervals): "
            + "; ".join(
                f"`{res}` output growth (last/first block) {fmt_ci(g, 2)}, stream growth "
                f"{fmt_ci(s, 2)}, gradient front-load (first/last third) {fmt_ci(f, 2)}"
                for res, g, s, f in lines
            )
            + "."
        )
    ]
    standard = next((x for x in lines if x[0] == "standard"), None)
    if standard is not None:
        out.extend(_standard_shape(standard[1], standard[3]))
    return out


def _standard_shape(growth: Interval, front: Interval) -> list[Paragraph]:
    out = []
    if growth.n and upper(growth) <= 1:
        out.append(
            Paragraph(
                "The paper's Fig. 5 shows the pre-norm baseline's block outputs growing "
                "with depth. In these runs `standard`'s last block output is not larger "
                f"than its first (ratio {fmt_ci(growth, 2)}): that shape does not appear at "
                "this scale and training length.",
                "warning",
            )
        )
    elif growth.n and growth.mean <= 1:
        out.append(
            Paragraph(
                f"`standard`'s output growth is {fmt_ci(growth, 2)}: on average its last "
                "block's output is smaller than its first, but the interval includes "
                "growth, so these runs cannot say whether the paper's Fig. 5 shape appears.",
                "note",
            )
        )
    if front.n and upper(front) <= 1:
        out.append(
            Paragraph(
                "The paper reports front-loaded gradients for the baseline; here "
                f"`standard`'s gradient front-load is {fmt_ci(front, 2)} (≤ 1: not "
                "front-loaded).",
                "warning",
            )
        )
    return out
