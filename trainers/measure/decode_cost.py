"""What decoding costs a trained model, measured cheaply at the end of every run (issue 28): greedy
decoding at batch 1 with the KV cache (``DeepTransformer.prefill`` / ``decode_step``) after a
prompt of half the context, a few dozen tokens, the median of a few rounds after one to warm up.

Depth mixing carries nothing across positions (``trainers.model.kv_cache``), so the state a decoded
token leaves behind is the attention layers' keys and values: ``kv_bytes_per_token`` is the same
for every wiring of one size, and what a wiring adds shows in the time per token (AttnRes's
sources are read at every site, mHC's streams mixed at every block). A loss-against-latency
search reads ``tokens_per_s`` (``pareto_decode``).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trainers.model.transformer import DeepTransformer

TOKENS = 32  # decoded tokens per round, at most; fewer where the context has no room
ROUNDS = 3  # timed rounds, after one untimed


@dataclass(frozen=True)
class DecodeCost:
    """Decoded tokens per second (batch 1, the median round), the prompt's prefill in tokens per
    second, and the KV cache's bytes per cached position (batch 1, the model's dtype)."""

    tokens_per_s: float
    prefill_tokens_per_s: float
    kv_bytes_per_token: float


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _round(model: DeepTransformer, idx: torch.Tensor, tokens: int) -> tuple[float, float, float]:
    """One prefill and ``tokens`` greedy decode steps: their seconds, and the cache's bytes per
    position."""
    start = time.perf_counter()
    logits, cache = model.prefill(idx)
    _sync(idx.device)
    prefilled = time.perf_counter()
    for _ in range(tokens):
        logits, cache = model.decode_step(logits[:, -1].argmax(-1, keepdim=True), cache)
    _sync(idx.device)
    done = time.perf_counter()
    per_position = sum(
        2 * layer.keys[..., 0, :].numel() * layer.keys.element_size()
        for layer in cache.layers
        if layer.keys is not None
    )
    return prefilled - start, done - prefilled, float(per_position)


def measure(model: DeepTransformer, bf16: bool = False) -> DecodeCost:
    """Decode cost of ``model`` on its own device, in eval mode and inference mode (the mode it
    was in is restored), under bf16 autocast on a GPU when ``bf16``."""
    cfg = model.cfg
    device = next(model.parameters()).device
    prompt = max(1, cfg.seq_len // 2)
    tokens = min(TOKENS, cfg.seq_len - prompt)
    gen = torch.Generator().manual_seed(0)
    idx = torch.randint(0, cfg.vocab_size, (1, prompt), generator=gen).to(device)
    autocast = torch.autocast(device.type, torch.bfloat16, enabled=bf16 and device.type == "cuda")
    training = model.training
    model.eval()
    try:
        with torch.inference_mode(), autocast:
            rounds = [_round(model, idx, tokens) for _ in range(ROUNDS + 1)][1:]
    finally:
        model.train(training)
    prefill = statistics.median(r[0] for r in rounds)
    decode = statistics.median(r[1] for r in rounds)
    return DecodeCost(
        tokens_per_s=tokens / decode if tokens and decode > 0 else math.nan,
        prefill_tokens_per_s=prompt / prefill if prefill > 0 else math.nan,
        kv_bytes_per_token=rounds[-1][2],
    )
