"""Norm placement as data: which norm slots around a sublayer are filled, per block.

Three slots (x-transformers' view of placement): ``norm_in`` on the branch input, ``norm_out`` on
the branch output, ``post_main`` on the residual stream after the merge. A placement fills them
per block (so Mix-LN can vary them with depth) and says whether a final norm precedes the head.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from trainers.config import ModelConfig
from trainers.registry import Registry


@dataclass(frozen=True, slots=True)
class Slots:
    norm_in: bool
    norm_out: bool
    post_main: bool


@dataclass(frozen=True, slots=True)
class Placement:
    slots: Callable[[ModelConfig, int], Slots]  # (cfg, 0-based block index) -> Slots
    final_norm: bool


PLACEMENTS: Registry[Placement] = Registry("model.placement")


def _fixed(slots: Slots, final_norm: bool) -> Placement:
    return Placement(slots=lambda cfg, block: slots, final_norm=final_norm)


_PRE = Slots(norm_in=True, norm_out=False, post_main=False)
_POST = Slots(norm_in=False, norm_out=False, post_main=True)

# Pre-LN (Xiong et al. 2020): x <- x + F(N(x)); the stream is normed once, before the head.
PLACEMENTS.register("pre")(_fixed(_PRE, final_norm=True))
# Post-LN (Vaswani et al. 2017): x <- N(x + F(x)); the stream leaves every block normed.
PLACEMENTS.register("post")(_fixed(_POST, final_norm=False))
# Peri-LN / Sandwich (Kim et al. 2025, arXiv 2502.02732): x <- x + N_out(F(N_in(x))).
PLACEMENTS.register("sandwich")(_fixed(Slots(True, True, False), final_norm=True))
# No norm anywhere: x <- x + F(x) (the setting ReZero is defined in).
PLACEMENTS.register("none")(_fixed(Slots(False, False, False), final_norm=False))


def mix_ln_post_blocks(cfg: ModelConfig) -> int:
    """How many leading blocks Mix-LN makes post-norm: floor(alpha * n_layers)."""
    return math.floor(cfg.mix_ln_alpha * cfg.n_layers)


def _mix_slots(cfg: ModelConfig, block: int) -> Slots:
    return _POST if block < mix_ln_post_blocks(cfg) else _PRE


# Mix-LN (Li, Yin & Liu 2024, arXiv 2412.13795): post-norm for the first floor(alpha*n_layers)
# blocks, pre-norm after; the pre-norm part ends in a final norm.
PLACEMENTS.register("mix")(Placement(slots=_mix_slots, final_norm=True))
