"""Opt-in diagnostics hooks in the depth-mixing wirings: a probe through which they report their
learned mixing weights, and the removal of one source at one site (``removing``, ``removed``).

Diagnostics open a probe around one forward pass; wirings call ``report`` with a callable, so
nothing is computed or kept when no probe is open (the normal training path). Context variables,
not module attributes, so concurrent forwards (threads, nested models) never see each other's
probe or removal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

from stats.routing import token_routing
from trainers.config import ROUTING_ALARM


class Mixing(dict[str, dict[int, Tensor]]):
    """kind -> site index -> weights averaged over batch and tokens (detached, float32, CPU);
    ``routing``: kind -> site index -> ``stats.routing.STATS`` per token, then averaged, the
    collapsed share at top-1 mass ``threshold`` (train.routing_alarm)."""

    def __init__(self, threshold: float) -> None:
        super().__init__()
        self.threshold = threshold
        self.routing: dict[str, dict[int, Tensor]] = {}


_PROBE: ContextVar[Mixing | None] = ContextVar("mixing_probe", default=None)
# (site, source) whose contribution the forward leaves out, renormalizing the rest
_REMOVED: ContextVar[tuple[int, int] | None] = ContextVar("removed_source", default=None)


def report(kind: str, site: int, weights: Callable[[], Tensor], token_dims: int = 2) -> None:
    """Record ``weights()`` for ``site`` under ``kind`` if a probe is open; the leading
    ``token_dims`` dimensions (batch, time) are averaged away."""
    if torch.compiler.is_compiling():  # a traced forward never reports (the probe is eager)
        return
    probe = _PROBE.get()
    if probe is None:
        return
    w = weights().detach().float()
    probe.routing.setdefault(kind, {})[site] = token_routing(w, probe.threshold).cpu()
    if token_dims and w.dim() > token_dims:
        w = w.mean(dim=tuple(range(token_dims)))
    probe.setdefault(kind, {})[site] = w.cpu()


@contextmanager
def mixing_probe(threshold: float = ROUTING_ALARM) -> Iterator[Mixing]:
    """Collect every ``report`` made inside the block; ``threshold``: the top-1 mass above
    which a token may count as collapsed (train.routing_alarm; its default by default)."""
    found = Mixing(threshold)
    token = _PROBE.set(found)
    try:
        yield found
    finally:
        _PROBE.reset(token)


@contextmanager
def removing(site: int, source: int) -> Iterator[None]:
    """Forwards inside the block leave ``source``'s contribution out of ``site``'s softmax
    mixing, the other weights renormalized (the softmax over the other logits: the mixer masks
    it, ``depth_mixing.DepthMixer``): the diagnostics' causal importance."""
    token = _REMOVED.set((site, source))
    try:
        yield
    finally:
        _REMOVED.reset(token)


def removed(site: int) -> int | None:
    """The source ``site`` leaves out of its softmax inside ``removing``, else None."""
    if torch.compiler.is_compiling():  # a traced forward never removes (diagnostics are eager)
        return None
    found = _REMOVED.get()
    return found[1] if found is not None and found[0] == site else None
