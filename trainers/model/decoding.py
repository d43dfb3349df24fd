"""Sampling a continuation from a trained ``DeepTransformer`` with its KV cache
(``DeepTransformer.prefill`` / ``decode_step``): the prompt once, then one position per token."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from trainers.model.transformer import DeepTransformer


def check_length(prompt: int, tokens: int, seq_len: int) -> None:
    """ValueError unless ``tokens`` >= 1 continue a ``prompt`` of >= 1 tokens within the
    context: the model reads the prompt and every sampled token but the last."""
    if prompt < 1:
        raise ValueError("the prompt is empty; give at least one token")
    if tokens < 1:
        raise ValueError(f"tokens: {tokens}; generate at least 1")
    if prompt > seq_len:
        raise ValueError(f"the prompt's {prompt} tokens exceed model.seq_len={seq_len}")
    if prompt + tokens - 1 > seq_len:
        raise ValueError(
            f"a prompt of {prompt} tokens and {tokens} new ones need {prompt + tokens - 1} "
            f"positions, more than model.seq_len={seq_len}; at most {seq_len - prompt + 1} "
            f"new tokens fit after this prompt"
        )


def sample(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One token (B, 1) per row of ``logits`` (B, vocab): the argmax at temperature 0, else a
    draw from softmax(logits / temperature) over the ``top_k`` largest (all when None)."""
    if temperature < 0:
        raise ValueError(f"temperature: {temperature}; it must be >= 0 (0: greedy)")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k: {top_k}; it must be >= 1")
    if temperature == 0:
        return logits.argmax(-1, keepdim=True)
    scaled = logits.double() / temperature  # float64: a low temperature does not overflow
    if top_k is not None and top_k < scaled.shape[-1]:
        kth = scaled.topk(top_k, dim=-1).values[..., -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(scaled.softmax(-1), 1, generator=generator)


@torch.no_grad()
def generate(
    model: DeepTransformer,
    idx: Tensor,
    tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """The prompt ``idx`` (B, T) followed by ``tokens`` sampled tokens, (B, T + tokens). The
    caller puts the model in eval mode (dropout would otherwise sample the network too)."""
    check_length(idx.shape[1], tokens, model.cfg.seq_len)
    logits, cache = model.prefill(idx)
    out = [idx]
    for i in range(tokens):
        nxt = sample(logits[:, -1], temperature, top_k, generator)
        out.append(nxt)
        if i + 1 < tokens:  # the last token is returned, never read
            logits, cache = model.decode_step(nxt, cache)
    return torch.cat(out, dim=1)
