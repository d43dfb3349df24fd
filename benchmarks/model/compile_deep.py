"""Issue 47's CPU goal: standard, Block and Full AttnRes at 32 layers, eager and compiled, timed
in one interleaved run.

    .venv/bin/python -m benchmarks.model.compile_deep [--quick] [--out DIR]

Every model is built and compiled first (its loss checked against eager's as in
``compile_speedup``), then each round times every (wiring, mode) once in a rotated order, so the
ratios to standard compare steps taken moments apart, not runs minutes apart whose machine
drifted between them. Each ratio is the median over rounds of that round's own ratio.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from benchmarks.common import cli, machine
from benchmarks.model.compile_speedup import (
    FULL,
    GOAL,
    REL_TOL,
    compiled_check,
    make_step,
    time_steps,
)
from trainers.config import ModelConfig

NAME = "compile_deep"
SETTINGS: dict[str, Any] = FULL | {
    "variants": ("standard", "block_attnres", "attnres"),
    "n_layers": 32,
    "d_model": 256,
    "seq_len": 256,
    "batch": 1,
    "check_steps": 3,
    "rounds": 7,
    "steps": 1,
}
QUICK: dict[str, Any] = SETTINGS | {
    "n_layers": 2,
    "d_model": 64,
    "seq_len": 64,
    "attnres_blocks": 2,
    "rounds": 2,
}
# Compiled step over compiled standard's, at SETTINGS' shape.
GOALS = {"block_attnres": 1.10, "attnres": 1.25}
MODES = ("eager", "compiled")


def run(quick: bool = False) -> dict[str, Any]:
    """Every wiring eager and compiled, the loss check (and compilation) first, then
    interleaved rounds."""
    s = QUICK if quick else SETTINGS
    fields = {k: s[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "attnres_blocks")}
    steps: dict[tuple[str, str], Callable[[], float]] = {}
    rows: dict[str, dict[str, Any]] = {}
    for residual in s["variants"]:
        cfg = ModelConfig(residual=residual, **fields)
        eager = make_step(cfg, s, compiled=False)
        eager_losses = [eager() for _ in range(s["check_steps"])]
        compiled, rows[residual] = compiled_check(cfg, s, eager_losses)
        steps |= {(residual, "eager"): eager, (residual, "compiled"): compiled}
    order = list(steps)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in order}
    for i in range(s["rounds"]):
        shift = i % len(order)
        for key in order[shift:] + order[:shift]:
            times[key].append(time_steps(steps[key], s["steps"]))
    for residual, row in rows.items():
        for mode in MODES:
            own, base = times[(residual, mode)], times[("standard", mode)]
            row[f"{mode}_ms"] = 1000 * statistics.median(own)
            row[f"{mode}_vs_standard"] = statistics.median(
                a / b for a, b in zip(own, base, strict=True)
            )
        pairs = zip(times[(residual, "eager")], times[(residual, "compiled")], strict=True)
        row["speedup"] = statistics.median(e / c for e, c in pairs)
    return {
        "name": NAME,
        "settings": s | {"variants": list(s["variants"]), "rel_tol": REL_TOL},
        "machine": machine(),
        "results": rows,
    }


def verdict(ratio: float, goal: float | None) -> str:
    """The goal's cell: empty without a goal, else met, or missed and by how much."""
    if goal is None:
        return ""
    return "met" if ratio <= goal else f"missed by {ratio - goal:.3f}x"


def markdown(result: dict[str, Any]) -> str:
    s, m = result["settings"], result["machine"]
    lines = [
        f"Eager and compiled training steps in one interleaved run: n_layers={s['n_layers']} "
        f"d_model={s['d_model']} seq_len={s['seq_len']} batch {s['batch']} (Block AttnRes "
        f"N = {s['attnres_blocks']}), float32, {m['threads']} threads, torch {m['torch']}, "
        f"median of {s['rounds']} rounds of each round's own ratio. Goals: compiled over "
        "compiled standard "
        + ", ".join(f"`{k}` <= {v:.2f}x" for k, v in GOALS.items())
        + f"; compiled no slower than {1 / GOAL:.2f}x eager.",
        "",
        "| residual | eager (ms) | compiled (ms) | speed-up | eager vs standard | "
        "compiled vs standard | goal | first compiled step (s) | losses agree (rel.) |",
        "| --- " * 9 + "|",
    ]
    for residual, r in result["results"].items():
        lines.append(
            f"| `{residual}` | {r['eager_ms']:.0f} | {r['compiled_ms']:.0f} | "
            f"{r['speedup']:.2f}x | {r['eager_vs_standard']:.2f}x | "
            f"{r['compiled_vs_standard']:.3f}x | "
            f"{verdict(r['compiled_vs_standard'], GOALS.get(residual))} | "
            f"{r['first_compiled_step_s']:.0f} | "
            f"{r['max_rel_diff']:.1e}{'' if r['within_tol'] else ' NO'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    cli(NAME, __doc__ or NAME, run, markdown)
