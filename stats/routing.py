"""Routing health of depth mixing: per-token statistics of a site's mixing weights, and the alarm
that names a site whose softmax has collapsed onto one source (issue 27, docs/diagnostics.md).

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

Torch for the statistics (they run inside the mixing probe, on the weights as the forward made
them), imported where they run: the alarm's rule is NumPy on a profile, and the report reads it
without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import Tensor

# The order of the statistics in the (4,) tensor ``token_routing`` returns.
STATS = ("entropy", "top1", "sources", "spread")


def token_routing(weights: Tensor) -> Tensor:
    """(4,) float64: ``STATS`` of ``weights`` (..., S), each computed per row (every leading
    index: a token, a token and head, a row of a mixing matrix) and averaged over rows. Weights
    shared by every token (DenseFormer's) are one row: their per-token value is theirs."""
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
    per_row = torch.stack((entropy, p.amax(-1), h.exp(), top - bottom), dim=-1)
    return per_row.mean(0)


# How an alarm's line begins, so the report can tell it from another reason.
ALARM_PREFIX = "routing alarm"

# The logit spread (nats) beyond which a site's softmax has saturated: its weakest source holds
# under e^-10 (4.5e-5) of the top source's weight, and receives as little of its gradient
# (d loss / d l_i = p_i (g_i - g_mean)), so training cannot turn the site back to it. A site
# that leans on one source with every logit still within reach (two sources at top-1 mass 0.95
# are 2.9 nats apart) is a preference the optimizer can revise, and is not counted: at CPU size
# the paper's static query leans that way at early sites and recovers (docs/diagnostics.md).
SATURATED = 10.0


@dataclass(frozen=True)
class Collapse:
    """A site whose token-averaged top-1 mass first exceeded the threshold at ``step``."""

    site: int
    step: int
    top1: float
    source: int  # the source holding most of its token-averaged weight


@dataclass
class RoutingAlarm:
    """Watches the softmax sites of successive profiles and keeps, per site, the first step it
    collapsed (``collapsed_sites``: per-token top-1 mass above ``threshold`` and a saturated
    softmax; a site with one source is never counted: it has nothing else to read). Free weights
    (DenseFormer, MUDDFormer, a sigmoid gate) have no logits and Hyper-Connection matrices are
    not watched: they start on one source by design."""

    threshold: float  # train.routing_alarm
    found: dict[int, Collapse] = field(default_factory=dict)

    def observe(
        self,
        top1: np.ndarray | None,
        spread: np.ndarray | None,
        weights: np.ndarray | None,
        step: int,
    ) -> None:
        """``top1`` and ``spread`` per site (spread NaN: not a softmax site) and the
        token-averaged ``weights`` (site x source, NaN where a site has no such source),
        measured at ``step``."""
        if top1 is None or spread is None or weights is None:
            return
        for site in np.flatnonzero(collapsed_sites(top1, spread, weights, self.threshold)):
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
            f"{ALARM_PREFIX} (top-1 mass > {self.threshold:g}, logits > {SATURATED:g} nats "
            "apart): " + "; ".join(parts) + (tail if more > 0 else "")
        )


def _source_name(source: int) -> str:
    return "the embedding" if source == 0 else f"source {source}"


def collapsed_sites(
    top1: np.ndarray, spread: np.ndarray, weights: np.ndarray, threshold: float
) -> np.ndarray:
    """(sites,) bool: the sites with two or more sources that read one source per token (top-1
    mass above ``threshold``) through a saturated softmax (logit spread above ``SATURATED``):
    the rule ``RoutingAlarm`` applies, and the report's figure frames. NaN (no logits, or no
    such statistic recorded) never counts."""
    counts = np.sum(~np.isnan(weights), axis=1)
    leans = np.nan_to_num(top1, nan=0.0) > threshold
    saturated = np.nan_to_num(spread, nan=0.0) > SATURATED
    return (counts >= 2) & leans & saturated
