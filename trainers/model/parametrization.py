"""The parametrizations (``model.parametrization``): how width and depth scale the init, the
forward multipliers and each parameter group's AdamW settings, computed in this one place from
the config. Torch-free: the model reads the multipliers, ``trainers.training.module`` the group
rules, and the record and the tests read both.

m_w = d_model / base_width, m_L = n_layers / base_depth, alpha the depth exponent. The rules
(sources in ``docs/variants.md``; Dey et al. 2025, arXiv 2505.01618, Table 1 and eq. 40, and
their reference code, EleutherAI/nanoGPT-mup's ``completep`` branch):

==================  ==========================================  =========================
what                depth_mup / completep                       mup (width only)
==================  ==========================================  =========================
branch multiplier   m_L^-alpha                                  1
hidden init std     init_std / sqrt(m_w)                        the same
hidden-weight lr    lr · m_w^-1 · m_L^(alpha-1)                 lr · m_w^-1
hidden-weight wd    wd · m_w                                    wd
norm gains, biases  lr · m_L^(alpha-1), no wd                   lr, no wd
embedding, head,    lr, wd (embedding, head), no wd (norm)      the same
 final norm
AdamW eps           eps · m_w^-1 · m_L^-alpha (hidden);         eps · m_w^-1
                    eps · m_w^-1 (embedding, head, final norm)
output logits       · 1/m_w                                     the same
attention logits    · 1/d_head, relative to the base head       the same
==================  ==========================================  =========================

Every factor is 1 at base sizes, and there the model and its optimizer are bitwise the
standard parametrization's (tested). The GPT-2 scaled init of the output projections
(1/sqrt(2 n_layers)) is a depth rule of its own: the depth parametrizations take it at
base_depth, so that m_L^-alpha alone carries the depth scaling; mup keeps it as sp has it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trainers.config import ModelConfig

# AdamW's epsilon at base sizes: torch's default, which the standard parametrization uses.
ADAM_EPS = 1e-8

DEPTH_PARAMETRIZATIONS = ("depth_mup", "completep")

# The parameter groups a parametrization sets apart, in the optimizer's order.
EMBEDDING = "embedding"  # token (and learned position) embedding; the head, tied or not
HIDDEN_WEIGHT = "hidden_weight"  # every matrix of the attention and MLP sublayers
HIDDEN_NORM = "hidden_norm"  # the gains (and LayerNorm biases) of the blocks' norms
HIDDEN_BIAS = "hidden_bias"  # the sublayers' linear biases
OUTPUT_NORM = "output_norm"  # the final norm, before the head
# A wiring's own parameters (AttnRes queries, Hyper-Connection and mHC maps, DenseFormer
# weights): the matrices sp decays, and the rest (vectors, scalars, what it lists as
# no_weight_decay). No published rule covers them; they take the norm gains' (a choice of this
# project, which the coord check is run on before a catalogue entry allows a parametrization).
WIRING_WEIGHT = "wiring_weight"
WIRING_GAIN = "wiring_gain"
GROUPS = (
    EMBEDDING,
    HIDDEN_WEIGHT,
    HIDDEN_NORM,
    HIDDEN_BIAS,
    OUTPUT_NORM,
    WIRING_WEIGHT,
    WIRING_GAIN,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupRule:
    """One parameter group's AdamW settings, as multiples of ``train.lr``,
    ``train.weight_decay`` and ``ADAM_EPS`` (a weight decay of 0: the group is not decayed)."""

    lr: float
    weight_decay: float
    eps: float


def width_multiplier(cfg: ModelConfig) -> float:
    """m_w = d_model / base_width; 1 under sp."""
    return 1.0 if cfg.parametrization == "sp" else cfg.d_model / cfg.base_width


def depth_multiplier(cfg: ModelConfig) -> float:
    """m_L = n_layers / base_depth under the depth parametrizations; 1 otherwise."""
    if cfg.parametrization not in DEPTH_PARAMETRIZATIONS:
        return 1.0
    return cfg.n_layers / cfg.base_depth


def depth_exponent(cfg: ModelConfig) -> float:
    """alpha: 1/2 for Depth-muP (Yang et al. 2023, arXiv 2310.02244), ``depth_alpha`` for
    CompleteP; 0 where depth is not scaled (then every m_L factor is 1 anyway)."""
    return {"depth_mup": 0.5, "completep": cfg.depth_alpha}.get(cfg.parametrization, 0.0)


def branch_multiplier(cfg: ModelConfig) -> float:
    """m_L^-alpha on every residual branch's output."""
    return depth_multiplier(cfg) ** -depth_exponent(cfg)


def hidden_init_std(cfg: ModelConfig) -> float:
    """The init std of the sublayers' matrices: variance / m_w (muP's 1/fan_in at base)."""
    m_w = width_multiplier(cfg)
    return cfg.init_std if m_w == 1.0 else cfg.init_std / math.sqrt(m_w)


def output_init_std(cfg: ModelConfig) -> float:
    """The init std of the output projections under the GPT-2 scaled init: the hidden std over
    sqrt(2 n_layers), n_layers taken at base_depth where a depth rule scales the branches."""
    layers = cfg.base_depth if cfg.parametrization in DEPTH_PARAMETRIZATIONS else cfg.n_layers
    return hidden_init_std(cfg) / math.sqrt(2 * layers)


def logit_multiplier(cfg: ModelConfig) -> float:
    """1/m_w on the head's input (muP's output multiplier)."""
    return 1.0 / width_multiplier(cfg)


def attention_scale(cfg: ModelConfig) -> float | None:
    """The attention logits' scale: 1/d_head (muP), written sqrt(d_base)/d_head with d_base =
    base_width/n_heads so that it is sp's 1/sqrt(d_head) at the base head size; None where it
    is (the attention then keeps its default scale, bitwise)."""
    if cfg.parametrization == "sp":
        return None
    base_head = cfg.base_width / cfg.n_heads
    if base_head == cfg.head_dim:
        return None
    return math.sqrt(base_head) / cfg.head_dim


def group_rules(cfg: ModelConfig) -> dict[str, GroupRule]:
    """Each group's multipliers (``GROUPS``' order). Depth-muP and CompleteP: Dey et al.'s
    Table 1 and eq. 40; muP: the same with m_L = 1 and unscaled weight decay (nanoGPT-mup's
    muP groups)."""
    m_w, m_l, alpha = width_multiplier(cfg), depth_multiplier(cfg), depth_exponent(cfg)
    depth_lr = m_l ** (alpha - 1)
    hidden_eps = m_w**-1 * m_l**-alpha
    # CompleteP keeps lr x wd of the hidden weights fixed as their lr shrinks by m_w
    hidden_wd = m_w if cfg.parametrization in DEPTH_PARAMETRIZATIONS else 1.0
    return {
        EMBEDDING: GroupRule(lr=1.0, weight_decay=1.0, eps=m_w**-1),
        HIDDEN_WEIGHT: GroupRule(lr=m_w**-1 * depth_lr, weight_decay=hidden_wd, eps=hidden_eps),
        HIDDEN_NORM: GroupRule(lr=depth_lr, weight_decay=0.0, eps=hidden_eps),
        HIDDEN_BIAS: GroupRule(lr=depth_lr, weight_decay=0.0, eps=hidden_eps),
        OUTPUT_NORM: GroupRule(lr=1.0, weight_decay=0.0, eps=m_w**-1),
        # decayed as sp decays them, so that every parametrization is sp at base sizes
        WIRING_WEIGHT: GroupRule(lr=depth_lr, weight_decay=1.0, eps=hidden_eps),
        WIRING_GAIN: GroupRule(lr=depth_lr, weight_decay=0.0, eps=hidden_eps),
    }
