"""The depth-wise softmax shared by Full and Block AttnRes (Kimi Team 2026, arXiv 2603.15031).

At mixing site j, with static pseudo-query w_j and key-norm gain g_j, over sources v_0..v_{S-1}:

    a_{j,i} = softmax_i( w_j . RMSNorm_{g_j}(v_i) ),    x_j = sum_i a_{j,i} v_i

No temperature. Values stay raw; only the keys are normalized.

Two rewrites of the same function make it cheap. (1) ``RMSNorm_g(v) . w = (v / rms(v)) . (g * w)``:
the gains fold into the queries, so a source's key ``v / rms(v)`` is computed once. (2) The
queries do not depend on the input, so when a source is created its logits against *every*
site are one matrix product, ``key @ Q^T``; a site then gathers scalars instead of multiplying
stacked keys, and the key gradient is one matrix product per source instead of an outer
product per (site, source) pair.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.residual import probe


def unit_rms(v: Tensor, eps: float) -> Tensor:
    """``v / rms(v)``: the key of a source before the per-site gain."""
    return F.rms_norm(v, (v.shape[-1],), eps=eps)


class SiteParameters(nn.Module):
    """The pseudo-queries and key-norm gains of every mixing site, one row per site (the last row
    is the output site): 2*d parameters per site."""

    no_weight_decay = ("queries", "key_norm_weights")

    def __init__(self, n_sites: int, d: int) -> None:
        super().__init__()
        # Zero init makes the first weights uniform, so at init AttnRes computes what a
        # pre-norm residual computes (paper section 5).
        self.queries = nn.Parameter(torch.zeros(n_sites, d))
        self.key_norm_weights = nn.Parameter(torch.ones(n_sites, d))

    def folded(self) -> Tensor:
        """(n_sites, d): each site's query with its key-norm gain folded in."""
        return self.queries * self.key_norm_weights


@dataclass
class _Phase1:
    """Every site in ``[start, end)`` mixed over the stacked sources alone, in one product."""

    start: int
    end: int
    weights: Tensor  # (B, T, G, n), softmax over the stacked sources
    lse: Tensor  # (B, T, G), log-sum-exp of their logits
    out: Tensor  # (B, T, G, d)


def _combine(
    first: tuple[Tensor, Tensor, Tensor] | None, second: tuple[Tensor, Tensor, Tensor] | None
) -> tuple[Tensor, Tensor]:
    """Merge two softmaxes over disjoint source sets, each given as (weights, lse, output), into
    the softmax over their union: exact (online-softmax merge), not an approximation."""
    if first is None or second is None:
        only = first if second is None else second
        assert only is not None
        return only[2], only[0]
    (a1, lse1, o1), (a2, lse2, o2) = first, second
    lse = torch.logaddexp(lse1, lse2)
    s1, s2 = (lse1 - lse).exp(), (lse2 - lse).exp()  # each part's share of the total mass
    out = s1[..., None] * o1 + s2[..., None] * o2
    return out, torch.cat((s1[..., None] * a1, s2[..., None] * a2), dim=-1)


@dataclass
class DepthSources:
    """The sources the sites mix, with each source's logits against every site.

    Values are stacked token-first, (B, T, n, d), so ``@`` batches cleanly. New values wait in
    a short list and join the stack every ``fold_every`` appends (restacking all of them at every
    site would copy O(L^2) tensors). This is the paper's two-phase schedule (Algorithm 1):
    phase 1 mixes every site up to the next fold over the stack in one batched product; phase 2
    merges, per site, the few recent sources with an online-softmax merge.
    """

    eps: float
    queries: Tensor  # (n_sites, d), gains folded in
    fold_every: int
    values: Tensor | None = None  # (B, T, n, d)
    logits: Tensor | None = None  # (B, T, n, n_sites): each stacked source against every site
    recent: list[Tensor] = field(default_factory=list)
    recent_logits: list[Tensor] = field(default_factory=list)  # (B, T, n_sites) each
    phase1: _Phase1 | None = None

    def append(self, y: Tensor) -> None:
        self.recent.append(y)
        self.recent_logits.append(unit_rms(y, self.eps) @ self.queries.T)
        if len(self.recent) >= self.fold_every:
            self.fold()

    def fold(self) -> None:
        if not self.recent:
            return
        v, lg = torch.stack(self.recent, dim=-2), torch.stack(self.recent_logits, dim=-2)
        self.values = v if self.values is None else torch.cat((self.values, v), dim=-2)
        self.logits = lg if self.logits is None else torch.cat((self.logits, lg), dim=-2)
        self.recent, self.recent_logits, self.phase1 = [], [], None

    def __len__(self) -> int:
        stacked = 0 if self.values is None else self.values.shape[-2]
        return stacked + len(self.recent)

    def horizon(self, site: int) -> int:
        """The end of the run of sites, from ``site`` on, that read the stack as it is now."""
        return min(site + self.fold_every, self.queries.shape[0])

    def _stacked(self, site: int) -> tuple[Tensor, Tensor, Tensor] | None:
        if self.values is None or self.logits is None:
            return None
        p = self.phase1
        if p is None or not p.start <= site < p.end:
            end = self.horizon(site)
            lg = self.logits[..., site:end].transpose(-1, -2)  # (B, T, G, n)
            weights = torch.softmax(lg, dim=-1)
            p = self.phase1 = _Phase1(site, end, weights, lg.logsumexp(-1), weights @ self.values)
        i = site - p.start
        return p.weights[..., i, :], p.lse[..., i], p.out[..., i, :]

    def _recent(self, site: int, extra: Tensor | None) -> tuple[Tensor, Tensor, Tensor] | None:
        values, logits = list(self.recent), [lg[..., site] for lg in self.recent_logits]
        if extra is not None:
            values.append(extra)
            logits.append(unit_rms(extra, self.eps) @ self.queries[site])
        if not values:
            return None
        if len(values) == 1:  # a softmax over one source: weight 1, no product needed
            return torch.ones_like(logits[0])[..., None], logits[0], values[0]
        lg = torch.stack(logits, dim=-1)  # (B, T, r)
        weights = torch.softmax(lg, dim=-1)
        out = (weights[..., None, :] @ torch.stack(values, dim=-2)).squeeze(-2)
        return weights, lg.logsumexp(-1), out

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Site ``site``'s input and its weights over the sources in order, (B, T, d) and
        (B, T, S); ``extra`` is one more source, last, that is not stored (Block AttnRes's
        partial sum)."""
        out, weights = _combine(self._stacked(site), self._recent(site, extra))
        probe.report("depth", site, lambda: weights)
        return out, weights
