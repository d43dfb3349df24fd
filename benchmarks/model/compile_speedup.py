"""``torch.compile`` (``train.compile``) per residual type: eager vs compiled training-step time,
and whether the compiled model trains the same.

    .venv/bin/python -m benchmarks.model.compile_speedup [--quick] [--out DIR]

A step is forward + cross-entropy + backward + AdamW update on one fixed batch of random tokens
with every token its own target (as in ``benchmarks/variant_step_time.py``; the loss falls within
a few steps, so the check below covers the updates, not only the forward). Per variant, two models
from the same seed, one compiled with ``nn.Module.compile`` (what ``train.compile`` does), first
train ``check_steps`` steps each: their losses must agree within ``REL_TOL``, and these steps are
also the warm-up (the compiled model's first step is the compilation, reported apart; it is
tens of seconds cold and a few on a rerun, which reads Inductor's on-disk cache). Then rounds
alternate eager and compiled timings; the speed-up is the median over rounds of eager / compiled.

Why ``REL_TOL = 1e-4``: compiled kernels fuse and reorder float32 reductions (norms, softmax,
matmul epilogues), which changes results by a few ulp (float32 eps is 1.2e-7) per operation;
through 2 * n_layers sublayers, their backward and a few AdamW steps that grows to around 1e-6
relative. 1e-4 leaves two orders of margin for that while a real difference (a dropped term, a
wrong mask, a stale parameter) moves the loss by 1e-2 or more within five steps.

If compilation fails for a variant (no C compiler, an unsupported operation), the row carries the
error instead of timings.

Issue 47's goal at 32 layers, every wiring timed in one run, is ``compile_deep``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import cli, machine
from benchmarks.variant_step_time import time_once
from record.errors import first_line
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer
from trainers.training.module import lm_loss

NAME = "compile_speedup"
REL_TOL = 1e-4

FULL: dict[str, Any] = {
    "variants": ("standard", "attnres", "block_attnres", "hyper", "mhc", "layerscale"),
    "n_layers": 4,  # compile time grows with depth (dynamo unrolls the blocks): 8 took 6 min
    "d_model": 128,
    "n_heads": 4,
    "seq_len": 128,
    "batch": 8,
    "attnres_blocks": 8,
    "lr": 3e-3,
    "check_steps": 5,
    "rounds": 5,
    "steps": 2,  # per timing: rounds * steps = 10 timed steps per mode
}
QUICK: dict[str, Any] = FULL | {
    "variants": ("standard", "block_attnres"),
    "n_layers": 2,
    "d_model": 64,
    "attnres_blocks": 2,
    "rounds": 2,
    "steps": 1,
}


def make_step(cfg: ModelConfig, s: dict[str, Any], compiled: bool) -> Callable[[], float]:
    """One training step of a model seeded with 0 on a batch seeded with 0; returns the loss."""
    torch.manual_seed(0)
    model = DeepTransformer(cfg)
    if compiled:
        model.compile()  # in place, as train.compile does; compiles on the first call
    opt = torch.optim.AdamW(model.parameters(), lr=s["lr"])
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab_size, (s["batch"], cfg.seq_len), generator=gen)

    def step() -> float:
        loss = lm_loss(model(idx), idx)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def losses_agree(eager: list[float], compiled: list[float]) -> dict[str, Any]:
    diffs = [abs(a - b) for a, b in zip(eager, compiled, strict=True)]
    rel = max(d / abs(a) for d, a in zip(diffs, eager, strict=True))
    return {
        "eager_losses": eager,
        "compiled_losses": compiled,
        "max_abs_diff": max(diffs),
        "max_rel_diff": rel,
        "within_tol": rel <= REL_TOL,
    }


def compiled_check(
    cfg: ModelConfig, s: dict[str, Any], eager_losses: list[float]
) -> tuple[Callable[[], float], dict[str, Any]]:
    """The compiled step, and the row of its check: its first step's time (the compilation)
    and whether its first ``check_steps`` losses agree with the eager model's."""
    compiled = make_step(cfg, s, compiled=True)
    start = time.perf_counter()
    losses = [compiled()]
    first = time.perf_counter() - start
    losses += [compiled() for _ in range(s["check_steps"] - 1)]
    return compiled, {"first_compiled_step_s": first} | losses_agree(eager_losses, losses)


def measure(cfg: ModelConfig, s: dict[str, Any]) -> dict[str, Any]:
    """Loss check (doubling as warm-up), then interleaved timings of eager and compiled."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()  # no cache or recompile budget carried over from the last variant
    counters.clear()
    eager = make_step(cfg, s, compiled=False)
    eager_losses = [eager() for _ in range(s["check_steps"])]
    row: dict[str, Any] = {}
    try:
        compiled, checked = compiled_check(cfg, s, eager_losses)
        row |= checked
        pairs = []
        for i in range(s["rounds"]):
            if i % 2:  # alternate which goes first
                c, e = time_once(compiled, s["steps"]), time_once(eager, s["steps"])
            else:
                e, c = time_once(eager, s["steps"]), time_once(compiled, s["steps"])
            pairs.append((e, c))
    except Exception as err:  # report the failure for this variant, measure the others
        row["error"] = f"{type(err).__name__}: {first_line(err)}"
        row["eager_ms"] = 1000 * time_once(eager, s["rounds"] * s["steps"])
        return row
    row["eager_ms"] = 1000 * statistics.median(e for e, _ in pairs)
    row["compiled_ms"] = 1000 * statistics.median(c for _, c in pairs)
    row["speedup"] = statistics.median(e / c for e, c in pairs)
    row["graphs"] = counters["stats"]["unique_graphs"]
    row["graph_breaks"] = sum(counters["graph_break"].values())
    return row


def run(quick: bool = False) -> dict[str, Any]:
    s = QUICK if quick else FULL
    rows = {}
    for residual in s["variants"]:
        fields = {k: s[k] for k in ("n_layers", "d_model", "n_heads", "seq_len", "attnres_blocks")}
        rows[residual] = measure(ModelConfig(residual=residual, **fields), s)
    return {
        "name": NAME,
        "settings": s | {"variants": list(s["variants"]), "rel_tol": REL_TOL},
        "machine": machine(),
        "results": rows,
    }


GOAL = 0.95  # compiled never slower than eager by more than 5% (issue 47's CPU goal)


def bar(x: float, unit: float = 0.25) -> str:
    """A ratio as a bar of blocks, one per ``unit`` (1.00x: four), for reading a column at once."""
    return "█" * max(1, round(x / unit))


def markdown(result: dict[str, Any]) -> str:
    s, m = result["settings"], result["machine"]
    lines = [
        f"`torch.compile` vs eager training step: n_layers={s['n_layers']} "
        f"d_model={s['d_model']} seq_len={s['seq_len']} batch {s['batch']}, float32, "
        f"{m['threads']} threads, torch {m['torch']}, median of {s['rounds']} rounds; losses over "
        f"{s['check_steps']} steps from one seed must agree within rel {s['rel_tol']:.0e}. "
        f"Ratios are to standard's step in the same mode (medians of separate rounds); the goal "
        f"is compiled no slower than {1 / GOAL:.2f}x eager for every wiring.",
        "",
        "| residual | eager (ms) | compiled (ms) | speed-up | goal | eager vs standard | "
        "compiled vs standard | first compiled step (s) | graph breaks | loss max abs diff | "
        "losses agree |",
        "| --- " * 11 + "|",
    ]
    base = result["results"].get("standard", {})
    for residual, r in result["results"].items():
        if "error" in r:
            lines.append(
                f"| `{residual}` | {r['eager_ms']:.1f} | failed: {r['error']} |" + " |" * 8
            )
            continue
        eager = r["eager_ms"] / base["eager_ms"] if "eager_ms" in base else float("nan")
        comp = r["compiled_ms"] / base["compiled_ms"] if "compiled_ms" in base else float("nan")
        lines.append(
            f"| `{residual}` | {r['eager_ms']:.1f} | {r['compiled_ms']:.1f} | "
            f"{r['speedup']:.2f}x | {'met' if r['speedup'] >= GOAL else 'missed'} | "
            f"{eager:.2f}x {bar(eager)} | {comp:.2f}x {bar(comp)} | "
            f"{r['first_compiled_step_s']:.1f} | {r['graph_breaks']} | "
            f"{r['max_abs_diff']:.1e} | "
            f"{'yes' if r['within_tol'] else 'NO'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    cli(NAME, __doc__ or NAME, run, markdown)
