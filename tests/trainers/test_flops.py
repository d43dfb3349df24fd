"""trainers/flops.py against ``torch.utils.flop_counter.FlopCounterMode`` on one real
forward and backward of every valid wiring.

The two count the same thing, 2mkn per (m x k) @ (k x n) product, forward and backward, and the
comparison is exact (integers), not within a tolerance. Where they differ it is by design, and
``counter_view`` converts the count into what the counter sees, each difference with its reason:

* attention's sequence term: the count is causal (half the T x T product, as papers count it);
  the kernel computes the full product, so the counter sees twice the count. The test runs SDPA
  through its math kernel: on a CPU the fused kernel (``_scaled_dot_product_flash_attention_for
  _cpu``) is not among the ops the counter counts, while the math kernel's batched products are.
  On a GPU the counter counts the fused kernels as the full product too;
* products with a weight *vector* (``aten.mv``): the counter counts only mm, bmm, addmm, baddbmm
  and the attention and convolution kernels, so the test adds mv (2mn, ``MV``), which DenseFormer's
  weighted sums and dynamic Hyper-Connections' read and write maps (``Norm(H) @ w``) run. Their
  backward is one mv (the vector's gradient) and one outer product (the matrix's: m x 1 times
  1 x n, 2mn by the same convention, an elementwise multiply the counter does not see): of the
  three passes the count holds, the counter sees two, and the unseen one is as large as the
  forward mv, half of the mv the counter saw;
* mHC's Sinkhorn: the code sums rows and columns by products with (n^2 x n^2) 0/1 matrices,
  which the counter counts; the count treats them as the reductions they are;
* AttnRes's window: the plain path stacks every source and masks the logits of those outside it;
  the count leaves them out.

AttnRes at the paper's design (and with raw keys or a window) runs its buffered two-phase path
(hand-written backward, logits of each source against every site, part of the backward in
elementwise kernels): the exact check runs the plain path, the same function (the stream's
``fast`` turned off), and a separate test bounds the buffered path's count.

The 3x of forward + backward is exact here: every product's operands need gradients (the
embedding is trained, so even the first block's input gets one; a tied head's backward computes
both the input's and the weight's), except mHC-lite's constant permutation matrices (2x, in the
count).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from tests.trainers.conftest import tiny
from trainers.config import ATTENTION_NAMES, RESIDUAL_NAMES, ModelConfig
from trainers.flops import (
    ATTENTION_FLOPS,
    WIRING_FLOPS,
    flops_per_token,
    train_flops,
    weighted_sum,
)
from trainers.model.transformer import DeepTransformer

# (n_layers, d_model, attnres_blocks): two depths and widths; the second partition is uneven.
POINTS = ((2, 16, 2), (3, 32, 4))
SEQ = 6


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Products this small gain nothing from threads, and on a busy machine their start-up and
    contention made each count 10 to 30 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _mv_flops(a_shape: tuple[int, int], b_shape: tuple[int], *_: object, **__: object) -> int:
    """(m x n) @ (n): 2mn, the counter's convention for its products; none where m or n is 1,
    a scaling or a dot product (DenseFormer's average over one source, and its backward): the
    count leaves elementwise work and reductions out."""
    m, n = a_shape
    return 0 if min(m, n) == 1 else 2 * m * n


MV = {torch.ops.aten.mv: _mv_flops}


def counted(cfg: ModelConfig, plain: bool = True) -> float:
    """FlopCounterMode's count per token of one forward and backward of one sequence of
    ``seq_len`` tokens, SDPA through its math kernel, mv counted too, each mv's backward outer
    product added (as large as its forward: half the mv seen); AttnRes on its plain path
    unless ``plain`` is False."""
    model = DeepTransformer(cfg)
    if plain and getattr(model.stream, "fast", False):
        model.stream.fast = False  # the same function through DepthMixer's formula
    idx = torch.randint(0, cfg.vocab_size, (1, cfg.seq_len))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False, custom_mapping=MV) as c:
        model(idx).sum().backward()
    mv = c.get_flop_counts()["Global"].get(torch.ops.aten.mv, 0)
    return (c.get_total_flops() + mv // 2) / cfg.seq_len


def _sinkhorn_products(cfg: ModelConfig) -> int:
    """mHC: per half-step one (n^2 x n^2) product forward and one backward, 2 per iteration."""
    if cfg.residual != "mhc":
        return 0
    per_half_step = 2 * 2 * cfg.hc_streams**4
    return cfg.n_sublayers * cfg.mhc_sinkhorn_iters * 2 * per_half_step


def _masked_sources(cfg: ModelConfig) -> int:
    """AttnRes's window: the sources outside it are computed and masked. (The conversion reads
    the count with and without the window, so the window's own count is checked by hand:
    ``test_a_window_counts_only_the_sources_it_keeps``.)"""
    if cfg.residual not in ("attnres", "block_attnres") or not cfg.attnres_window:
        return 0
    return WIRING_FLOPS[cfg.residual](dataclasses.replace(cfg, attnres_window=0)) - (
        WIRING_FLOPS[cfg.residual](cfg)
    )


def counter_view(cfg: ModelConfig) -> int:
    """The count converted into what the counter sees (the module docstring says why)."""
    f = flops_per_token(cfg)
    full_attention = f.total + f.attention
    return full_attention + _sinkhorn_products(cfg) + _masked_sources(cfg)


def point(n_layers: int, d: int, blocks: int, **overrides: object) -> ModelConfig:
    """The tiny model at a depth and width, sequences of SEQ tokens; ``overrides`` win."""
    fields = {"n_layers": n_layers, "d_model": d, "attnres_blocks": blocks, "seq_len": SEQ}
    return tiny(**{**fields, **overrides})


def test_flops_match_the_counter(wiring: dict[str, str]) -> None:
    """Every wiring cell (every residual and placement, each norm and norm scaling; none of
    these changes a product) at two depths and widths: the count, converted, is the counter's."""
    fast = {"mhc_sinkhorn_iters": 2} if wiring["residual"] == "mhc" else {}
    for n_layers, d, blocks in POINTS:
        cfg = point(n_layers, d, blocks, **wiring, **fast)
        assert counted(cfg) == counter_view(cfg), cfg


SWITCHES = {
    "hyper-dynamic": dict(residual="hyper", hc_dynamic=True),
    "hyper-n2": dict(residual="hyper", hc_streams=2),
    "mhc-n3": dict(residual="mhc", hc_streams=3, mhc_sinkhorn_iters=1),
    "mhc_lite-n3": dict(residual="mhc_lite", hc_streams=3),
    "attnres-heads": dict(residual="attnres", attnres_heads=4),
    "attnres-input": dict(residual="attnres", attnres_query="input", attnres_heads=2),
    "attnres-scalar": dict(residual="attnres", attnres_query="scalar", attnres_heads=2),
    "attnres-static_input": dict(residual="attnres", attnres_query="static_input", attnres_heads=2),
    "attnres-low_rank": dict(
        residual="attnres", attnres_query="low_rank", attnres_query_rank=4, attnres_heads=2
    ),
    "block-gated": dict(residual="block_attnres", attnres_query="gated"),
    "attnres-sigmoid-raw": dict(
        residual="attnres", attnres_gate="sigmoid", attnres_key_norm="none"
    ),
    "attnres-window": dict(residual="attnres", attnres_window=2),
    "block-input-window": dict(residual="block_attnres", attnres_query="input", attnres_window=1),
    "block-n1": dict(residual="block_attnres", attnres_blocks=1, attnres_heads=2),
    # Delta AttnRes's additive routing: sites 1..2L - 1, no output site, no partial source
    "attnres-deltas": dict(residual="attnres", attnres_sources="deltas"),
    "block-deltas": dict(residual="block_attnres", attnres_sources="deltas"),
    "block-deltas-n1": dict(residual="block_attnres", attnres_sources="deltas", attnres_blocks=1),
    "attnres-cumulative-input": dict(
        residual="attnres", attnres_sources="cumulative", attnres_query="input", attnres_heads=2
    ),
    "block-deltas-scalar-window": dict(
        residual="block_attnres", attnres_sources="deltas", attnres_query="scalar", attnres_window=1
    ),
    "denseformer-2x2": dict(residual="denseformer", dense_dilation=2, dense_period=2),
    "denseformer-3x1": dict(residual="denseformer", dense_dilation=3),
    "laurel_lr-r4": dict(residual="laurel_lr", laurel_rank=4),
    "value_residual": dict(attention="value_residual"),
    "value_residual_learned": dict(attention="value_residual_learned", residual="mudd"),
    "untied-learned": dict(tie_embeddings=False, pos="learned", bias=True, mlp_ratio=3.0),
}


@pytest.mark.parametrize("overrides", SWITCHES.values(), ids=SWITCHES.keys())
def test_switches_match_the_counter(overrides: dict[str, object]) -> None:
    """The fields that change a wiring's products (streams, dynamic maps, AttnRes switches,
    DenseFormer k x p, LAuReL's rank, the attention variant, an untied head, biases, learned
    positions) at four blocks: the count, converted, is the counter's."""
    cfg = point(4, 16, 4, **overrides)
    assert counted(cfg) == counter_view(cfg)


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_buffered_attnres_is_within_its_bounds(residual: str) -> None:
    """The buffered path at the paper's design computes each source's logit against every site
    (at most twice the pairs a softmax reads: Full reads (S + 1) / 2 sites per source on
    average) and runs part of its backward in elementwise kernels the counter does not see (at
    least the forward stays): its wiring share lies between 1/3 and 2 times the count's."""
    for n_layers, d, blocks in POINTS:
        cfg = point(n_layers, d, blocks, residual=residual)
        f = flops_per_token(cfg)
        seen = counted(cfg, plain=False) - (f.total - f.wiring + f.attention)
        assert f.wiring / 3 <= seen <= 2 * f.wiring, (seen, f.wiring)


def test_every_wiring_and_attention_has_a_count() -> None:
    """A new residual or attention variant cannot be added without its FLOPs."""
    assert set(WIRING_FLOPS) == set(RESIDUAL_NAMES)
    assert set(ATTENTION_FLOPS) == set(ATTENTION_NAMES)


def test_dense_and_head_are_six_per_weight() -> None:
    """Kaplan's 6N: the standard model's dense and head FLOPs are 6 per weight of its linear
    layers (biases, norms and the embedding gather aside)."""
    cfg = tiny(n_layers=3, d_model=32, tie_embeddings=False)
    model = DeepTransformer(cfg)
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    f = flops_per_token(cfg)
    assert (f.dense + f.head, f.wiring) == (6 * linear, 0)
    assert f.attention == 6 * cfg.n_layers * cfg.seq_len * cfg.d_model


def test_attnres_counts_its_formula() -> None:
    """Full AttnRes at the paper's design: sites j = 0..2L read j + 1 sources, each with a 2d
    logit and a 2d share of the weighted sum (none at the one-source site 0), times 3."""
    cfg = tiny(residual="attnres", n_layers=5, d_model=16)
    d, sites = 16, 2 * 5 + 1
    pairs = sites * (sites + 1) // 2
    assert WIRING_FLOPS["attnres"](cfg) == 3 * (2 * d * pairs + 2 * d * (pairs - 1))
    assert weighted_sum(1, d) == 0


def test_train_flops_is_per_token_times_tokens() -> None:
    """Tokens are steps x sequences per step x sequence length."""
    cfg = tiny(residual="mhc_lite", hc_streams=3)
    per_token = flops_per_token(cfg).total
    assert train_flops(cfg, steps=7, batch_size=5) == 7 * 5 * cfg.seq_len * per_token


def test_delta_attnres_counts_its_formula() -> None:
    """Full Delta AttnRes: sites j = 1..2L - 1 read j + 1 sources (the embedding and every
    earlier output), each with a 2d logit and a 2d share of the weighted sum, times 3; site 0
    and the output route nothing, and adding the routed sum to h is elementwise."""
    cfg = tiny(residual="attnres", n_layers=5, d_model=16, attnres_sources="deltas")
    d, sublayers = 16, 2 * 5
    pairs = sum(j + 1 for j in range(1, sublayers))
    assert WIRING_FLOPS["attnres"](cfg) == 3 * (2 * d * pairs + 2 * d * pairs)


def test_a_window_counts_only_the_sources_it_keeps() -> None:
    """The counter cannot see a window (the plain path computes every source and masks the
    logits outside it), so two worked cases by hand, d 16, one head, each source a 2 x 16 logit
    and, where a site reads more than one, a 2 x 16 share of the weighted sum, times 3. Full
    AttnRes at two blocks: sites 0..4 (the output last) over 1, 2, 3, 4, 5 sources; a window of
    2 keeps the embedding and the last two outputs: 1, 2, 3, 3, 3. Block AttnRes in two blocks
    of two sublayers: 1 (the embedding), 2 (and the partial sum), 2 (the embedding and block
    1), 3 (and the partial sum), 3 at the output; a window of 1 keeps two: 1, 2, 2, 2, 2."""
    full = tiny(residual="attnres", n_layers=2, d_model=16, attnres_window=2)
    assert WIRING_FLOPS["attnres"](full) == 3 * (32 + (64 + 64) + 3 * (96 + 96))
    block = tiny(residual="block_attnres", n_layers=2, d_model=16, attnres_window=1)
    assert WIRING_FLOPS["block_attnres"](block) == 3 * (32 + 4 * (64 + 64))
