"""Forward-only (prefill) throughput of each residual type relative to ``standard``.

One forward pass over a batch of random tokens under ``torch.inference_mode()`` (bf16 autocast on
CUDA); per sequence length, every arm is built with ``seq_len`` set to that length and timed in
interleaved rounds after warm-up. Throughput is tokens / median pass time; the ratio is the median
over rounds of standard's pass time divided by the arm's in the same round (1.00x = as fast as
standard). The AttnRes paper reports under 2% inference latency overhead for Block AttnRes.

    .venv/bin/python -m benchmarks.model.inference [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.common import cli, config, forward_step, free, interleaved, machine, md_table, ratio

NAME = "inference"
ARMS = ("standard", "attnres", "block_attnres", "hyper", "mhc", "denseformer")
PAPER_BLOCK_OVERHEAD = 0.02  # Block AttnRes latency overhead reported by the paper: < 2%


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "dims": {"n_layers": 4, "d_model": 64, "n_heads": 4},
            "batch": 1,
            "schedule": {64: (1, 3), 128: (1, 3)},  # seq_len: (warm-up passes, rounds)
        }
    return {
        "dims": {"n_layers": 16, "d_model": 256, "n_heads": 4},
        "batch": 1,
        # About 1 minute on 2 CPU cores.
        "schedule": {512: (2, 7), 1024: (2, 7)},
    }


def measure_seq(seq_len: int, s: dict[str, Any], warmup: int, rounds: int, device: str) -> dict:
    dims = {**s["dims"], "seq_len": seq_len}
    steps = {arm: forward_step(config(arm, **dims), s["batch"], device) for arm in ARMS}
    times = interleaved(steps, warmup, rounds)
    del steps
    free(device)
    tokens = s["batch"] * seq_len
    return {
        arm: {
            "pass_ms": 1000 * statistics.median(t),
            "tokens_per_s": tokens / statistics.median(t),
            "throughput_ratio": ratio(times["standard"], t),
            "latency_overhead": ratio(t, times["standard"]) - 1.0,
        }
        for arm, t in times.items()
    }


def run(quick: bool = False, device: str = "cpu") -> dict:
    s = settings(quick)
    results = {
        str(n): measure_seq(n, s, warmup, rounds, device)
        for n, (warmup, rounds) in s["schedule"].items()
    }
    s["schedule"] = {str(n): list(v) for n, v in s["schedule"].items()}
    return {"name": NAME, "device": device, "settings": s, **machine(), "results": results}


def markdown(result: dict) -> str:
    s, res = result["settings"], result["results"]
    seqs = list(res)
    block = ", ".join(
        f"{100 * res[n]['block_attnres']['latency_overhead']:+.1f}% at seq {n}" for n in seqs
    )
    lines = [
        f"Prefill throughput vs `standard`, n_layers={s['dims']['n_layers']}, "
        f"d_model={s['dims']['d_model']}, batch {s['batch']}, inference_mode, {result['device']}, "
        f"{result['threads']} threads. Block AttnRes latency overhead here: {block}; "
        f"the paper reports < {PAPER_BLOCK_OVERHEAD:.0%}.",
        "",
    ]
    header = ["arm", *(f"seq {n}: tok/s (vs standard)" for n in seqs)]
    rows = [
        [f"`{arm}`"]
        + [
            f"{res[n][arm]['tokens_per_s']:,.0f} ({res[n][arm]['throughput_ratio']:.2f}x)"
            for n in seqs
        ]
        for arm in ARMS
    ]
    return "\n".join(lines + md_table(header, rows))


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
