"""Incremental decoding throughput of each residual type: greedy generation with the KV cache
(``trainers.decoding.generate``: the prompt once, then one position per token) against
recomputing a full forward over the whole sequence for every new token, and against
``standard``.

Per arm, a random-weight model generates ``tokens`` greedy tokens after a random prompt of
``prompt`` tokens, under ``torch.inference_mode()`` (bf16 autocast on CUDA); both ways are timed
in interleaved rounds after warm-up. Throughput is generated tokens / median time; "cache
speedup" is the median over rounds of the recomputing time divided by the cached time, "vs
standard" the arm's cached throughput over standard's in the same round. ``agree`` is the share
of generated tokens on which both ways chose the same token (they compute the same logits up to
rounding, so an argmax tie may rarely part them).

    .venv/bin/python -m benchmarks.decode [--quick] [--device cuda] [--out DIR]

Run it alone: a second torch process on 2 cores distorts every timing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import cli, config, free, interleaved, machine, md_table, ratio, sync
from trainers.decoding import generate
from trainers.model import DeepTransformer

NAME = "decode"
ARMS = ("standard", "attnres", "block_attnres", "hyper", "mhc", "denseformer")


def settings(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "dims": {"n_layers": 4, "d_model": 64, "n_heads": 4, "seq_len": 64},
            "batch": 1,
            "prompt": 16,
            "tokens": 16,
            "warmup": 1,
            "rounds": 3,
        }
    return {
        "dims": {"n_layers": 16, "d_model": 256, "n_heads": 4, "seq_len": 512},
        "batch": 1,
        "prompt": 256,
        "tokens": 64,
        "warmup": 1,
        "rounds": 5,
    }


def _greedy_recompute(model: DeepTransformer, idx: torch.Tensor, tokens: int) -> torch.Tensor:
    """The same greedy continuation without a cache: a full forward per new token."""
    for _ in range(tokens):
        nxt = model(idx)[:, -1].argmax(-1, keepdim=True)
        idx = torch.cat((idx, nxt), dim=1)
    return idx


def _closures(
    model: DeepTransformer, prompt: torch.Tensor, tokens: int, device: str
) -> tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]:
    cuda = device.startswith("cuda")

    def run(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
        def step() -> torch.Tensor:
            with torch.inference_mode(), torch.autocast("cuda", torch.bfloat16, enabled=cuda):
                out = fn()
            sync(device)
            return out

        return step

    cached = run(lambda: generate(model, prompt, tokens, temperature=0))
    recompute = run(lambda: _greedy_recompute(model, prompt, tokens))
    return cached, recompute


def measure(s: dict[str, Any], device: str) -> dict[str, Any]:
    steps, agree = {}, {}
    for arm in ARMS:
        model = DeepTransformer(config(arm, **s["dims"])).to(device).eval()
        prompt = torch.randint(0, model.cfg.vocab_size, (s["batch"], s["prompt"]), device=device)
        cached, recompute = _closures(model, prompt, s["tokens"], device)
        same = cached()[:, s["prompt"] :] == recompute()[:, s["prompt"] :]
        agree[arm] = same.float().mean().item()
        steps[f"{arm}/cached"], steps[f"{arm}/recompute"] = cached, recompute
    times = interleaved(steps, s["warmup"], s["rounds"])
    del steps
    free(device)
    generated = s["batch"] * s["tokens"]
    base = times["standard/cached"]
    return {
        arm: {
            "cached_ms": 1000 * statistics.median(times[f"{arm}/cached"]),
            "recompute_ms": 1000 * statistics.median(times[f"{arm}/recompute"]),
            "tokens_per_s": generated / statistics.median(times[f"{arm}/cached"]),
            "cache_speedup": ratio(times[f"{arm}/recompute"], times[f"{arm}/cached"]),
            "vs_standard": ratio(base, times[f"{arm}/cached"]),
            "agree": agree[arm],
        }
        for arm in ARMS
    }


def run(quick: bool = False, device: str = "cpu") -> dict:
    s = settings(quick)
    return {
        "name": NAME,
        "device": device,
        "settings": s,
        **machine(),
        "results": measure(s, device),
    }


def markdown(result: dict) -> str:
    s, res, d = result["settings"], result["results"], result["settings"]["dims"]
    lines = [
        f"Greedy generation of {s['tokens']} tokens after a {s['prompt']}-token prompt, "
        f"n_layers={d['n_layers']}, d_model={d['d_model']}, batch {s['batch']}, inference_mode, "
        f"{result['device']}, {result['threads']} threads: the KV cache against a full forward "
        "per token, and the cached throughput against `standard`'s.",
        "",
    ]
    header = ["arm", "cached tok/s", "cache speedup", "vs standard", "agree"]
    rows = [
        [
            f"`{arm}`",
            f"{r['tokens_per_s']:,.0f}",
            f"{r['cache_speedup']:.2f}x",
            f"{r['vs_standard']:.2f}x",
            f"{r['agree']:.0%}",
        ]
        for arm, r in res.items()
    ]
    return "\n".join(lines + md_table(header, rows))


def main() -> None:
    cli(NAME, __doc__ or NAME, run, markdown)


if __name__ == "__main__":
    main()
