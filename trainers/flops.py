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

from collections.abc import Callable
from dataclasses import dataclass

from trainers import catalogue
from trainers.catalogue import TRAIN, TRAIN_CONST, weighted_sum
from trainers.config import ModelConfig

__all__ = [
    "ATTENTION_FLOPS",
    "TRAIN",
    "TRAIN_CONST",
    "WIRING_FLOPS",
    "Flops",
    "flops_per_token",
    "train_flops",
    "weighted_sum",
]


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


def _nothing(cfg: ModelConfig) -> int:
    return 0


def train_flops(cfg: ModelConfig, steps: int, batch_size: int) -> int:
    """Training FLOPs of ``steps`` optimizer steps of ``batch_size`` sequences of ``seq_len``."""
    return flops_per_token(cfg).total * steps * batch_size * cfg.seq_len


# The per-wiring formulas are the catalogue entries' (trainers.catalogue), each beside the facts
# of its wiring; these tables are views of them.
WIRING_FLOPS: dict[str, Callable[[ModelConfig], int]] = {
    w.name: w.flops or _nothing for w in catalogue.WIRINGS
}
# ResFormer's value residual mixes two value tensors with scalar weights: elementwise.
ATTENTION_FLOPS: dict[str, Callable[[ModelConfig], int]] = {
    a.name: a.flops or _nothing for a in catalogue.ATTENTIONS
}
