"""Training-step time of each arm (``benchmarks/arms.py``) relative to ``standard``, in one process.

A step is forward + cross-entropy + backward + AdamW update on random tokens. Variants are
timed in interleaved rounds (so machine noise hits all of them alike) after warm-up; the figure
is the median over rounds of each variant's step time divided by standard's in the same round.

    .venv/bin/python -m benchmarks.variant_step_time --n-layers 32 --d-model 128 [--arms a,b]
    .venv/bin/python -m benchmarks.variant_step_time --arms attnres,block_attnres --switches

``--switches`` adds the AttnRes design switches of the paper's Table 4 and Delta AttnRes
(``SWITCH_ARMS``). Raw keys, a window and sigmoid gates run on the buffered two-phase path like
the paper's design; the input-dependent query, scalar logits, heads and Delta AttnRes move AttnRes
onto the plain one (``trainers/residual/attnres/depth_mixing.py``; ``DepthMixer.buffered`` is the
rule), so their ratios are mostly the plain path's cost. The input-dependent query would break the
two-phase batching in any implementation (the paper's reason for not adopting it).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.arms import select
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer

SWITCH_ARMS: dict[str, dict[str, Any]] = {
    "attnres/key_norm=none": {"residual": "attnres", "attnres_key_norm": "none"},
    "attnres/gate=sigmoid": {"residual": "attnres", "attnres_gate": "sigmoid"},
    "attnres/query=input": {"residual": "attnres", "attnres_query": "input"},
    "attnres/query=scalar": {"residual": "attnres", "attnres_query": "scalar"},
    "attnres/window=8": {"residual": "attnres", "attnres_window": 8},
    "block_attnres/heads=16": {"residual": "block_attnres", "attnres_heads": 16},
    "block_attnres/key_norm=none": {"residual": "block_attnres", "attnres_key_norm": "none"},
    # Delta AttnRes's additive routing (model.attnres_sources): always the plain path
    "attnres/sources=deltas": {"residual": "attnres", "attnres_sources": "deltas"},
    "block_attnres/sources=deltas": {"residual": "block_attnres", "attnres_sources": "deltas"},
}


def step_fn(cfg: ModelConfig, batch: int) -> tuple[torch.nn.Module, object]:
    model = DeepTransformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len))

    def step() -> None:
        logits = model(idx)
        F.cross_entropy(logits.flatten(0, 1), idx.flatten()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return model, step


def time_once(step: object, steps: int) -> float:
    start = time.perf_counter()
    for _ in range(steps):
        step()  # type: ignore[operator]
    return (time.perf_counter() - start) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layers", type=int, default=32)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--n-heads", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--attnres-blocks", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3, help="steps per timing inside a round")
    ap.add_argument("--arms", default="all", help="'all' or comma-separated arm names")
    ap.add_argument(
        "--switches", action="store_true", help="also time AttnRes's Table 4 design switches"
    )
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    torch.manual_seed(0)
    steps = {}
    arms = {**select(args.arms), **(SWITCH_ARMS if args.switches else {})}
    for arm, fields in arms.items():
        cfg = ModelConfig(
            n_layers=args.n_layers,
            d_model=args.d_model,
            n_heads=args.n_heads,
            seq_len=args.seq_len,
            attnres_blocks=args.attnres_blocks,
            **fields,
        )
        steps[arm] = step_fn(cfg, args.batch)[1]
        time_once(steps[arm], 2)  # warm-up: allocator, kernels
    rounds: dict[str, list[float]] = {r: [] for r in steps}
    for _ in range(args.rounds):
        for arm, step in steps.items():
            rounds[arm].append(time_once(step, args.steps))
    base = rounds["standard"]
    rows = {
        r: {
            "step_ms": 1000 * statistics.median(t),
            "ratio_to_standard": statistics.median(a / b for a, b in zip(t, base, strict=True)),
        }
        for r, t in rounds.items()
    }
    meta = {
        "n_layers": args.n_layers,
        "d_model": args.d_model,
        "seq_len": args.seq_len,
        "batch": args.batch,
        "attnres_blocks": args.attnres_blocks,
        "rounds": args.rounds,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"variant_step_time_L{args.n_layers}_d{args.d_model}.json"
    (args.out / name).write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    print(
        f"n_layers={args.n_layers} d_model={args.d_model} seq_len={args.seq_len} "
        f"batch={args.batch} threads={meta['threads']} (median of {args.rounds} rounds)"
    )
    print("| arm | step (ms) | vs standard |\n| --- | --- | --- |")
    for r, row in rows.items():
        print(f"| `{r}` | {row['step_ms']:.1f} | {row['ratio_to_standard']:.2f}x |")


if __name__ == "__main__":
    main()
