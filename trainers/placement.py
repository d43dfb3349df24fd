"""Norm placement as data: which norm slots around a sublayer are filled, per block.

Three slots (x-transformers' view of placement): ``norm_in`` on the branch input, ``norm_out`` on
the branch output, ``post_main`` on the residual stream after the merge. A placement fills them
per block (so Mix-LN can vary them with depth) and says whether a final norm precedes the head.
"""

from __future__ import annotations

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


# Pre-LN (Xiong et al. 2020): x <- x + F(N(x)); the stream is normed once, before the head.
PLACEMENTS.register("pre")(_fixed(Slots(True, False, False), final_norm=True))
# Post-LN (Vaswani et al. 2017): x <- N(x + F(x)); the stream leaves every block normed.
PLACEMENTS.register("post")(_fixed(Slots(False, False, True), final_norm=False))
# Peri-LN / Sandwich (Kim et al. 2025, arXiv 2502.02732): x <- x + N_out(F(N_in(x))).
PLACEMENTS.register("sandwich")(_fixed(Slots(True, True, False), final_norm=True))
# No norm anywhere: x <- x + F(x) (the setting ReZero is defined in).
PLACEMENTS.register("none")(_fixed(Slots(False, False, False), final_norm=False))
