"""Training FLOPs per token of a configuration (forward + backward), by part: the sublayers'
weight products, attention's sequence term, the head, and what the residual wiring adds.

The count is the model's **matrix products**, each (m x k) @ (k x n) counted as 2mkn FLOPs, the
convention of ``torch.utils.flop_counter.FlopCounterMode`` and of Kaplan et al. 2020. Norms,
softmaxes, activations, scalings and sums (elementwise work and reductions) and the embedding
gather are not counted. The backward pass of a product computes the gradient of each operand
that needs one, each as costly as the forward: a product counts 3x its forward when both
operands need gradients (every weight times activation here) and 2x when one is a constant.

Two conventions differ from what the counter sees on a real step, both by design:

* attention's sequence term is the *useful* count, half the T x T product under the causal mask
  (as papers and FlashAttention's benchmarks count it); the kernels, and the counter, compute
  the full product;
* a wiring is counted by its paper's equations, not by how the code computes them: AttnRes
  logits only for the (site, source) pairs a softmax reads, Sinkhorn's row and column sums as
  reductions (the code computes them as products with a 0/1 matrix), the window's masked sources
  not at all. ``tests/trainers/test_flops.py`` holds the count to the counter and says where and
  why the two differ.

Torch-free, like ``trainers.config``: the trial and the CLI import it cheaply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from trainers.config import ModelConfig

TRAIN = 3  # forward + backward of a product whose two operands both need gradients
TRAIN_CONST = 2  # ... whose other operand is a constant (the backward computes one gradient)


@dataclass(frozen=True, slots=True)
class Flops:
    """Training FLOPs per token (forward + backward), by part; ``total`` is their sum."""

    dense: int
    """The sublayers' weight products: the attention's q, k, v and output projections and the
    MLP's two, 3 x 2 (4d^2 + 2 d h) per block (h = ``mlp_hidden``)."""
    attention: int
    """QK^T and the weighted sum of values, causal: half the T x T product, 3 x 2 T d per block
    (T = ``seq_len``)."""
    head: int
    """The LM head, 3 x 2 d V (tied or not: the embedding side is a gather)."""
    wiring: int
    """What the residual wiring and the attention variant add (``WIRING_FLOPS``,
    ``ATTENTION_FLOPS``)."""

    @property
    def total(self) -> int:
        return self.dense + self.attention + self.head + self.wiring


def flops_per_token(cfg: ModelConfig) -> Flops:
    """Training FLOPs per token of ``cfg`` with sequences of ``seq_len`` tokens."""
    d, h, n_layers = cfg.d_model, cfg.mlp_hidden, cfg.n_layers
    return Flops(
        dense=TRAIN * n_layers * (2 * 4 * d * d + 2 * 2 * d * h),
        attention=TRAIN * n_layers * 2 * cfg.seq_len * d,
        head=TRAIN * 2 * d * cfg.vocab_size,
        wiring=WIRING_FLOPS[cfg.residual](cfg) + ATTENTION_FLOPS[cfg.attention](cfg),
    )


def train_flops(cfg: ModelConfig, steps: int, batch_size: int) -> int:
    """Training FLOPs of ``steps`` optimizer steps of ``batch_size`` sequences of ``seq_len``."""
    return flops_per_token(cfg).total * steps * batch_size * cfg.seq_len


# ---- the wirings ------------------------------------------------------------------------------
# Each: forward products per token, times TRAIN (or TRAIN_CONST). Scalar weights (ReZero's alpha,
# DeepNorm's alpha, LAuReL-RW's alpha and beta) and outer products (Hyper-Connections' B (x) f(h))
# are elementwise: no matrix product.


def _nothing(cfg: ModelConfig) -> int:
    return 0


def weighted_sum(sources: int, d: int) -> int:
    """Forward FLOPs of a weighted sum of ``sources`` vectors of width d, a product with inner
    dimension ``sources``; over one source it is a scaling, elementwise."""
    return 2 * sources * d if sources > 1 else 0


def _laurel_lr(cfg: ModelConfig) -> int:
    """x A B at each of the 2L sites: (d x r) then (r x d)."""
    return TRAIN * cfg.n_sublayers * 2 * 2 * cfg.d_model * cfg.laurel_rank


def _read_and_mix(cfg: ModelConfig) -> int:
    """Per site, the read and the stream mix: one (n + 1) x n map applied to the n x d streams."""
    n = cfg.hc_streams
    return 2 * (n + 1) * n * cfg.d_model


def _hyper(cfg: ModelConfig) -> int:
    """Hyper-Connections: the read and mix per site; dynamic, also Norm(H) (n x d) times W_m (d),
    W_r (d x n) and W_b (d)."""
    n, d = cfg.hc_streams, cfg.d_model
    dynamic = 2 * n * d * (n + 2) if cfg.hc_dynamic else 0
    return TRAIN * cfg.n_sublayers * (_read_and_mix(cfg) + dynamic)


def _mhc(cfg: ModelConfig) -> int:
    """mHC: the flattened stream (n d) times the three maps' columns (n + n + n^2), the read and
    mix; Sinkhorn's normalizations are reductions."""
    n, d = cfg.hc_streams, cfg.d_model
    maps = 2 * n * d * (2 * n + n * n)
    return TRAIN * cfg.n_sublayers * (maps + _read_and_mix(cfg))


def _mhc_lite(cfg: ModelConfig) -> int:
    """mHC-lite: mHC's products with n! mixing columns, and H_res = sum_k a_k P_k, the n! weights
    times the constant (n! x n^2) permutation matrices (2x: only the weights need a gradient)."""
    n, d = cfg.hc_streams, cfg.d_model
    perms = math.factorial(n)
    maps = 2 * n * d * (2 * n + perms)
    mix = TRAIN_CONST * 2 * perms * n * n
    return cfg.n_sublayers * (TRAIN * (maps + _read_and_mix(cfg)) + mix)


def _denseformer(cfg: ModelConfig) -> int:
    """DenseFormer: after each block i with p | i, the weighted sum of floor(i/k) + 1 outputs."""
    k, p = cfg.dense_dilation, cfg.dense_period
    return TRAIN * sum(weighted_sum(i // k + 1, cfg.d_model) for i in range(p, cfg.n_layers + 1, p))


def attnres_sources(cfg: ModelConfig) -> list[int]:
    """The sources each AttnRes site's softmax reads, in site order (the output site last): Full,
    the embedding and every earlier output; Block, the embedding, the completed blocks' summaries
    and the current block's partial sum; at most 1 + ``attnres_window`` of them."""
    counts: list[int] = []
    for block, size in enumerate(cfg.attnres_block_sizes):
        counts += [block + 1 + (k > 0) for k in range(size)]
    counts.append(len(cfg.attnres_block_sizes) + 1)  # the output site: every summary
    window = cfg.attnres_window
    return [min(s, window + 1) for s in counts] if window else counts


def _attnres(cfg: ModelConfig) -> int:
    """AttnRes, per site: each source's logit, H full-width queries against the d-wide key (none
    with scalar logits), and the weighted sum of the sources (H groups of d/H channels: 2d per
    source); with input-dependent queries, also the site's d x Hd query projection."""
    d, heads = cfg.d_model, cfg.attnres_heads
    sources = attnres_sources(cfg)
    logit = 0 if cfg.attnres_query == "scalar" else 2 * heads * d
    projection = 2 * d * heads * d if cfg.attnres_query == "input" else 0
    return TRAIN * sum(logit * s + weighted_sum(s, d) + projection for s in sources)


def _mudd(cfg: ModelConfig) -> int:
    """MUDDFormer, after block i (S = i + 2 sources, C streams, hidden C S e): the generator's
    two products, d x (C S e) and (C S e) x (C S), and the C weighted sums of S outputs."""
    d, total = cfg.d_model, 0
    for i in range(cfg.n_layers):
        last = i == cfg.n_layers - 1
        # mudd.STREAMS (q, k, v, r) and mudd.LAST_BLOCK_EXPAND; the test holds the two together
        streams, expand, sources = (1, 4, i + 2) if last else (4, 1, i + 2)
        weights = streams * sources
        hidden = weights * expand
        total += 2 * d * hidden + 2 * hidden * weights + streams * weighted_sum(sources, d)
    return TRAIN * total


WIRING_FLOPS: dict[str, Callable[[ModelConfig], int]] = {
    "standard": _nothing,
    "rezero": _nothing,
    "rezero_shared": _nothing,
    "deepnorm": _nothing,
    "attnres": _attnres,
    "block_attnres": _attnres,
    "hyper": _hyper,
    "mhc": _mhc,
    "mhc_lite": _mhc_lite,
    "denseformer": _denseformer,
    "laurel_rw": _nothing,
    "laurel_lr": _laurel_lr,
    "mudd": _mudd,
}
# ResFormer's value residual mixes two value tensors with scalar weights: elementwise.
ATTENTION_FLOPS: dict[str, Callable[[ModelConfig], int]] = {
    "standard": _nothing,
    "value_residual": _nothing,
    "value_residual_learned": _nothing,
}
