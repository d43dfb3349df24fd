"""How the AttnRes overhead changes with width: training-step and prefill time of Block and Full
AttnRes relative to ``standard`` at several ``d_model``.

A depth-mixing site costs a fixed number of passes over (T, d) per token while a sublayer costs
O(d^2) per token, so the ratio should fall as the model widens. The paper's figures (negligible
training overhead, < 2% inference latency for Block AttnRes) come from widths far beyond what this
machine trains. Each width is timed in interleaved rounds in one process after warm-up; the ratio
is the median over rounds of the arm's time divided by standard's in the same round.

    .venv/bin/python -m benchmarks.model.width_scaling [--quick] [--device cuda] [--out DIR]

Not part of ``make bench`` (about 2.5 minutes on 2 CPU cores, which would push it past its budget).
Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.common import (
    cli,
    config,
    fmt_ratio,
    forward_step,
    free,
    interleaved,
    machine,
    md_table,
    ratio,
    train_step,
)

NAME = "width_scaling"
ARMS = ("standard", "block_attnres", "attnres")
KINDS = {"train": train_step, "prefill": forward_step}


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "n_layers": 2,
            "widths": [32, 64],
            "seq_len": {"train": 32, "prefill": 64},
            "rounds": {"train": (1, 3), "prefill": (1, 3)},
        }
    return {
        "n_layers": 16,
        "widths": [256, 512, 1024],
        "seq_len": {"train": 256, "prefill": 512},
        "rounds": {"train": (1, 5), "prefill": (1, 7)},  # (warm-up, rounds)
    }


def measure(kind: str, d_model: int, s: dict[str, Any], device: str) -> dict[str, Any]:
    dims = {
        "n_layers": s["n_layers"],
        "d_model": d_model,
        "n_heads": max(1, d_model // 64),
        "seq_len": s["seq_len"][kind],
    }
    steps = {arm: KINDS[kind](config(arm, **dims), 1, device) for arm in ARMS}
    warmup, rounds = s["rounds"][kind]
    times = interleaved(steps, warmup, rounds)
    del steps
    free(device)
    return {
        "standard_ms": 1000 * statistics.median(times["standard"]),
        **{arm: ratio(times[arm], times["standard"]) for arm in ARMS if arm != "standard"},
    }


def run(quick: bool = False, device: str = "cpu") -> dict:
    s = settings(quick)
    results = {kind: {str(d): measure(kind, d, s, device) for d in s["widths"]} for kind in KINDS}
    return {"name": NAME, "device": device, "settings": s, **machine(), "results": results}


def markdown(result: dict) -> str:
    s, res = result["settings"], result["results"]
    widths = [str(d) for d in s["widths"]]
    lines = [
        f"Time vs `standard` against width: n_layers={s['n_layers']}, batch 1, Block AttnRes "
        f"N=8; training step at seq {s['seq_len']['train']}, prefill (inference_mode) at seq "
        f"{s['seq_len']['prefill']}; {result['device']}, {result['threads']} threads.",
        "",
    ]
    rows = []
    for kind in KINDS:
        rows.append(
            [f"{kind}: `standard`"] + [f"{res[kind][d]['standard_ms']:.0f} ms" for d in widths]
        )
        for arm in ARMS[1:]:
            rows.append([f"{kind}: `{arm}`"] + [fmt_ratio(res[kind][d][arm]) for d in widths])
    return "\n".join(lines + md_table(["", *(f"d_model {d}" for d in widths)], rows))


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
