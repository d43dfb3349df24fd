"""The call protocol every residual wiring implements, and the registry of wirings.

A wiring has two parts, so that ``model.py``'s forward never branches on the variant:

* a **site** per sublayer (``Block`` holds one before its attention and one before its MLP):
  ``site(state, branch) -> state`` reads the sublayer input from the state, runs the branch
  (norm slots + sublayer) and writes its output back;
* a **stream** per model: ``begin(embedding) -> state``, ``after_block(state, i) -> state`` and
  ``finish(state) -> tensor`` (what the final norm and the head see).

The state is whatever the wiring needs: one tensor for a plain residual, the list of earlier
outputs for AttnRes. A site hands its branch one input by default, or as many as
``Residual.inputs`` says (cross-layer inputs such as MUDDFormer's separate query, key and value
streams). What a wiring is (its placements, fields, FLOPs, label, paper) is its entry in
``trainers.catalogue``.
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

    def mixing_path(self, device_type: str, dtype: str, compiled: bool) -> tuple[str, str]:
        """Which implementation mixes depth in a forward on ``device_type`` computing in
        ``dtype`` (compiled or not), and why, in one line: ("", "") for a wiring with one
        implementation; a depth softmax names its path ("fused", "buffered", "stacked",
        "plain"), as a trial records it."""
        return "", ""


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
    def inputs(cfg: ModelConfig, sublayer: int) -> int:
        """How many inputs the site before global sublayer ``sublayer`` hands its branch
        (``branch(x, *extra)``), each normed by its own input norm: one, the default; an
        attention also reads three, its query, key and value inputs (MUDDFormer)."""
        return 1

    @staticmethod
    def init_weights(model: nn.Module, cfg: ModelConfig) -> None:
        """Wiring-specific initialization, run after the model's default init."""


RESIDUALS: Registry[type[Residual]] = Registry("model.residual")
