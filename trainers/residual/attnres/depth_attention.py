"""The depth-wise softmax shared by Full and Block AttnRes (Kimi Team 2026, arXiv 2603.15031).

At mixing site j, with static pseudo-query w_j and key-norm gain g_j, over sources v_0..v_{S-1}:

    a_{j,i} = softmax_i( w_j . RMSNorm_{g_j}(v_i) ),    x_j = sum_i a_{j,i} v_i

No temperature. Values stay raw; only the keys are normalized.

Three rewrites of the same function make it cheap. (1) ``RMSNorm_g(v) . w = (v / rms(v)) . (g *
w)``: the gains fold into the queries, so a source's key ``v / rms(v)`` is computed once. (2) The
queries do not depend on the input, so when a source is created its logits against *every* site are
one matrix product, ``key @ Q^T`` (the traced path: every site still to come); a site then gathers
scalars instead of multiplying stacked keys.
(3) The paper's two-phase schedule (Algorithm 1): the sites are cut into groups; at a group's first
site, every site of the group is mixed over the sources present then in one batched product (phase
1), and each site merges the few sources added since with an exact online-softmax merge (phase 2).

Two implementations of that schedule compute the same function: ``depth_buffer.BufferedSources``
(preallocated buffers and a hand-written backward, the default) and ``StackedSources`` here
(plain autograd, which ``torch.compile`` can trace; also the reference the tests hold the fast
one to).

Both also serve three of Table 4's switches (``depth_mixing`` computes every switch directly),
since none makes the query depend on the input: raw keys (``attnres_key_norm=none``: no 1/rms, no
gain, so the logit is linear in the source), a window (``attnres_window``: which stored source a
site reads is fixed by the wiring, so the logits outside it are written as -inf once, when the
source arrives, and every gate gives them weight zero) and sigmoid gates (``attnres_gate``: each
weight is sigmoid(l) on its own, so phase 1 is a weighted sum and the merge adds the recent
sources' terms to it, with no normalization to carry).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.residual import probe

Weights = Callable[[], Tensor]  # a site's weights over its sources, (B, T, S), on demand


class Sources(Protocol):
    """What both implementations (and ``depth_mixing.PlainSources``) offer the wirings; ``kind``
    names the weights for the mixing probe."""

    @property
    def kind(self) -> str: ...

    def append(self, y: Tensor) -> None: ...

    def sources(self) -> list[Tensor]: ...

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]: ...


def unit_rms(v: Tensor, eps: float) -> Tensor:
    """``v / rms(v)``: the key of a source before the per-site gain."""
    return F.rms_norm(v, (v.shape[-1],), eps=eps)


def source_logits(y: Tensor, queries: Tensor, eps: float | None) -> Tensor:
    """(B, T, n_sites): one source's logit at every site (gains folded into ``queries``); raw
    keys where ``eps`` is None. In float32 at least, whatever autocast would pick, as the buffered
    path keeps them: a bfloat16 logit is off by up to 1/256 of its size, an error the softmax
    passes on to every weight."""
    exact = torch.promote_types(y.dtype, torch.float32)
    with torch.autocast(y.device.type, enabled=False):
        key = y.to(exact) if eps is None else unit_rms(y.to(exact), eps)
        return key @ queries.to(exact).T


def site_logit(y: Tensor, query: Tensor, eps: float | None) -> Tensor:
    """(B, T): ``source_logits`` against one site's ``query`` (d,), written as products and sums
    (in float32 at least): the compiler fuses the key's norm and the dot into one pass over
    ``y``, where a product with a one-column matrix stays a call of its own, forward and
    backward."""
    y = y.to(torch.promote_types(y.dtype, torch.float32))
    dot = (y * query).sum(-1)
    return dot if eps is None else dot * torch.rsqrt(y.square().mean(-1) + eps)


def window_hidden(spans: tuple[int, ...], window: int, capacity: int) -> Tensor | None:
    """(capacity, n_sites): True where stored source i lies outside site s's window, None when
    no site hides any. Site s mixes ``spans[s]`` sources (the stored ones and, in Block AttnRes,
    the partial sum last) and reads the embedding (i = 0) and the ``window`` newest, as
    ``depth_mixing.window_mask`` does; window 0 is no window."""
    if window == 0:
        return None
    i = torch.arange(capacity)[:, None]
    hidden = (i > 0) & (i < torch.tensor(spans)[None, :] - window)
    return hidden if bool(hidden.any()) else None


class SiteParameters(nn.Module):
    """Every mixing site's learned parameters, one row per site (the last row is the output
    site), held flat under the model's own names whichever path mixes: a state dict loads into
    every configuration that builds the same model. The paper's design has ``queries``
    (pseudo-queries) and ``key_norm_weights`` (key-norm gains), 2*d per site, which the fast path
    here reads; ``depth_mixing`` names what each Table 4 switch adds. None is weight-decayed:
    decay would pull the mixing toward uniform."""

    def __init__(self, initial: Mapping[str, Tensor]) -> None:
        super().__init__()
        for name, value in initial.items():
            self.register_parameter(name, nn.Parameter(value))
        self.no_weight_decay = tuple(initial)

    def param(self, name: str) -> Tensor:
        """The parameter ``name``, typed (``getattr`` on a module is not); cheap, and traceable."""
        return getattr(self, name)

    def folded(self) -> Tensor:
        """(n_sites, d): each site's query with its key-norm gain folded in."""
        return self.param("queries") * self.param("key_norm_weights")


@dataclass(frozen=True)
class Schedule:
    """Where the phase-1 groups start: sorted site indices, the first one 0. Any grouping gives
    the same function; it only moves work between the two phases."""

    starts: tuple[int, ...]
    n_sites: int

    @staticmethod
    def every(size: int, n_sites: int) -> Schedule:
        return Schedule(tuple(range(0, n_sites, size)), n_sites)

    # Plain loops, not bisect: torch.compile traces Python but breaks its graph on C builtins.
    def is_start(self, site: int) -> bool:
        return site in self.starts

    def end(self, site: int) -> int:
        """One past the last site of ``site``'s group."""
        return next((s for s in self.starts if s > site), self.n_sites)


def merged_weights(stacked: Tensor, parts: Tensor) -> Tensor:
    """A site's weights over all its sources, from phase 1's weights over the stacked sources
    (B, T, n) and the merge's weights (B, T, 1 + r): the first part is the stacked share."""
    return torch.cat((parts[..., :1] * stacked, parts[..., 1:]), dim=-1)


@dataclass
class StackedSources:
    """The schedule in plain autograd. A new source's logits are one product against the sites
    that can still read it: sites mix in order, so none before the next one (its logits against
    every site were twice the product). New sources wait in a short list; at a group start they
    are stacked token-first, (B, T, k, d), into one chunk. Chunks are never joined: phase 1 adds
    one product per chunk, where restacking every stored source at each group start would copy
    them all again, forward and backward."""

    eps: float | None  # None: raw keys
    queries: Tensor  # (n_sites, d), gains folded in
    schedule: Schedule
    hidden: Tensor | None = None  # (capacity, n_sites): ``window_hidden``
    sigmoid: bool = False  # sigmoid gates instead of the softmax
    chunks: list[Tensor] = field(default_factory=list)  # (B, T, k, d) each
    # Each chunk's first site and its logits against that site and every later one,
    # (B, T, k, n_sites - first).
    chunk_logits: list[tuple[int, Tensor]] = field(default_factory=list)
    recent: list[Tensor] = field(default_factory=list)
    recent_logits: list[tuple[int, Tensor]] = field(default_factory=list)  # as chunk_logits
    next_site: int = 0  # the first site a source appended now can be read by
    group: tuple[int, Tensor, Tensor, Tensor] | None = None  # start, weights, lse, out

    @property
    def kind(self) -> str:
        return "dwa" if self.sigmoid else "depth"  # as depth_mixing's gates name them

    def append(self, y: Tensor) -> None:
        at, index = self.next_site, self._stored() + len(self.recent)
        logits = source_logits(y, self.queries[at:], self.eps)
        self.recent.append(y)
        self.recent_logits.append((at, self._hide(logits, index, slice(at, None))))

    def sources(self) -> list[Tensor]:
        return [v for chunk in self.chunks for v in chunk.unbind(-2)] + self.recent

    def _stored(self) -> int:
        return sum(chunk.shape[-2] for chunk in self.chunks)

    def _hide(self, logits: Tensor, sources: slice | int, sites: slice | int) -> Tensor:
        if self.hidden is None:
            return logits
        return logits.masked_fill(self.hidden[sources, sites], float("-inf"))

    def _fold(self, site: int) -> None:
        if not self.recent:
            return
        logits = torch.stack([lg[..., site - at :] for at, lg in self.recent_logits], dim=-2)
        self.chunks.append(torch.stack(self.recent, dim=-2))
        self.chunk_logits.append((site, logits))
        self.recent, self.recent_logits = [], []

    def _phase1(self, site: int) -> tuple[Tensor, Tensor, Tensor]:
        if self.schedule.is_start(site) or self.group is None:
            self._fold(site)
            end = self.schedule.end(site)
            lg = torch.cat([lg[..., site - at : end - at] for at, lg in self.chunk_logits], dim=-2)
            lg = lg.transpose(-1, -2)  # (B, T, G, n)
            weights = torch.sigmoid(lg) if self.sigmoid else torch.softmax(lg, dim=-1)
            out, i = None, 0
            for chunk in self.chunks:
                part = weights[..., i : i + chunk.shape[-2]] @ chunk
                out, i = part if out is None else out + part, i + chunk.shape[-2]
            assert out is not None
            self.group = (site, weights, lg.logsumexp(-1), out)
        start, weights, lse, out = self.group
        i = site - start
        return weights[..., i, :], lse[..., i], out[..., i, :]

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]:
        """Site ``site``'s input (B, T, d) and its weights over the sources in order;
        ``extra`` is one more source, last, that is not stored (Block AttnRes's partial sum)."""
        w1, lse1, out1 = self._phase1(site)
        self.next_site = site + 1
        values = [out1, *self.recent]
        logits = [lse1, *(lg[..., site - at] for at, lg in self.recent_logits)]
        if extra is not None:
            values.append(extra)
            logits.append(site_logit(extra, self.queries[site], self.eps))
        if len(values) == 1:  # the group's first site: phase 1 is the whole answer
            return out1, lambda: w1
        parts = merge_gates(torch.stack(logits, dim=-1), self.sigmoid)  # (B, T, 1 + r)
        out = (parts[..., None, :] @ torch.stack(values, dim=-2)).squeeze(-2)
        return out, lambda: merged_weights(w1, parts)


def merge_gates(logits: Tensor, sigmoid: bool) -> Tensor:
    """Phase 2's weights from phase 1's log-sum-exp and the later sources' logits, (B, T, 1 + r):
    a softmax over them, or with sigmoid gates phase 1's sum once and each later source's gate."""
    if not sigmoid:
        return torch.softmax(logits, dim=-1)
    return torch.cat((torch.ones_like(logits[..., :1]), torch.sigmoid(logits[..., 1:])), dim=-1)


def mix(sources: Sources, site: int, extra: Tensor | None = None) -> Tensor:
    """Site ``site``'s input from either implementation, its weights reported to an open
    mixing probe (computed only then)."""
    x, weights = sources.mix(site, extra)
    probe.report(sources.kind, site, weights)
    return x
