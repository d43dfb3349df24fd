"""Inference cost of each residual type with the KV cache (``DeepTransformer.prefill`` /
``decode_step``), as ratios to ``standard`` measured in the same rounds.

Per arm, a random-weight model in eval and inference mode (bf16 autocast on CUDA):

- **decode**: greedy tokens per second after a prompt, at batch 1 and a larger batch and at two
  prompt lengths (the context the cache holds), timed as a whole generation less its prefill;
- **prefill**: prompt tokens per second at batch 1, the longer prompt;
- **KV bytes per token**: the cache's bytes per cached position (every layer's keys and values,
  the same for every wiring: depth mixing carries nothing across positions);
- **depth state per token**: what one position holds in flight across its sublayers while it is
  decoded: 1 stream for pre-norm, n for Hyper-Connections and mHC, every source for Full AttnRes
  (2L + 1), the embedding and the block summaries or the partial sum for Block AttnRes (N + 1),
  every block's output for DenseFormer (L + 1), in units of d_model values (``depth_state``);
- **peak memory** of a prefill at each prompt length, where Block AttnRes's N·T·d summaries
  should show: torch's allocated peak on CUDA; on a CPU, which keeps no such counter, the peak
  of the running sum of every allocation and free the profiler records (``profile_memory``).
  Either counts tensors only, above what was allocated before the prefill (the weights).

Every timing is interleaved over arms in rounds after warm-up (``benchmarks.common``), so machine
noise hits all alike; the median round gives each figure. ``--budget-s`` trims rounds (the GPU
check's budget).

    .venv/bin/python -m benchmarks.model.decode [--quick] [--device cuda] [--out DIR] [--budget-s S]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from benchmarks.common import (
    Deadline,
    cli,
    config,
    cpu_peak_bytes,
    existing_path,
    free,
    interleaved,
    machine,
    md_table,
    sync,
)
from trainers.model.decoding import generate
from trainers.model.transformer import DeepTransformer

NAME = "decode"
ARMS = ("standard", "attnres", "block_attnres", "hyper", "mhc", "denseformer")


def settings(quick: bool, device: str = "cpu") -> dict[str, Any]:
    if quick:
        return {
            "dims": {"n_layers": 4, "d_model": 64, "n_heads": 4, "seq_len": 64},
            "batches": [1, 4],
            "prompts": [16, 32],
            "tokens": 8,
            "warmup": 1,
            "rounds": 3,
        }
    if device.startswith("cuda"):
        return {
            "dims": {"n_layers": 32, "d_model": 1024, "n_heads": 8, "seq_len": 4096},
            "batches": [1, 16],
            "prompts": [512, 3072],
            "tokens": 64,
            "warmup": 2,
            "rounds": 5,
        }
    return {  # a few minutes on one CPU core
        "dims": {"n_layers": 8, "d_model": 128, "n_heads": 4, "seq_len": 512},
        "batches": [1, 4],
        "prompts": [64, 384],
        "tokens": 32,
        "warmup": 1,
        "rounds": 5,
    }


def depth_state(cfg: Any) -> int:
    """Values of width d one position holds across its sublayers while it is decoded."""
    residual, n_sub = cfg.residual, cfg.n_sublayers
    if residual == "attnres":
        return n_sub + 1
    if residual == "block_attnres":
        return cfg.attnres_blocks + 1  # the embedding and N summaries, or N - 1 and the partial
    if residual in ("hyper", "mhc", "mhc_lite"):
        return cfg.hc_streams
    if residual == "denseformer":
        return cfg.n_layers + 1
    return 1


def _timed(device: str, fn: Callable[[], object]) -> Callable[[], None]:
    cuda = device.startswith("cuda")

    def step() -> None:
        with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=cuda):
            fn()
        sync(device)

    return step


def _peak_prefill_mb(model: DeepTransformer, idx: torch.Tensor, device: str) -> float:
    if not device.startswith("cuda"):
        return cpu_peak_bytes(_timed(device, lambda: model.prefill(idx))) / 2**20
    free(device)
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    _timed(device, lambda: model.prefill(idx))()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def measure(s: dict[str, Any], device: str, deadline: Deadline | None = None) -> dict[str, Any]:
    steps: dict[str, Callable[[], None]] = {}
    static: dict[str, dict[str, Any]] = {}
    gen = torch.Generator().manual_seed(0)
    for arm in ARMS:
        model = existing_path(DeepTransformer(config(arm, **s["dims"])).to(device).eval())
        cfg = model.cfg
        elem = 2 if device.startswith("cuda") else 4  # bf16 autocast on a GPU
        static[arm] = {
            "kv_bytes_per_token": 2 * cfg.n_layers * cfg.d_model * elem,
            "depth_state_bytes": depth_state(cfg) * cfg.d_model * elem,
            "peak_prefill_mb": {},
        }
        for prompt in s["prompts"]:
            idx1 = torch.randint(0, cfg.vocab_size, (1, prompt), generator=gen).to(device)
            static[arm]["peak_prefill_mb"][str(prompt)] = _peak_prefill_mb(model, idx1, device)
            for batch in s["batches"]:
                idx = torch.randint(0, cfg.vocab_size, (batch, prompt), generator=gen).to(device)
                steps[f"{arm}|prefill|{batch}|{prompt}"] = _timed(
                    device, partial(model.prefill, idx)
                )
                steps[f"{arm}|generate|{batch}|{prompt}"] = _timed(
                    device, partial(generate, model, idx, s["tokens"], temperature=0)
                )
    times = interleaved(steps, s["warmup"], s["rounds"], deadline)
    del steps
    free(device)
    return {"rounds": min(len(t) for t in times.values()), **_figures(s, times, static)}


def _figures(
    s: dict[str, Any], times: dict[str, list[float]], static: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Each arm's rates and their ratios to standard's, round by round (the median ratio)."""

    def decode_s(arm: str, batch: int, prompt: int) -> list[float]:
        gen, pre = (
            times[f"{arm}|generate|{batch}|{prompt}"],
            times[f"{arm}|prefill|{batch}|{prompt}"],
        )
        return [max(g - p, 1e-9) for g, p in zip(gen, pre, strict=True)]

    out: dict[str, Any] = {}
    long = max(s["prompts"])
    for arm in ARMS:
        row: dict[str, Any] = dict(static[arm])
        for batch in s["batches"]:
            for prompt in s["prompts"]:
                mine, base = decode_s(arm, batch, prompt), decode_s("standard", batch, prompt)
                key = f"b{batch}_t{prompt}"
                row[f"decode_tok_s_{key}"] = batch * s["tokens"] / statistics.median(mine)
                row[f"decode_x_{key}"] = statistics.median(
                    a / b for a, b in zip(mine, base, strict=True)
                )
        # the prefill each decode cell times already: batch 1 (the smallest), the longer prompt
        key = f"prefill|{min(s['batches'])}|{long}"
        pre, base = times[f"{arm}|{key}"], times[f"standard|{key}"]
        row["prefill_tok_s"] = long / statistics.median(pre)
        row["prefill_x"] = statistics.median(a / b for a, b in zip(pre, base, strict=True))
        out[arm] = row
    return out


def run(quick: bool = False, device: str = "cpu", deadline: Deadline | None = None) -> dict:
    s = settings(quick, device)
    results = measure(s, device, deadline)
    rounds = results.pop("rounds")
    return {"name": NAME, "device": device, "settings": s, **machine(), "rounds_run": rounds,
            "results": results}  # fmt: skip


def _mb(x: float) -> str:
    if x != x:
        return "—"
    return f"{x:.1f}" if x < 100 else f"{x:,.0f}"  # a CPU's small model holds a few MB


def markdown(result: dict) -> str:
    s, res, d = result["settings"], result["results"], result["settings"]["dims"]
    b_lo, b_hi = min(s["batches"]), max(s["batches"])
    t_lo, t_hi = min(s["prompts"]), max(s["prompts"])
    lines = [
        f"Decoding with the KV cache: {s['tokens']} greedy tokens after a prompt of {t_lo} or "
        f"{t_hi} tokens, batch {b_lo} or {b_hi}, n_layers={d['n_layers']}, "
        f"d_model={d['d_model']}, context {d['seq_len']}, inference mode, {result['device']}, "
        f"{result['threads']} threads, median of {result['rounds_run']} interleaved rounds. "
        "Decode × is the time per decoded token over `standard`'s in the same round (1.02× is "
        "a 2% overhead); prefill × likewise for the longer prompt at batch 1. KV bytes per "
        "cached position; depth state: what one position holds across its sublayers while it "
        "is decoded; peak prefill memory: the tensors a batch-1 prefill holds at once.",
        "",
    ]
    header = [
        "arm",
        *(f"decode × b{b} T{t}" for b in (b_lo, b_hi) for t in (t_lo, t_hi)),
        f"decode tok/s b{b_lo} T{t_lo}",
        "prefill ×",
        "KV B/token",
        "depth state B",
        *(f"peak prefill MB T{t}" for t in (t_lo, t_hi)),
    ]
    rows = []
    for arm, r in res.items():
        rows.append(
            [
                f"`{arm}`",
                *(f"{r[f'decode_x_b{b}_t{t}']:.2f}×" for b in (b_lo, b_hi) for t in (t_lo, t_hi)),
                f"{r[f'decode_tok_s_b{b_lo}_t{t_lo}']:,.0f}",
                f"{r['prefill_x']:.2f}×",
                f"{r['kv_bytes_per_token']:,}",
                f"{r['depth_state_bytes']:,}",
                *(_mb(r["peak_prefill_mb"][str(t)]) for t in (t_lo, t_hi)),
            ]
        )
    if result["rounds_run"] < s["rounds"]:
        lines[-1:] = [f"Trimmed to the time budget: {result['rounds_run']} of {s['rounds']} "
                      "rounds.", ""]  # fmt: skip
    return "\n".join(lines + md_table(header, rows))


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
