"""The same short training run for each arm (``benchmarks/arms.py``) on the default corpus:
final validation loss, bits per byte, parameters and wall time, one seed unless told more.

    .venv/bin/python -m benchmarks.harness.short_training --n-layers 12 --steps 300 [--arms a,b]

One seed is a smoke-level comparison, not an ablation: differences below the seed-to-seed
spread (measure it with --seeds 0,1,2) mean nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from benchmarks.arms import select
from trainers.config_io import from_dict
from trainers.training.run import train


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=128)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--arms", default="all")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = ap.parse_args()
    rows = []
    for arm, fields in select(args.arms).items():
        for seed in (int(s) for s in args.seeds.split(",")):
            cfg = from_dict(
                {
                    "model": {"n_layers": args.n_layers, "d_model": args.d_model, **fields},
                    "train": {
                        "max_steps": args.steps,
                        "batch_size": args.batch,
                        "seed": seed,
                        "val_every": args.steps,
                        "warmup_steps": args.steps // 10,
                    },
                }
            )
            with tempfile.TemporaryDirectory() as tmp:
                result, _ = train(cfg, Path(tmp), progress=False)
            rows.append({"arm": arm, "seed": seed, **asdict(result)})
            print(
                f"{arm:<14} seed {seed}: val/loss {result.val_loss:.4f}  "
                f"({result.params:,} params, {result.wall_s:.0f} s)",
                flush=True,
            )
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"short_training_L{args.n_layers}_d{args.d_model}_s{args.steps}.json"
    (args.out / name).write_text(
        json.dumps({"args": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=2) + "\n"
    )
    print(
        "| arm | seed | val/loss | val/bpb | params | wall (s) |\n| --- | --- | --- | --- | --- | --- |"
    )
    for r in rows:
        print(
            f"| `{r['arm']}` | {r['seed']} | {r['val_loss']:.4f} | {r['val_bpb']:.4f} | "
            f"{r['params']:,} | {r['wall_s']:.0f} |"
        )


if __name__ == "__main__":
    main()
