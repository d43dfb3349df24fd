"""Issue 47's CPU goal: standard, Block and Full AttnRes at 32 layers, eager and compiled.

    .venv/bin/python -m benchmarks.model.compile_deep [--quick] [--out DIR]

Two phases, one per mode. Each builds every wiring's model (the compiled ones compile and check
their losses against the eager ones', as ``compile_speedup`` does), then times them in rounds,
every model once per round in a rotated order, so the ratios to standard compare steps taken
moments apart, not runs minutes apart whose machine drifted between them; each ratio is the
median over rounds of that round's own ratio. A phase's models are freed before the next phase
builds its own: a trial's process holds one model, and eager models held beside the compiled ones
slowed compiled Full AttnRes against compiled standard by about a tenth (docs/benchmarks.md).
Last, each wiring's speed-up from compiling: a fresh eager model and the compiled one timed in
turns, so that ratio too compares steps moments apart.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable
from typing import Any

from benchmarks.common import cli, interleaved, machine, ratio
from benchmarks.model.compile_speedup import FULL, GOAL, REL_TOL, compiled_check, make_step
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
    "steps": 1,  # one step per timing, as ``interleaved`` times
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


def speedup(eager: Callable[[], float], compiled: Callable[[], float], s: dict[str, Any]) -> float:
    """Eager over compiled, the median over rounds that time the two in turns (a fresh eager
    model beside the compiled one: only this pair's ratio is read from these rounds)."""
    times = interleaved(
        {"eager": eager, "compiled": compiled}, s["check_steps"], s["rounds"], rotate=True
    )
    return ratio(times["eager"], times["compiled"])


def run(quick: bool = False) -> dict[str, Any]:
    """The eager phase (whose first losses the compiled models are checked against), then the
    compiled phase."""
    s = QUICK if quick else SETTINGS
    fields = {k: s[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "attnres_blocks")}
    rows: dict[str, dict[str, Any]] = {r: {} for r in s["variants"]}
    checks: dict[str, list[float]] = {}
    times: dict[str, dict[str, list[float]]] = {}
    for mode in MODES:
        steps: dict[str, Callable[[], float]] = {}
        for residual in s["variants"]:
            cfg = ModelConfig(residual=residual, **fields)
            if mode == "eager":
                steps[residual] = make_step(cfg, s, compiled=False)
                checks[residual] = [steps[residual]() for _ in range(s["check_steps"])]
            else:
                steps[residual], checked = compiled_check(cfg, s, checks[residual])
                rows[residual] |= checked
        times[mode] = interleaved(steps, 0, s["rounds"], rotate=True)
        if mode == "eager":
            del steps  # the eager models go before the compiled ones are built
            gc.collect()
    for residual, compiled in steps.items():
        cfg = ModelConfig(residual=residual, **fields)
        rows[residual]["speedup"] = speedup(make_step(cfg, s, compiled=False), compiled, s)
    for residual, row in rows.items():
        for mode in MODES:
            own, base = times[mode][residual], times[mode]["standard"]
            row[f"{mode}_ms"] = 1000 * statistics.median(own)
            row[f"{mode}_vs_standard"] = ratio(own, base)
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
        f"Eager, then compiled training steps, each mode's models timed in turns: "
        f"n_layers={s['n_layers']} "
        f"d_model={s['d_model']} seq_len={s['seq_len']} batch {s['batch']} (Block AttnRes "
        f"N = {s['attnres_blocks']}), float32, {m['threads']} threads, torch {m['torch']}, "
        f"each ratio the median of {s['rounds']} rounds' own ratios (the speed-up's from rounds "
        "of each wiring's eager and compiled steps in turns). Goals: compiled over "
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
