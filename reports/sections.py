"""The report's sections, each a pure function from a ``SweepData`` to a ``Section``. They say
what the runs show, with their uncertainty, and say so plainly where the data cannot answer
(one seed, no baseline, a published effect that does not appear)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from reports import figures
from reports.ablation import (
    ArmRow,
    arm_rows,
    axis_effect,
    finished,
    varied_axes,
    wiring_label,
    with_arms,
)
from reports.compute import compute_advantage, fit_power_law, training_flops
from reports.document import Figure, Paragraph, Section, Table
from reports.load import SweepData
from reports.published import (
    COMPUTE_MULTIPLIER,
    TABLE2,
    TABLE2_COLUMNS,
    TABLE4_BASELINE,
    published_for,
)
from reports.stats import Interval, mean_ci

MAX_AXIS_ROWS = 30


def fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}f}" if math.isfinite(x) else "—"


def fmt_ci(i: Interval, digits: int = 4) -> str:
    if i.n == 0:
        return "—"
    if not math.isfinite(i.half_width):
        return fmt(i.mean, digits)
    return f"{fmt(i.mean, digits)} ± {fmt(i.half_width, digits)}"


def _counts(data: SweepData) -> dict[str, int]:
    t = data.trials
    if t.empty:
        return {"finished": 0, "infeasible": 0, "failed": 0, "unfinished": 0}
    done = finished(t)
    infeasible = int((t["infeasible"] != "").sum())
    failed = int(((t["status"] == "FAILED") & (t["infeasible"] == "")).sum())
    return {
        "finished": len(done),
        "infeasible": infeasible,
        "failed": failed,
        "unfinished": len(t) - len(done) - infeasible - failed,
    }


# ---------------------------------------------------------------- provenance


def provenance(data: SweepData) -> Section:
    p, t, skipped = data.parents, data.trials, data.skipped
    counts = _counts(data)
    versions = p["versions"].iloc[-1] if len(p) else {}
    commits = sorted(set(t["git_commit"])) if not t.empty else []
    hardware = sorted(set(t["hardware"]) - {""}) if not t.empty else []
    running = bool(len(p)) and p["status"].iloc[-1] == "RUNNING"
    rows = [
        ("sweep", data.name),
        ("space", str(p["space"].iloc[-1]) if len(p) else "?"),
        ("command", str(p["command"].iloc[-1]) if len(p) else "?"),
        ("invocations", str(len(p))),
        ("first start", _when(p["start"].min()) if len(p) else "?"),
        ("last end", "still running" if running else _when(p["end"].max())),
        ("git commit", ", ".join(c[:12] for c in commits) or "unknown"),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items()) or "not recorded"),
        ("hardware", "; ".join(hardware) or "not recorded"),
        ("MLflow store", data.uri),
        ("trials", ", ".join(f"{n} {k}" for k, n in counts.items()) + f", {len(skipped)} skipped"),
    ]
    blocks: list[Any] = [Table(("", "value"), tuple(rows))]
    if running:
        blocks.append(
            Paragraph(
                "This sweep is still running, or its last invocation was interrupted: the "
                f"report covers the {counts['finished']} trials finished so far.",
                "warning",
            )
        )
    reasons = _reasons(data, skipped)
    if reasons:
        blocks.append(Table(("trial", "outcome", "reason"), tuple(reasons), "not in the tables"))
    return Section("Provenance", tuple(blocks))


def _when(ts: Any) -> str:
    return "?" if pd.isna(ts) else pd.Timestamp(ts).strftime("%Y-%m-%d %H:%M UTC")


def _reasons(data: SweepData, skipped: Sequence[dict[str, str]]) -> list[tuple[str, str, str]]:
    out = [(s.get("arm", "?"), "skipped", s.get("reason", "")) for s in skipped]
    t = data.trials
    if t.empty:
        return out
    for _, row in t[t["infeasible"] != ""].iterrows():
        out.append((str(row["key"]), "infeasible", str(row["infeasible"])))
    for _, row in t[(t["status"] == "FAILED") & (t["infeasible"] == "")].iterrows():
        out.append((f"{row['arm']} seed {row['seed']}", "failed", "see the run's logs"))
    return out


# ---------------------------------------------------------------- main table


def main_table(data: SweepData, baseline: str | None) -> tuple[Section, list[ArmRow]]:
    rows = arm_rows(data.trials, baseline)
    if not rows:
        return Section("Results", (Paragraph("No trial has finished yet.", "warning"),)), rows
    cells, highlight = [], []
    for i, r in enumerate(rows):
        c = r.comparison
        if r.baseline == r.arm:
            highlight.append(i)
        cells.append(
            (
                r.arm + (" (baseline)" if r.baseline == r.arm else ""),
                fmt_ci(r.final),
                fmt_ci(r.best),
                fmt_ci(r.bpb),
                str(len(r.seeds)),
                f"{r.params:,.0f}" if math.isfinite(r.params) else "—",
                f"{r.tokens_per_s:,.0f}" if math.isfinite(r.tokens_per_s) else "—",
                f"{r.wall_s:.0f}" if math.isfinite(r.wall_s) else "—",
                _diff(c),
                c.test if c else "—",
                fmt(c.p_adjusted, 3) if c else "—",
                r.verdict,
            )
        )
    columns = (
        "arm",
        "final val loss",
        "best val loss",
        "val bits/byte",
        "seeds",
        "params",
        "tokens/s",
        "wall s",
        "Δ vs baseline [95% CI]",
        "test",
        "p (Holm)",
        "verdict",
    )
    notes = [
        Paragraph(
            "Mean ± half-width of the 95% Student-t interval over seeds. Δ is the arm's final "
            "validation loss minus its baseline's (negative is better); the baseline is the "
            "`standard`/`pre` arm with the same depth, width and other non-wiring settings "
            "unless `--baseline` names one. Tests are paired by seed where both arms ran the "
            "same seeds, Welch's otherwise; p-values are Holm-corrected over the table."
        )
    ]
    if max(len(r.seeds) for r in rows) < 2:
        notes.append(
            Paragraph(
                "Every arm ran a single seed: there are no confidence intervals and no tests, "
                "since both need at least two seeds per arm. Differences below the "
                "seed-to-seed spread of a comparable sweep mean nothing; rerun with "
                "`--seeds 0,1,2`.",
                "warning",
            )
        )
    if all(r.baseline is None for r in rows):
        notes.append(
            Paragraph(
                "No `standard`/`pre` arm in this sweep: no differences are computed (name one "
                "with `--baseline ARM`).",
                "note",
            )
        )
    table = Table(columns, tuple(cells), "arms sorted by final validation loss", tuple(highlight))
    return Section("Results", (table, *notes)), rows


def _diff(c: Any) -> str:
    if c is None:
        return "—"
    if not math.isfinite(c.low):
        return f"{c.diff:+.4f}"
    return f"{c.diff:+.4f} [{c.low:+.4f}, {c.high:+.4f}]"


# ---------------------------------------------------------------- one-axis effects


def axis_effects(data: SweepData) -> Section | None:
    done = finished(data.trials)
    if done.empty:
        return None
    axes = varied_axes(done)
    if not axes:
        return None
    blocks: list[Any] = [
        Paragraph(
            "Mean final validation loss over seeds for each value of one axis (columns), the "
            "other axes held at each of their combinations (rows). Rows that order the columns "
            "differently are an interaction the main table's averages would hide."
        )
    ]
    for axis in axes:
        table = axis_effect(done, axis)
        index_names = [str(n) for n in table.index.names if n is not None]
        columns = (" / ".join(index_names), *[str(c) for c in table.columns])
        rows = []
        for key, values in list(table.iterrows())[:MAX_AXIS_ROWS]:
            label = " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)
            rows.append((label, *[fmt(float(v)) for v in values]))
        caption = f"effect of {axis}"
        if len(table) > MAX_AXIS_ROWS:
            caption += f" (first {MAX_AXIS_ROWS} of {len(table)} rows)"
        blocks.append(Table(columns, tuple(rows), caption))
    return Section("One-axis effects", tuple(blocks))


# ---------------------------------------------------------------- figures


def figure_section(data: SweepData) -> Section | None:
    blocks: list[Any] = []
    curves = figures.loss_curves(data.trials, data.curves)
    if curves:
        blocks.append(Figure("loss_curves", curves, "Validation loss per arm over training."))
    depth = figures.depth_scaling(data.trials)
    if depth:
        blocks.append(Figure("depth_scaling", depth, "Final validation loss against depth."))
    profile = figures.dilution_profiles(data.trials, data.profiles)
    if profile:
        blocks.append(
            Figure(
                "dilution_profiles",
                profile,
                "Per-layer profiles at the end of training, deepest setting: block output "
                "norm, stream norm entering each block, parameter-gradient norm per block.",
            )
        )
    for i, (arm, png) in enumerate(figures.depth_weight_heatmaps(data.trials, data.depth_weights)):
        blocks.append(
            Figure(
                f"depth_weights_{i}",
                png,
                f"{arm}: depth-attention weights (rows: blocks' sites, columns: sources; "
                "mean over tokens and seeds).",
            )
        )
    return Section("Figures", tuple(blocks)) if blocks else None


# ---------------------------------------------------------------- searches


def search_section(data: SweepData) -> Section | None:
    space = data.space or {}
    if space.get("kind") != "search":
        return None
    done = with_arms(finished(data.trials))
    if done.empty:
        return Section("Search", (Paragraph("No trial has finished yet.", "warning"),))
    objectives = space.get("objectives") or [{"metric": "val/loss", "mode": "min"}]
    keys = [_objective_column(o["metric"]) for o in objectives]
    first = done.sort_values(keys[0], ascending=objectives[0].get("mode", "min") == "min")
    axes = [k for k in varied_axes(done)]
    rows = tuple(
        (str(r["arm"]), *[fmt(float(r[k])) for k in keys]) for _, r in first.head(10).iterrows()
    )
    blocks: list[Any] = [Table(("trial", *[o["metric"] for o in objectives]), rows, "best trials")]
    importance = _importance(done, axes, keys[0], objectives[0].get("mode", "min"))
    if importance:
        blocks.append(
            Table(
                ("parameter", "importance"),
                tuple((k, fmt(v, 3)) for k, v in importance),
                "PED-ANOVA importance for the first objective (Optuna)",
            )
        )
    if len(keys) == 2:
        from search_spaces.pareto import pareto_front

        points = done[keys].to_numpy(float).tolist()
        front = pareto_front(points, [o.get("mode", "min") for o in objectives])
        png = figures.pareto(done.reset_index(drop=True), keys, front, keys)
        if png:
            blocks.append(Figure("pareto", png, "Trials and the Pareto front."))
        blocks.append(
            Table(
                ("trial", *keys),
                tuple(
                    (str(done.iloc[i]["arm"]), *[fmt(points[i][j]) for j in range(2)])
                    for i in front
                ),
                "Pareto front",
            )
        )
    return Section("Search", tuple(blocks))


def _objective_column(metric: str) -> str:
    return {"val/loss": "final/val_loss", "params": "final/params"}.get(metric, metric)


def _importance(
    done: pd.DataFrame, axes: list[str], key: str, mode: str
) -> list[tuple[str, float]]:
    """Optuna's PED-ANOVA over the finished trials (needs a handful of them to say anything)."""
    if len(done) < 4 or not axes:
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize" if mode == "min" else "maximize")
    dists = {k: _distribution(done[k]) for k in axes}
    for _, row in done.iterrows():
        params = {
            k: row[k]
            if not isinstance(d, optuna.distributions.CategoricalDistribution)
            else str(row[k])
            for k, d in dists.items()
        }
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=dists, value=float(row[key]))
        )
    try:
        evaluator = optuna.importance.PedAnovaImportanceEvaluator()
        found = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError):
        return []
    return sorted(found.items(), key=lambda kv: -kv[1])


def _distribution(values: pd.Series) -> Any:
    import optuna

    if pd.api.types.is_numeric_dtype(values) and values.nunique() > 2:
        low, high = float(values.min()), float(values.max())
        return optuna.distributions.FloatDistribution(low, high, log=low > 0 and high / low > 20)
    return optuna.distributions.CategoricalDistribution(sorted(values.astype(str).unique()))


# ---------------------------------------------------------------- compute advantage


def _flops(row: pd.Series) -> float:
    d, vocab = int(row["model.d_model"]), int(row["model.vocab_size"])
    embedding = vocab * d * (1 if row.get("model.tie_embeddings", True) else 2)
    if row.get("model.pos") == "learned":
        embedding += int(row["model.seq_len"]) * d
    tokens = int(row["train.max_steps"]) * int(row["train.batch_size"]) * int(row["model.seq_len"])
    return training_flops(
        int(row["final/params"]) - embedding,
        tokens,
        int(row["model.n_layers"]),
        d,
        int(row["model.seq_len"]),
    )


def compute_section(data: SweepData) -> Section | None:
    """Where the sweep spans model sizes: L = A * C^-alpha per wiring and the compute multiplier
    at which the baseline would match each variant (the paper's 1.25x, from these runs)."""
    done = finished(data.trials)
    if done.empty or done["final/params"].nunique() < 2:
        return None
    done = done.assign(flops=done.apply(_flops, axis=1), wiring=done.apply(wiring_label, axis=1))
    groups = {w: g for w, g in done.groupby("wiring") if g["flops"].nunique() >= 2}
    base = next((w for w in groups if w.startswith("standard/pre")), None)
    if base is None or len(groups) < 2:
        return None
    points: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    fits: dict[str, Callable[[Any], Any]] = {}
    rows = []
    for wiring, g in groups.items():
        c, loss = g["flops"].to_numpy(float), g["final/val_loss"].to_numpy(float)
        law = fit_power_law(c, loss)
        points[wiring], fits[wiring] = (c, loss), law.loss
        advantage = "—"
        if wiring != base:
            b = groups[base]
            adv = compute_advantage(b["flops"], b["final/val_loss"], c, loss)
            advantage = f"{adv.multiplier:.2f}× [{adv.low:.2f}, {adv.high:.2f}]"
        rows.append(
            (wiring, f"{law.a:.3g}", f"{law.alpha:.3f}", fmt(law.r2, 3), str(law.n), advantage)
        )
    blocks: list[Any] = [
        Table(
            ("wiring", "A", "alpha", "R²", "runs", "compute multiplier vs baseline [95% CI]"),
            tuple(rows),
            "loss = A · C^−alpha, C = training FLOPs (6·N·T plus attention)",
        ),
        Paragraph(
            "The multiplier is the factor of compute the baseline would need to reach the "
            "loss the variant reaches, at the geometric mean of the variant's compute, with a "
            f"bootstrap interval over runs. The paper reports {COMPUTE_MULTIPLIER}× for Block "
            "AttnRes at 5.6 PFLOP/s-days, a scale several orders of magnitude above these runs."
        ),
    ]
    png = figures.compute_fits(points, fits)
    if png:
        blocks.append(Figure("compute_fits", png, "Loss against training compute per wiring."))
    return Section("Compute advantage", tuple(blocks))


# ---------------------------------------------------------------- published reference


def reference_section(data: SweepData, rows: list[ArmRow]) -> Section:
    done = with_arms(finished(data.trials))
    residual_of = dict(
        zip(done["arm"], done.get("model.residual", pd.Series(dtype=str)), strict=False)
    )
    table_rows = []
    for r in rows:
        published = published_for(str(residual_of.get(r.arm, "")))
        if published is None:
            continue
        c = r.comparison
        table_rows.append(
            (
                r.arm,
                published.label,
                fmt(published.val_loss, 3),
                f"{published.val_loss - TABLE4_BASELINE:+.3f}",
                fmt_ci(r.final),
                _diff(c) if c else ("baseline" if r.baseline == r.arm else "—"),
                r.verdict,
            )
        )
    blocks: list[Any] = [
        Paragraph(
            "Published numbers from the AttnRes paper (Kimi Team 2026), Table 4: a 436M-"
            "parameter MoE model trained on 87.9B tokens. They are at a different scale from "
            "these runs; they are shown for orientation, not as a target these runs should hit.",
            "note",
        )
    ]
    if table_rows:
        blocks.append(
            Table(
                (
                    "arm",
                    "paper's arm",
                    "published loss",
                    "published Δ",
                    "this sweep",
                    "this sweep's Δ",
                    "verdict here",
                ),
                tuple(table_rows),
                "published (Table 4) beside this sweep",
            )
        )
    blocks.append(
        Table(
            TABLE2_COLUMNS,
            tuple(tuple(str(x) for x in row) for row in TABLE2),
            "published Table 2: final validation loss by model size",
        )
    )
    blocks.extend(_findings(data, rows, residual_of))
    return Section("Published reference and what these runs show", tuple(blocks))


def _findings(data: SweepData, rows: list[ArmRow], residual_of: dict) -> list[Paragraph]:
    """Plain statements of what the runs show about the paper's claims, from the numbers."""
    out = []
    for r in rows:
        if residual_of.get(r.arm) in ("attnres", "block_attnres") and r.comparison is not None:
            c = r.comparison
            verdict = r.verdict
            if verdict == "better":
                text = f"`{r.arm}` reaches a lower final validation loss than `{r.baseline}` ({_diff(c)}, {c.test}, Holm p = {fmt(c.p_adjusted, 3)}): the direction the paper reports."
            elif verdict == "worse":
                text = f"`{r.arm}` ends with a higher final validation loss than `{r.baseline}` ({_diff(c)}): the opposite of the paper's result, at this scale."
            elif verdict == "too few seeds":
                text = f"`{r.arm}` vs `{r.baseline}`: Δ = {c.diff:+.4f} from too few seeds to test; no conclusion."
            else:
                text = f"`{r.arm}` vs `{r.baseline}`: Δ = {_diff(c)}, not significant after correction; these runs neither confirm nor contradict the paper's gain."
            out.append(Paragraph(text))
    out.extend(_profile_findings(data))
    return out


def _profile_findings(data: SweepData) -> list[Paragraph]:
    """The paper's Fig. 5 shapes, checked against each residual type's dilution summaries at the
    deepest setting."""
    done = with_arms(figures.deepest(finished(data.trials)))
    if done.empty or "dilution/output_growth" not in done:
        return []
    by = done.groupby("model.residual")
    lines = []
    for residual, g in by:
        growth = mean_ci(g["dilution/output_growth"].dropna().tolist())
        stream = mean_ci(g.get("dilution/stream_growth", pd.Series(dtype=float)).dropna().tolist())
        front = mean_ci(g.get("dilution/grad_front_load", pd.Series(dtype=float)).dropna().tolist())
        lines.append((str(residual), growth, stream, front))
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
        _, growth, _, front = standard
        if growth.n and _upper(growth) <= 1:
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
        if front.n and _upper(front) <= 1:
            out.append(
                Paragraph(
                    "The paper reports front-loaded gradients for the baseline; here "
                    f"`standard`'s gradient front-load is {fmt_ci(front, 2)} (≤ 1: not "
                    "front-loaded).",
                    "warning",
                )
            )
    return out


def _upper(i: Interval) -> float:
    """The interval's upper end, or the value itself for a single trial."""
    return i.mean if not math.isfinite(i.half_width) else i.high
