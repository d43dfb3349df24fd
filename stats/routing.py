"""Routing health of depth mixing: per-token statistics of a site's mixing weights, and the alarm
that names a site whose softmax has collapsed onto one source (issues 27 and 50,
docs/diagnostics.md).

The token-averaged weights hide collapse: half the tokens reading only source 0 and half only
source 1 average to a uniform-looking (1/2, 1/2). Every number here is therefore computed per
token (per token and head, for AttnRes with heads; per token and output stream, for a mixing
matrix) and only then averaged.

For weights w over S sources at one token, with p = |w| / sum |w| (p = w for a softmax):

- ``entropy``  = H(p) / log S, H(p) = -sum p_i log p_i   (1 = uniform, 0 = one source; NaN, S = 1)
- ``top1``     = max_i p_i
- ``sources``  = exp(H(p)), the effective number of sources (1 to S)
- ``spread``   = max_i log p_i - min_i log p_i over the sources with p_i > 0: for a softmax this is
  exactly the largest logit spread, max_i l_i - min_i l_i (log p_i - log p_j = l_i - l_j); a
  source whose weight underflows float32 (a spread beyond about 87) is left out, so there the
  number is a lower bound. Only a softmax has logits: for free weights it is not reported.
- ``margin``   = log p_(1) - log p_(2), the top source over the runner-up: for a softmax, the
  top logit minus the runner-up's. A runner-up whose weight underflowed float32 is read as
  float32's smallest positive number (2^-149), so there the margin is finite, near its lower
  bound of about 103 nats. NaN for S = 1 (no runner-up)
- ``collapsed`` = 1 where top1 > ``threshold`` and margin > ``SATURATED`` on the same token,
  else 0: averaged, the share of the site's tokens that read one source through a saturated
  softmax (NaN for S = 1)

Torch for the statistics (they run inside the mixing probe, on the weights as the forward made
them), imported where they run: the alarm's rule is NumPy on a profile, and the report reads it
without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

# Re-exported: the rule's readers import its cuts with it.
from stats.saturation import COLLAPSED_SHARE as COLLAPSED_SHARE
from stats.saturation import SATURATED as SATURATED

if TYPE_CHECKING:
    from torch import Tensor

# The order of the statistics in the (6,) tensor ``token_routing`` returns.
STATS = ("entropy", "top1", "sources", "spread", "margin", "collapsed")
# float32's smallest positive number (a subnormal): what an underflowed runner-up is read as.
FLOAT32_TINY = 2.0**-149


def token_routing(weights: Tensor, threshold: float) -> Tensor:
    """(6,) float64: ``STATS`` of ``weights`` (..., S), each computed per row (every leading
    index: a token, a token and head, a row of a mixing matrix) and averaged over rows, the
    ``collapsed`` share at top-1 mass ``threshold`` (train.routing_alarm). Weights shared by
    every token (DenseFormer's) are one row: their per-token value is theirs."""
    import torch

    w = weights.detach().double().reshape(-1, weights.shape[-1])
    p = w.abs() / w.abs().sum(-1, keepdim=True).clamp_min(1e-300)
    n = p.shape[-1]
    plogp = torch.where(p > 0, p * p.clamp_min(1e-300).log(), torch.zeros_like(p))
    h = -plogp.sum(-1)  # (rows,)
    logp = p.clamp_min(1e-300).log()
    live = p > 0
    top = torch.where(live, logp, torch.full_like(logp, -math.inf)).amax(-1)
    bottom = torch.where(live, logp, torch.full_like(logp, math.inf)).amin(-1)
    entropy = h / math.log(n) if n > 1 else torch.full_like(h, math.nan)
    top1 = p.amax(-1)
    margin = _margin(p)
    collapsed = ((top1 > threshold) & (margin > SATURATED)).double()
    if n < 2:  # no runner-up: nothing to collapse away from
        collapsed = torch.full_like(collapsed, math.nan)
    stats = (entropy, top1, h.exp(), top - bottom, margin, collapsed)
    return torch.stack(stats, dim=-1).mean(0)


def _margin(p: Tensor) -> Tensor:
    """(rows,) log p_(1) - log p_(2) of each row of shares ``p`` (rows, S); NaN for S = 1."""
    import torch

    if p.shape[-1] < 2:
        return torch.full(p.shape[:-1], math.nan, dtype=p.dtype)
    first, second = p.topk(2, dim=-1).values.clamp_min(FLOAT32_TINY).log().unbind(-1)
    return first - second


# How an alarm's line begins, so the report can tell it from another reason.
ALARM_PREFIX = "routing alarm"


@dataclass(frozen=True)
class Collapse:
    """A site first found collapsed at ``step``, with its token-averaged top-1 mass then."""

    site: int
    step: int
    top1: float
    source: int  # the source holding most of its token-averaged weight


@dataclass
class RoutingAlarm:
    """Watches the softmax sites of successive profiles and keeps, per site, the first step it
    collapsed (``collapsed_sites``: on more than ``COLLAPSED_SHARE`` of its tokens, top-1 mass
    above ``threshold`` and the runner-up more than ``SATURATED`` nats below the top; a site
    with one source is never counted: it has nothing else to read). Free weights (DenseFormer,
    MUDDFormer, a sigmoid gate) have no logits and Hyper-Connection matrices are not watched:
    they start on one source by design."""

    threshold: float  # train.routing_alarm
    found: dict[int, Collapse] = field(default_factory=dict)

    def observe(
        self,
        top1: np.ndarray | None,
        spread: np.ndarray | None,
        weights: np.ndarray | None,
        step: int,
        collapsed: np.ndarray | None = None,
    ) -> None:
        """``top1``, ``spread`` and the ``collapsed`` share per site (NaN: not a softmax site;
        ``collapsed`` None: a profile from before it was measured, judged by the averages, see
        ``collapsed_sites``) and the token-averaged ``weights`` (site x source, NaN where a
        site has no such source), measured at ``step``."""
        if top1 is None or spread is None or weights is None:
            return
        found = collapsed_sites(top1, spread, weights, self.threshold, collapsed)
        for site in np.flatnonzero(found):
            if int(site) in self.found:
                continue
            source = int(np.nanargmax(weights[site]))
            self.found[int(site)] = Collapse(int(site), step, float(top1[site]), source)

    def rows(self) -> list[list[float]]:
        """The collapsed sites as plain numbers (site, step, top-1 mass, source), for a
        checkpoint that loads with ``weights_only=True``."""
        return [[c.site, c.step, c.top1, c.source] for c in self.found.values()]

    def restore(self, rows: list[list[float]]) -> None:
        """What ``rows`` saved, added to what was found since (the earlier step wins)."""
        for site, step, top1, source in rows:
            c = Collapse(int(site), int(step), float(top1), int(source))
            if c.site not in self.found or self.found[c.site].step > c.step:
                self.found[c.site] = c

    def message(self, named: int = 3) -> str:
        """One line naming the ``named`` earliest collapsed sites and counting the rest (a
        description and a reason must stay one short line); "" when none collapsed."""
        if not self.found:
            return ""
        order = sorted(self.found.values(), key=lambda c: (c.step, c.site))
        parts = [
            f"site {c.site} collapsed onto {_source_name(c.source)} by step {c.step} "
            f"(top-1 mass {c.top1:.3f})"
            for c in order[:named]
        ]
        more = len(order) - named
        tail = f"; {more} more site{'s' if more > 1 else ''} by step {order[-1].step}"
        return (
            f"{ALARM_PREFIX} ({rule(self.threshold)}): "
            + "; ".join(parts)
            + (tail if more > 0 else "")
        )


def rule(threshold: float) -> str:
    """The alarm's rule in a few words, for its line and the report."""
    return (
        f"top-1 mass > {threshold:g} and runner-up > {SATURATED:g} nats down on over "
        f"{COLLAPSED_SHARE:.0%} of tokens"
    )


def _source_name(source: int) -> str:
    return "the embedding" if source == 0 else f"source {source}"


def collapsed_sites(
    top1: np.ndarray,
    spread: np.ndarray,
    weights: np.ndarray,
    threshold: float,
    collapsed: np.ndarray | None = None,
) -> np.ndarray:
    """(sites,) bool: the sites with two or more sources that have collapsed, the rule
    ``RoutingAlarm`` applies and the report's figure frames. With the ``collapsed`` share per
    site (measured at ``threshold`` by the probe): more than ``COLLAPSED_SHARE`` of its tokens
    read one source (top-1 mass above ``threshold``) with the runner-up more than
    ``SATURATED`` nats below the top. Without it (a profile recorded before issue 50), the
    rule that profile was judged by: the token-averaged top-1 mass above ``threshold`` and the
    token-averaged logit spread above ``SATURATED``. NaN (no logits, or no such statistic
    recorded) never counts."""
    counts = np.sum(~np.isnan(weights), axis=1)
    if collapsed is not None:
        return (counts >= 2) & (np.nan_to_num(collapsed, nan=0.0) > COLLAPSED_SHARE)
    leans = np.nan_to_num(top1, nan=0.0) > threshold
    saturated = np.nan_to_num(spread, nan=0.0) > SATURATED
    return (counts >= 2) & leans & saturated
