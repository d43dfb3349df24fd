"""The coord check's table and everything read from it, torch-free: the module classes, the band
an update must stay within, each class's ratio and slope across sizes, the verdict, the Markdown
table, the CSV and the figure. ``trainers.measure.coordcheck`` measures (torch) and makes the table;
a report reads a recorded table with this module alone, so the verdict it states is the one the
check gives.

A table is one row per (size, step): ``size``, ``step``, each class's mean |activation| over the
seeds under its name and its mean |change since init| as ``<class>_delta``.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

Axis = Literal["width", "depth"]
# The sizes a check covers unless told (``nas coordcheck``'s defaults; a sweep's own check starts
# its depths from the smallest): widths as d_model, depths as n_layers.
WIDTHS = (32, 64, 128, 256)
DEPTHS = (2, 4, 8, 16, 32)
Kind = Literal["values", "deltas"]
# The module classes measured, in the table's order: the token embedding's output, every
# attention's logits (q·k times its scale, causal positions) and output and every MLP's output
# (before the residual multiplier; means over blocks), the stream the final norm reads (the last
# block's output), and the logits. The attention logits are what a missing 1/d_head shows in.
CLASSES = ("embedding", "attention_logits", "attention_out", "mlp_out", "stream", "logits")
# A class's update "stays flat" when it varies as size^s with s in this band over the sizes
# checked. Growth is what a wrong rule shows (sp across widths: s >= +0.75 for every class but
# the embedding; sp across depths, the stream: +0.9 to +1.0; muP without its 1/d_head, the
# attention logits: +0.3); muP's own updates shrink a little at CPU widths (s down to -0.21,
# its finite-width approach to the limit), a lazy (NTK-like) one as -0.5. Measured at the
# tests' and the command's defaults (docs/variants.md, tests/trainers/test_coordcheck.py).
FLAT = (-0.35, 0.2)

Table = Sequence[Mapping[str, float]]


def column(c: str, kind: Kind) -> str:
    """A class's column in the table: its activation, or its change since init."""
    return c if kind == "values" else f"{c}_delta"


def sizes_of(table: Table) -> list[int]:
    return sorted({int(r["size"]) for r in table})


def last_step(table: Table) -> int:
    return max(int(r["step"]) for r in table)


def at_step(table: Table, step: int, kind: Kind = "values") -> dict[str, dict[int, float]]:
    """Class -> size -> the table's value at one step (of the activations or their changes)."""
    rows = {int(r["size"]): r for r in table if int(r["step"]) == step}
    return {c: {s: float(rows[s][column(c, kind)]) for s in sorted(rows)} for c in CLASSES}


def ratios(table: Table, kind: Kind = "deltas") -> dict[str, float]:
    """Class -> its size at the largest size over its size at the smallest, at the last step:
    microsoft/mup's CoordCheckCase quantity (of the change since init by default)."""
    out = {}
    for c, by_size in at_step(table, last_step(table), kind).items():
        sizes = sorted(by_size)
        out[c] = by_size[sizes[-1]] / by_size[sizes[0]]
    return out


def slopes(table: Table, kind: Kind = "deltas") -> dict[str, float]:
    """Class -> the exponent s of size^s, from the ratio: log(ratio) / log(largest/smallest)."""
    sizes = sizes_of(table)
    span = math.log(sizes[-1] / sizes[0])
    return {c: math.log(r) / span for c, r in ratios(table, kind).items()}


def judged(axis: Axis) -> tuple[str, ...]:
    """The classes the verdict reads: every one across widths; across depths the embedding,
    the stream and the logits, since a sublayer's own output is meant to scale with depth under
    Depth-muP (its lr shrinks as m_L^-1/2) and only the stream it adds to must stay flat."""
    if axis == "width":
        return CLASSES
    return ("embedding", "stream", "logits")


def verdict(table: Table, axis: Axis, flat: tuple[float, float] = FLAT) -> tuple[bool, str]:
    """Whether every judged class's change since init, at the last step, stays flat (its
    slope within ``flat``), and one line naming those that do not."""
    s, (low, high) = slopes(table), flat
    band = f"{axis}^{low:+.2f} to {axis}^{high:+.2f}"
    bad = {c: s[c] for c in judged(axis) if not low <= s[c] <= high}
    if not bad:
        return True, f"pass: every module class's update stays within {band}"
    off = ", ".join(f"{c} ~ {axis}^{v:+.2f}" for c, v in bad.items())
    return False, f"fail: {off} (flat is {band})"


def markdown(table: Table, axis: Axis) -> str:
    """The last step's mean |change since init| per size, each class's ratio and slope, and
    the activations' ratio."""
    last = last_step(table)
    by_class = at_step(table, last, "deltas")
    lines = [
        f"Mean |change since init| after {last} steps (seeds' mean); ratio: largest {axis} "
        "over smallest; slope: the exponent of that ratio.",
        "",
        f"| {axis} | " + " | ".join(CLASSES) + " |",
        "| --- " * (len(CLASSES) + 1) + "|",
    ]
    for size in sizes_of(table):
        cells = " | ".join(f"{by_class[c][size]:.4g}" for c in CLASSES)
        lines.append(f"| {size} | {cells} |")
    r, s, a = ratios(table), slopes(table), ratios(table, "values")
    lines.append("| ratio | " + " | ".join(f"{r[c]:.3g}" for c in CLASSES) + " |")
    lines.append("| slope | " + " | ".join(f"{s[c]:+.2f}" for c in CLASSES) + " |")
    lines.append("| activation ratio | " + " | ".join(f"{a[c]:.3g}" for c in CLASSES) + " |")
    return "\n".join(lines)


def to_csv(table: Table) -> str:
    """The table as CSV (floats in their shortest exact form: ``from_csv`` reads it back
    exactly)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(table)
    return out.getvalue()


def from_csv(text: str) -> list[dict[str, float]]:
    """A table ``to_csv`` wrote. ValueError for one that lacks a column the check writes."""
    rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(io.StringIO(text))]
    wanted = {"size", "step", *CLASSES, *(column(c, "deltas") for c in CLASSES)}
    missing = sorted(wanted - set(rows[0])) if rows else ["every row"]
    if missing:
        raise ValueError(f"coord check table: missing {', '.join(missing)}")
    return rows


def draw(table: Table, axis: Axis, title: str) -> Any:
    """microsoft/mup's coord-check plot as a matplotlib ``Figure`` (no pyplot state): one
    panel per step of the mean |activation|, then the change since init at the last step;
    log-log, a line per class."""
    from matplotlib.figure import Figure

    steps = sorted({int(r["step"]) for r in table})
    panels = [(f"step {t}", at_step(table, t)) for t in steps]
    panels.append((f"change since init, step {steps[-1]}", at_step(table, steps[-1], "deltas")))
    fig = Figure(figsize=(2.8 * len(panels), 3), dpi=100)
    axes = fig.subplots(1, len(panels), squeeze=False)
    for ax, (name, data) in zip(axes[0], panels, strict=True):
        for c, by_size in data.items():
            ax.plot(list(by_size), list(by_size.values()), marker="o", label=c)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(name, fontsize=8)
        ax.set_xlabel(axis)
    axes[0][0].set_ylabel("mean |activation|")
    axes[0][0].legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
