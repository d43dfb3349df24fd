"""How training-step time grows with depth for ``standard``, ``attnres`` and ``block_attnres``.

Per depth, the three arms are built in one process and timed in interleaved rounds after warm-up
(``benchmarks.model.variant_cost.interleaved``); step time is the median over rounds. Per arm, the
exponent k of ``time ∝ n_layers^k`` is fitted by least squares on log-log over the deepest half of
the depths (the shallow points carry the fixed embedding/head cost). Expected: standard k ≈ 1
(linear); Full AttnRes mixes every earlier sublayer output at every site, a term that grows with
the square of depth, so its k drifts above 1 as depth grows; Block AttnRes mixes at most N block
summaries (fixed N=8) per site, so ≈ linear. Also: the per-layer cost ratio
``(t(deepest)/deepest) / (t(ref)/ref)`` and the mixing share ``(t_arm - t_standard) / t_standard``
per depth (median of per-round ratios, minus one).

    .venv/bin/python -m benchmarks.model.cost_growth [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from benchmarks.common import cli, config, free, interleaved, machine, md_table, ratio, train_step

NAME = "cost_growth"
ARMS = ("standard", "attnres", "block_attnres")
EXPECTED = {
    "standard": "k ≈ 1 (linear)",
    "attnres": "k > 1, growing with depth (quadratic mixing term)",
    "block_attnres": "k ≈ 1 (linear at fixed N)",
}


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "dims": {"d_model": 32, "n_heads": 4, "seq_len": 64},
            "batch": 1,
            "schedule": {2: (1, 3), 4: (1, 3), 8: (1, 3)},  # n_layers: (warm-up, rounds)
            "per_layer_ref": 2,
        }
    return {
        "dims": {"d_model": 128, "n_heads": 4, "seq_len": 128},
        "batch": 1,
        # About 3 minutes on 2 CPU cores.
        "schedule": {4: (2, 9), 8: (2, 9), 16: (2, 7), 32: (2, 7), 64: (1, 5), 128: (1, 3)},
        "per_layer_ref": 16,
    }


def fit_exponent(depths: list[int], times: list[float]) -> float:
    """Least-squares slope of log(time) against log(depth)."""
    xs, ys = [math.log(d) for d in depths], [math.log(t) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs
    )


def measure_depth(n_layers: int, s: dict[str, Any], warmup: int, rounds: int, device: str) -> dict:
    dims = {**s["dims"], "n_layers": n_layers}
    steps = {arm: train_step(config(arm, **dims), s["batch"], device) for arm in ARMS}
    times = interleaved(steps, warmup, rounds)
    del steps
    free(device)
    return {
        arm: {
            "step_ms": 1000 * statistics.median(t),
            "mixing_share": ratio(t, times["standard"]) - 1.0,
        }
        for arm, t in times.items()
    }


def summarize(per_depth: dict[int, dict], ref: int) -> dict[str, dict[str, Any]]:
    depths = sorted(per_depth)
    deep = depths[len(depths) // 2 :]  # the deepest half (the middle one too when odd)
    out = {}
    for arm in ARMS:
        ms = {d: per_depth[d][arm]["step_ms"] for d in depths}
        last = depths[-1]
        out[arm] = {
            "exponent": fit_exponent(deep, [ms[d] for d in deep]),
            "fit_depths": deep,
            "per_layer_ratio": (ms[last] / last) / (ms[ref] / ref),
            "expected": EXPECTED[arm],
        }
    return out


def run(quick: bool = False, device: str = "cpu") -> dict:
    s = settings(quick)
    per_depth = {
        n: measure_depth(n, s, warmup, rounds, device)
        for n, (warmup, rounds) in s["schedule"].items()
    }
    fits = summarize(per_depth, s["per_layer_ref"])
    s["schedule"] = {str(n): list(v) for n, v in s["schedule"].items()}
    results = {"per_depth": {str(n): r for n, r in per_depth.items()}, "fits": fits}
    return {"name": NAME, "device": device, "settings": s, **machine(), "results": results}


def markdown(result: dict) -> str:
    s, per_depth, fits = (
        result["settings"],
        result["results"]["per_depth"],
        result["results"]["fits"],
    )
    depths = list(per_depth)
    ref, last = s["per_layer_ref"], depths[-1]
    lines = [
        f"Step time against depth, d_model={s['dims']['d_model']}, seq_len={s['dims']['seq_len']}, "
        f"batch {s['batch']}, Block AttnRes N=8, {result['device']}, {result['threads']} threads; "
        f"k fitted (log-log least squares) over n_layers {', '.join(map(str, fits['standard']['fit_depths']))}. "
        f"Goal: standard and block_attnres ≈ linear (k ≈ 1); attnres's quadratic mixing shows as "
        f"k > 1 and a per-layer cost that grows with depth.",
        "",
    ]
    header = ["arm", *(f"L{d} ms (share)" for d in depths)]
    header += ["k", f"per-layer t(L{last})/t(L{ref})", "expected"]
    rows = []
    for arm in (*ARMS,):
        cells = [f"`{arm}`"]
        for d in depths:
            row = per_depth[d][arm]
            share = "" if arm == "standard" else f" ({100 * row['mixing_share']:+.0f}%)"
            cells.append(f"{row['step_ms']:.0f}{share}")
        fit = fits[arm]
        cells += [f"{fit['exponent']:.2f}", f"{fit['per_layer_ratio']:.2f}x", fit["expected"]]
        rows.append(cells)
    return "\n".join(lines + md_table(header, rows))


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
