"""AttnRes's depth mixing with the paper's design switches (Kimi Team 2026, arXiv 2603.15031,
section 5.3, Table 4), computed directly: the plain path.

At site j, over the sources v_0..v_{S-1} it may read (all, or the embedding plus the W newest:
``attnres_window``), in each of H channel groups h (``attnres_heads``)::

    l_{j,h,i} = score_j(h, v_i)          (QUERIES[attnres_query], keys from KEY_NORMS)
    a_{j,h,.} = gate(l_{j,h,.})          (GATES[attnres_gate])
    x_j[h]    = sum_i a_{j,h,i} v_i[h]   (v_i[h]: the d/H channels of group h)

With every switch at its default this is exactly ``depth_attention``'s function, which the
buffered two-phase path computes without restacking; that path also serves raw keys, a window
and sigmoid gates (``DepthMixer.buffered`` says where), and the model takes this one for the
other switches
(``AttnResStream``). It is plain autograd: every source is stacked at every site, O(S) copies per
site, about the buffered path's speed at the depths a CPU trains (docs/variants.md).

Each switch is one small strategy chosen in ``DepthMixer.__init__``; the choices the paper
leaves open are documented where they are made (and in docs/variants.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.registry import Registry
from trainers.residual import probe
from trainers.residual.attnres.depth_attention import SiteParameters, Weights, unit_rms


@dataclass(frozen=True)
class Shape:
    """What a strategy needs to size its parameters."""

    n_sites: int
    n_sources: int  # the most sources any site mixes
    d: int
    heads: int
    eps: float
    key_norm: str
    rank: int = 0  # a low-rank input-dependent query's


# Every strategy below holds no parameters: it names the ones it needs with their initial values
# (``initial``), the mixer holds them flat (``SiteParameters``), and each call reads them from it.
# So a model's parameter names are the same whichever path runs it.

# ---- keys (attnres_key_norm) ------------------------------------------------------------------
# A key enters the logits only through k_i . q, so a key norm is two cheap pieces: a factor per
# source, computed once when the source is created (``scale``), and a per-site change of the
# query (``fold``): RMSNorm_g(v) . q = (v . (g * q)) / rms(v).


class RMSKeys:
    """k_i = RMSNorm_{g_j}(v_i) = g_j * v_i / rms(v_i): one gain vector per site, one at init (the
    paper's key norm)."""

    def __init__(self, shape: Shape) -> None:
        self.eps: float = shape.eps

    @staticmethod
    def initial(shape: Shape) -> dict[str, Tensor]:
        return {"key_norm_weights": torch.ones(shape.n_sites, shape.d)}

    def scale(self, y: Tensor) -> Tensor | None:  # (B, T, d) -> (B, T): 1 / rms, as F.rms_norm
        y = y.to(torch.promote_types(y.dtype, torch.float32))  # at least float32 under autocast
        return torch.rsqrt(y.square().mean(-1) + self.eps)

    def fold(self, p: SiteParameters, site: int | slice, q: Tensor) -> Tensor:  # (..., d)
        return q * p.param("key_norm_weights")[site]


class RawKeys:
    """k_i = v_i: Table 4's "without key RMSNorm"; no parameters. ``eps`` None tells the
    buffered path so."""

    def __init__(self, shape: Shape) -> None:
        self.eps: float | None = None

    @staticmethod
    def initial(shape: Shape) -> dict[str, Tensor]:
        return {}

    def scale(self, y: Tensor) -> Tensor | None:
        return None

    def fold(self, p: SiteParameters, site: int | slice, q: Tensor) -> Tensor:
        return q


Keys = RMSKeys | RawKeys
KEY_NORMS: Registry[type[Keys]] = Registry("model.attnres_key_norm")
KEY_NORMS.register("rmsnorm")(RMSKeys)
KEY_NORMS.register("none")(RawKeys)

# ---- scores (attnres_query) -------------------------------------------------------------------
# (parameters, site, stacked sources (B, T, S, d), their key scales (B, T, S) or None)
#   -> logits (B, T, H, S)


def _scaled(logits: Tensor, scales: Tensor | None) -> Tensor:
    """Logits (B, T, H, S) of the raw sources times each source's key scale."""
    return logits if scales is None else logits * scales[..., None, :]


class StaticQuery:
    """l_{j,h,i} = w_{j,h} . k_i: a learned query per site and group, zero at init (the paper's
    pseudo-query). Each group's query spans all d channels of the key, so groups with equal
    queries have equal weights: H groups with one query each is the single-head model."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.keys = KEY_NORMS.get(shape.key_norm)(shape)

    def initial(self) -> dict[str, Tensor]:
        # Zero init makes the first weights uniform, so at init AttnRes computes what a
        # pre-norm residual computes (paper section 5).
        n, hd = self.shape.n_sites, self.shape.heads * self.shape.d
        return {"queries": torch.zeros(n, hd), **self.keys.initial(self.shape)}

    def __call__(
        self, p: SiteParameters, site: int, values: Tensor, scales: Tensor | None
    ) -> Tensor:
        q = self.keys.fold(p, site, p.param("queries")[site].view(self.shape.heads, -1))  # (H, d)
        return _scaled((values @ q.T).transpose(-1, -2), scales)


@dataclass(frozen=True)
class QueryForm:
    """How an input-dependent query is built from the state s = RMS(newest source), (B, T, d):

        q = [w] + [g *] scale * M s,    M = P (H*d x d) or, low rank, U V (U: H*d x r, V: r x d)

    ``static``: the static query w is added (the dynamic part is then a correction to the
    paper's query); ``scale``: 1, 1/sqrt(d) or 1/d on the dynamic part; ``low_rank``: M = U V
    with U zero at init and V drawn N(0, 1/d), rank ``attnres_query_rank``; ``gated``: a learned
    scalar g per site and group, zero at init, with P drawn N(0, 1/d) (both zero would get no
    gradient). Every form starts at the static query's uniform weights."""

    static: bool = False
    scale: str = "1"  # "1", "sqrt_d" or "d"
    low_rank: bool = False
    gated: bool = False

    def factor(self, d: int) -> float:
        return {"1": 1.0, "sqrt_d": d**-0.5, "d": 1.0 / d}[self.scale]


# Why forms other than the raw projection: Adam moves each of P's d^2 entries by about lr a
# step, on a state of norm sqrt(d), so the raw projection's logits move about d times faster than
# a static query's, and the depth softmax saturates within warm-up (issue 27; docs/variants.md).
QUERY_FORMS: dict[str, QueryForm] = {
    "input": QueryForm(),  # the raw projection, kept so recorded trials mean what they meant
    "input_sqrt_d": QueryForm(scale="sqrt_d"),
    "input_d": QueryForm(scale="d"),
    "static_input": QueryForm(static=True, scale="d"),
    "low_rank": QueryForm(static=True, low_rank=True),
    "gated": QueryForm(static=True, scale="sqrt_d", gated=True),
}
# The dynamic parameters of an input-dependent query (``attnres_query_lr`` scales their lr).
DYNAMIC_QUERY = ("query_proj", "query_down", "query_up", "query_gate")


class InputQuery:
    """l_{j,h,i} = q_{j,h}(s) . k_i with q built from s = RMS(v_newest) by one of the
    ``QUERY_FORMS``: the newest source, parameter-free RMS-normalized, is the previous sublayer's
    output (Block AttnRes: the block's partial sum, or the last block's summary at a block's
    first sublayer), the freshest state the site can read before it mixes (its own input is what
    the mix computes). Table 4's "input-dependent query"; the paper says only that the query is
    projected from the current hidden state."""

    def __init__(self, shape: Shape, form: QueryForm) -> None:
        self.shape, self.form = shape, form
        self.keys = KEY_NORMS.get(shape.key_norm)(shape)

    def initial(self) -> dict[str, Tensor]:
        n, h, d, r = self.shape.n_sites, self.shape.heads, self.shape.d, self.shape.rank
        out: dict[str, Tensor] = {}
        if self.form.static:
            out["queries"] = torch.zeros(n, h * d)
        if self.form.low_rank:
            out |= {"query_down": torch.zeros(n, r, d), "query_up": torch.zeros(n, h * d, r)}
        else:
            out["query_proj"] = torch.zeros(n, h * d, d)
        if self.form.gated:
            out["query_gate"] = torch.zeros(n, h)
        return {**out, **self.keys.initial(self.shape)}

    def drawn(self) -> tuple[str, ...]:
        """The parameters drawn N(0, 1/d) after the model's own init (the rest start at zero)."""
        if self.form.low_rank:
            return ("query_down",)
        return ("query_proj",) if self.form.gated else ()

    def query(self, p: SiteParameters, site: int, state: Tensor) -> Tensor:
        """(B, T, H, d): the site's query for each token's state (B, T, d)."""
        if self.form.low_rank:
            dyn = (state @ p.param("query_down")[site].T) @ p.param("query_up")[site].T
        else:
            dyn = state @ p.param("query_proj")[site].T
        dyn = dyn.unflatten(-1, (self.shape.heads, -1)) * self.form.factor(self.shape.d)
        if self.form.gated:
            dyn = dyn * p.param("query_gate")[site][:, None]
        if self.form.static:
            dyn = dyn + p.param("queries")[site].view(self.shape.heads, -1)
        return dyn

    def __call__(
        self, p: SiteParameters, site: int, values: Tensor, scales: Tensor | None
    ) -> Tensor:
        state = unit_rms(values[..., -1, :], self.shape.eps)  # (B, T, d)
        q = self.keys.fold(p, site, self.query(p, site, state))  # (B, T, H, d)
        return _scaled(q @ values.transpose(-1, -2), scales)


class ScalarLogits:
    """l_{j,h,i} = s_{j,h,i}: a learned logit per site, group and source position, zero at init;
    no query, no key, so the mixing does not depend on the input. The logits go through the gate
    like any others (softmax: a learned convex combination). Table 4's "input-independent
    mixing"."""

    def __init__(self, shape: Shape) -> None:
        self.shape = shape
        self.keys = RawKeys(shape)  # no keys: nothing to scale

    def initial(self) -> dict[str, Tensor]:
        n, h, s = self.shape.n_sites, self.shape.heads, self.shape.n_sources
        return {"source_logits": torch.zeros(n, h, s)}

    def __call__(
        self, p: SiteParameters, site: int, values: Tensor, scales: Tensor | None
    ) -> Tensor:
        return p.param("source_logits")[
            site, :, : values.shape[-2]
        ]  # (H, S), broadcast over tokens


Score = StaticQuery | InputQuery | ScalarLogits
QUERIES: Registry[Callable[[Shape], Score]] = Registry("model.attnres_query")
QUERIES.register("static")(StaticQuery)
for _name, _form in QUERY_FORMS.items():
    QUERIES.register(_name)(partial(InputQuery, form=_form))
QUERIES.register("scalar")(ScalarLogits)

# ---- gates (attnres_gate): logits (B, T, H, S) and the window's mask -> weights ---------------


class Gate:
    """Turns logits into depth weights; ``keep`` (S,) masks the sources outside the window.
    ``probe_kind`` is how the diagnostics read the weights ("depth": they sum to one)."""

    probe_kind = "depth"

    def __call__(self, logits: Tensor, keep: Tensor | None) -> Tensor:
        raise NotImplementedError


class Softmax(Gate):
    """a_i = exp(l_i) / sum_t exp(l_t): the paper's gate."""

    def __call__(self, logits: Tensor, keep: Tensor | None) -> Tensor:
        if keep is not None:
            logits = logits.masked_fill(~keep, float("-inf"))
        return logits.softmax(-1)


class Sigmoid(Gate):
    """a_i = sigmoid(l_i), each source on its own, not renormalized (weights need not sum to one;
    zero queries give every source 1/2). Renormalizing would be a softmax over log-sigmoids, which
    keeps the competition Table 4's row takes away. One line to change: divide by the sum."""

    probe_kind = "dwa"  # free weights: the diagnostics skip entropy and embedding mass

    def __call__(self, logits: Tensor, keep: Tensor | None) -> Tensor:
        weights = torch.sigmoid(logits)
        return weights if keep is None else weights * keep


GATES: Registry[Gate] = Registry("model.attnres_gate")
GATES.register("softmax")(Softmax())
GATES.register("sigmoid")(Sigmoid())


def window_mask(n_sources: int, window: int, device: torch.device) -> Tensor | None:
    """(S,) True for the sources a site reads: the embedding (position 0) and the ``window``
    newest; None when that is all of them (window 0 means no window)."""
    if window == 0 or n_sources <= window + 1:
        return None
    keep = torch.zeros(n_sources, dtype=torch.bool, device=device)
    keep[0] = True
    keep[-window:] = True
    return keep


# ---- the mixer --------------------------------------------------------------------------------


class DepthMixer(SiteParameters):
    """Every site's depth mixing under the configured switches: the parameters the switches
    name, held flat (at the defaults exactly the fast path's, so either path loads the other's
    state dict), and the strategies that compute one site's input from its sources."""

    def __init__(self, cfg: ModelConfig, n_sites: int, n_sources: int) -> None:
        shape = Shape(
            n_sites,
            n_sources,
            cfg.d_model,
            cfg.attnres_heads,
            cfg.norm_eps,
            cfg.attnres_key_norm,
            cfg.attnres_query_rank,
        )
        score = QUERIES.get(cfg.attnres_query)(shape)
        super().__init__(score.initial())
        self.score: Score = score
        self.gate = GATES.get(cfg.attnres_gate)
        self.heads, self.window = cfg.attnres_heads, cfg.attnres_window
        self.probe_site = 0  # how far the sites the probe names are from the mixer's rows

    def draw(self) -> None:
        """The input-dependent query's random parameters, N(0, 1/d): drawn after the model's own
        init (``AttnRes.init_weights``), so a seed starts the weights every wiring shares where
        standard's start."""
        drawn = self.score.drawn() if isinstance(self.score, InputQuery) else ()
        for name in drawn:
            nn.init.normal_(self.param(name), std=1 / math.sqrt(self.param(name).shape[-1]))

    def dynamic_parameters(self) -> list[nn.Parameter]:
        """The input-dependent query's own parameters (``attnres_query_lr`` scales their lr)."""
        return [p for name, p in self.named_parameters() if name in DYNAMIC_QUERY]

    @property
    def buffered(self) -> bool:
        """Whether the two-phase paths (``depth_attention``, ``depth_buffer``) compute this
        mixer's function, the one rule the stream follows. They need a static query (a source's
        logits against every site are one product when it arrives) and one group; any key norm
        (raw keys: 1/rms is one), window (a fixed mask of the logits) or gate (``sigmoid``) they
        serve. The input-dependent query and scalar logits have no static query; H > 1 groups
        would be static too, but the two-phase kernels are written for one: they stay here."""
        return isinstance(self.score, StaticQuery) and self.heads == 1

    @property
    def sigmoid(self) -> bool:
        """Whether the gate is the sigmoid (free weights) rather than the softmax."""
        return isinstance(self.gate, Sigmoid)

    @property
    def key_eps(self) -> float | None:
        """The buffered path's key norm: RMSNorm's epsilon, or None for raw keys."""
        return self.score.keys.eps

    def folded(self) -> Tensor:
        """(n_sites, d): each site's static query with its key gain folded in, if any (the
        buffered path's queries; ``buffered`` only)."""
        return self.score.keys.fold(self, slice(None), self.param("queries"))

    def key_scale(self, y: Tensor) -> Tensor | None:
        """What a new source's key needs, computed once: (B, T), or None for raw keys."""
        return self.score.keys.scale(y)

    def forward(
        self, site: int, sources: list[Tensor], scales: list[Tensor | None] | None = None
    ) -> tuple[Tensor, Tensor]:
        """Site ``site``'s input (B, T, d) and its weights (B, T, H, S) over ``sources``, whose
        key scales are ``scales`` (``key_scale`` of each; computed here when not given)."""
        if scales is None:
            scales = [self.key_scale(y) for y in sources]
        values = torch.stack(sources, dim=-2)  # (B, T, S, d)
        present = [s for s in scales if s is not None]  # all or none: one key norm
        stacked = torch.stack(present, dim=-1) if present else None  # (B, T, S)
        keep = self._kept(site, window_mask(len(sources), self.window, values.device), values)
        weights = self.gate(self.score(self, site, values, stacked), keep)  # (B, T, H, S)
        grouped = values.unflatten(-1, (self.heads, -1))  # (B, T, S, H, d/H)
        x = torch.einsum("...hs,...she->...he", weights.to(values.dtype), grouped)
        return x.flatten(-2), weights

    def _kept(self, site: int, keep: Tensor | None, values: Tensor) -> Tensor | None:
        """``keep`` less the source the diagnostics leave out here (``probe.removing``, keyed
        by the probe's site number, ``probe_site`` more than the mixer's row)."""
        source = probe.removed(site + self.probe_site)
        if source is None:
            return keep
        n = values.shape[-2]
        kept = torch.ones(n, dtype=torch.bool, device=values.device) if keep is None else keep
        return kept & (torch.arange(n, device=values.device) != source)


def draw_queries(model: nn.Module) -> None:
    """Every mixer's random query parameters (``DepthMixer.draw``): the AttnRes wirings' init."""
    for module in model.modules():
        if isinstance(module, DepthMixer):
            module.draw()


@dataclass
class PlainSources:
    """The ``Sources`` interface over lists: each source's key scale is computed when it
    arrives, and each mix stacks what it reads."""

    mixer: DepthMixer
    values: list[Tensor] = field(default_factory=list)
    scales: list[Tensor | None] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.mixer.gate.probe_kind

    def append(self, y: Tensor) -> None:
        self.values.append(y)
        self.scales.append(self.mixer.key_scale(y))

    def sources(self) -> list[Tensor]:
        return list(self.values)

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]:
        values, scales = self.values, self.scales
        if extra is not None:
            values, scales = [*values, extra], [*scales, self.mixer.key_scale(extra)]
        x, weights = self.mixer(site, values, scales)
        # heads join the tokens, (B, T*H, S): the probe's per-token statistics are per token
        # and head, and its token average is the mean over heads of each source's weight.
        # Scalar logits give (H, S), the same at every token: expanded first.
        return x, lambda: weights.expand(*x.shape[:2], *weights.shape[-2:]).flatten(1, 2)
