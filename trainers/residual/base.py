"""The call protocol every residual wiring implements, and the registry of wirings.

A wiring has two parts, so that ``model.py``'s forward never branches on the variant:

* a **site** per sublayer (``Block`` holds one before its attention and one before its MLP):
  ``site(state, branch) -> state`` reads the sublayer input from the state, runs the branch
  (norm slots + sublayer) and writes its output back;
* a **stream** per model: ``begin(embedding) -> state``, ``after_block(state, i) -> state`` and
  ``finish(state) -> tensor`` (what the final norm and the head see).

The state is whatever the wiring needs: one tensor for a plain residual, the list of earlier
outputs for AttnRes. Which placements a wiring is defined for is data in
``trainers.config.VALID_PLACEMENTS``.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.registry import Registry


class Stream(nn.Module):
    """Model-level part of a wiring. The default is the plain residual stream."""

    def begin(self, emb: Tensor) -> Any:
        return emb

    def after_block(self, state: Any, block: int) -> Any:
        return state

    def finish(self, state: Any) -> Tensor:
        return state


class Residual:
    """A registry entry: builds the sites and the stream of one wiring."""

    @staticmethod
    def site(cfg: ModelConfig, sublayer: int, post_norm: nn.Module) -> nn.Module:
        """The site before global (0-based) sublayer ``sublayer``; ``post_norm`` fills the
        placement's post-main slot (``nn.Identity`` when empty)."""
        raise NotImplementedError

    @staticmethod
    def stream(cfg: ModelConfig) -> Stream:
        return Stream()

    @staticmethod
    def decoupled_kv(cfg: ModelConfig, block: int) -> bool:
        """Whether block ``block``'s attention site passes separate key and value inputs
        (``branch(x_q, (x_k, x_v))``, MUDDFormer); the block then gives the branch an input norm
        for each. Otherwise queries, keys and values all come from one input."""
        return False

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        """Wiring-specific initialization, run after the model's default init."""


RESIDUALS: Registry[type[Residual]] = Registry("model.residual")
