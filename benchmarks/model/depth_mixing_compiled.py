"""Full AttnRes's depth mixing alone, on the path a compiled model traces (``StackedSources``):
every site of a 32-layer model (65 with the output site), forward and backward, with an
elementwise stand-in for the sublayers, so that the step is the mixing and nothing else. Phase
1's group size varies (the model's is ``full.GROUP_SIZE``); the eager buffered path, what an
uncompiled model runs, is timed beside them. Every closure is timed in rotated rounds and each
ratio is the median of the rounds' own ratios to the first group size's (the model's), compiled.

    .venv/bin/python -m benchmarks.model.depth_mixing_compiled [--quick] [--out DIR]

Not in ``make bench``: each compiled group size takes minutes to compile on 2 cores.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from benchmarks.common import cli, interleaved, machine, md_table, ratio
from trainers.residual.attnres.depth_attention import Schedule, Sources, StackedSources, mix
from trainers.residual.attnres.depth_buffer import BufferedSources
from trainers.residual.attnres.full import GROUP_SIZE

NAME = "depth_mixing_compiled"
SETTINGS: dict[str, Any] = {
    "n_sublayers": 64,
    "d_model": 256,
    "seq_len": 256,
    "groups": (GROUP_SIZE, 16),
    "warmup": 2,
    "rounds": 15,
}
QUICK = SETTINGS | {"n_sublayers": 4, "d_model": 32, "seq_len": 16, "groups": (2, 4), "rounds": 2}
EPS = 1e-6


def mixing(make: Callable[[Tensor], Sources], n: int) -> Callable[[Tensor, Tensor, Tensor], Tensor]:
    """The sites in order, each mixing the sources before it; ``tanh(x) * scale`` stands in for
    the sublayer, so that every source differs and the backward reaches every site."""

    def run(emb: Tensor, queries: Tensor, scale: Tensor) -> Tensor:
        state = make(queries)
        state.append(emb)
        for site in range(n):
            state.append(torch.tanh(mix(state, site)) * scale[site])
        return mix(state, n).square().mean()

    return run


def stacked(size: int, n_sites: int) -> Callable[[Tensor], Sources]:
    schedule = Schedule.every(size, n_sites)
    return lambda queries: StackedSources(EPS, queries, schedule)


def buffered(size: int, n_sites: int) -> Callable[[Tensor], Sources]:
    schedule = Schedule.every(size, n_sites)
    return lambda queries: BufferedSources(EPS, queries, schedule, n_sites)


def run(quick: bool = False) -> dict[str, Any]:
    s = QUICK if quick else SETTINGS
    n, d = s["n_sublayers"], s["d_model"]
    gen = torch.Generator().manual_seed(0)
    emb = torch.randn(1, s["seq_len"], d, generator=gen, requires_grad=True)
    queries = torch.randn(n + 1, d, generator=gen, requires_grad=True)
    scale = torch.randn(n, d, generator=gen) * 0.1
    fns = {"buffered, eager": mixing(buffered(s["groups"][0], n + 1), n)}
    for size in s["groups"]:
        # dynamic=False: one graph per group size, not one shape-generic graph for all
        fns[f"stacked, groups of {size}, compiled"] = torch.compile(
            mixing(stacked(size, n + 1), n), dynamic=False
        )

    def step(fn: Callable[[Tensor, Tensor, Tensor], Tensor]) -> Callable[[], float]:
        def once() -> float:
            loss = fn(emb, queries, scale)
            loss.backward()
            emb.grad = queries.grad = None
            return float(loss.detach())

        return once

    losses = {name: step(fn)() for name, fn in fns.items()}  # compiles each
    times = interleaved({k: step(f) for k, f in fns.items()}, s["warmup"], s["rounds"], rotate=True)
    base = times[f"stacked, groups of {s['groups'][0]}, compiled"]
    rows = {
        k: {
            "median_ms": 1000 * statistics.median(t),
            "vs_first_compiled": ratio(t, base),
            "loss": losses[k],
        }
        for k, t in times.items()
    }
    return {"name": NAME, "settings": s, "machine": machine(), "results": rows}


def markdown(result: dict[str, Any]) -> str:
    s, m = result["settings"], result["machine"]
    head = (
        f"Full AttnRes's depth mixing alone, forward and backward: {s['n_sublayers']} sublayers "
        f"(+ the output site), d_model={s['d_model']} seq_len={s['seq_len']} batch 1, float32, "
        f"{m['threads']} threads, torch {m['torch']}; ratios: the median of {s['rounds']} rounds' "
        f"own ratios to groups of {s['groups'][0]}, compiled."
    )
    rows = [
        [f"`{k}`", f"{r['median_ms']:.1f}", f"{r['vs_first_compiled']:.3f}x", f"{r['loss']:.7g}"]
        for k, r in result["results"].items()
    ]
    table = md_table(["path", "step (ms)", "vs the first compiled", "loss"], rows)
    return "\n".join([head, "", *table])


if __name__ == "__main__":
    cli(NAME, __doc__ or "", run, markdown)
