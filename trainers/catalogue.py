"""The wiring catalogue: what each residual wiring, norm placement, attention variant and AttnRes
design switch *is*, written once. Everything else derives from it: the config's validity matrix,
owned-field and switch rules, ``trainers.flops``' per-wiring counts, the report's wiring
fields and arm labels, the benchmark arms and the tables of ``docs/variants.md``.

An entry holds facts, not code that runs a model: its name, the placements it is defined for,
the config fields it reads beyond the shared ones (``owns``: each with its bounds where read and
whether a configuration that does not read it keeps a value set away from its default; the
defaults are the config's), its label segments, its FLOP formula, its extra-parameter formula and
its paper. The module that implements it is found in its registry (``trainers.residual``,
``trainers.attention``...) by the same name; a test holds the two together.

Torch-free and importing nothing else of the project, so that ``trainers.config`` can read it
and ``reports``, ``search_spaces`` and the docs tests can import it cheaply. The formulas take a
``ModelConfig``, named by the fields they read (a protocol, below).

FLOPs follow ``trainers.flops``' convention (that module's docstring): training FLOPs per
token of the matrix products, each (m x k) @ (k x n) counted 2mkn, forward and backward; scalar
weights and outer products are elementwise and count nothing. Parameter formulas count what a wiring
adds to the standard model of the same shape and placement (``bias=False``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol


class ModelConfig(Protocol):
    """What the formulas read of a ``trainers.config.ModelConfig``, which satisfies it: named
    here by its fields because the config imports this module (no import circle, not even one
    for types)."""

    @property
    def residual(self) -> str: ...
    @property
    def attention(self) -> str: ...
    @property
    def placement(self) -> str: ...
    @property
    def norm_scaling(self) -> str: ...
    @property
    def parametrization(self) -> str: ...
    @property
    def norm(self) -> str: ...
    @property
    def d_model(self) -> int: ...
    @property
    def n_layers(self) -> int: ...
    @property
    def n_sublayers(self) -> int: ...
    @property
    def attnres_block_sizes(self) -> tuple[int, ...]: ...
    @property
    def attnres_heads(self) -> int: ...
    @property
    def attnres_key_norm(self) -> str: ...
    @property
    def attnres_query(self) -> str: ...
    @property
    def attnres_query_rank(self) -> int: ...
    @property
    def attnres_window(self) -> int: ...
    @property
    def attnres_sources(self) -> str: ...
    @property
    def hc_streams(self) -> int: ...
    @property
    def hc_dynamic(self) -> bool: ...
    @property
    def laurel_rank(self) -> int: ...
    @property
    def dense_dilation(self) -> int: ...
    @property
    def dense_period(self) -> int: ...


Formula = Callable[[ModelConfig], int]
# A bound of an owned field: a number, or a function of the configuration (at most d_model...).
Bound = float | Callable[[ModelConfig], float]

# Blocks (Transformer layers) a configuration may have: the range of model.n_layers.
MAX_LAYERS = 1024

TRAIN = 3  # forward + backward of a product whose two operands both need gradients
TRAIN_CONST = 2  # ... whose other operand is a constant (the backward computes one gradient)

# The axes every configuration sets: part of every wiring, owned by no entry.
AXES = ("residual", "placement", "norm", "norm_scaling", "attention")

# Every parametrization (trainers.config.ParametrizationName), and those that scale width and
# depth. An entry checked with them all lists ALL_PARAMETRIZATIONS.
ALL_PARAMETRIZATIONS = ("sp", "mup", "depth_mup", "completep")
# The coord check's verdicts on the wirings that mix the stream (tests/trainers/test_coordcheck.py
# pins them; docs/variants.md gives the numbers): widths 32-256, depths 2-32, seeds 0 and 1.
WIDTH_ONLY = ("sp", "mup")
_STARVED = (
    "its stream's update shrinks as depth^-0.5 to -0.7: m_L^-alpha starves the convex mix of "
    "the sublayer outputs against the embedding"
)
_DENSE_ALPHA_1 = "its stream's update grows as depth^+0.35 at alpha 1; Depth-muP's 1/2 passes"

# LayerNorm Scaling's 1/sqrt(l) input scale is a depth rule of its own, which the depth
# parametrizations' m_L^-alpha branch multiplier would compound: not yet checked with them.
PARAMETRIZED_NORM_SCALINGS = ("none",)


@dataclass(frozen=True, kw_only=True, slots=True)
class Owned:
    """A config field an entry reads beyond the shared axes. Where a configuration reads it, its
    value lies in [low, high] (``None``: unbounded; ``why`` says what the bound protects). Where
    it does not, an explicit setting away from the default is refused, unless ``kept``: records
    and checkpoints written before that rule hold such values, and a ``ModelConfig`` keeps them
    (a sweep and ``nas train`` still refuse them: ``trainers.identity``)."""

    field: str
    low: Bound | None = None
    high: Bound | None = None
    kept: bool = False
    why: str = ""

    def bounds(self, cfg: ModelConfig) -> tuple[float | None, float | None]:
        """(low, high) for ``cfg``."""
        return _bound(self.low, cfg), _bound(self.high, cfg)


def _bound(bound: Bound | None, cfg: ModelConfig) -> float | None:
    return bound(cfg) if callable(bound) else bound


@dataclass(frozen=True, kw_only=True, slots=True)
class LabelPart:
    """One segment of an arm's wiring label (``r=8``, ``4x5``, ``N=8``), read from the recorded
    parameters of the entry's ``fields``: ``template.format(*values)``."""

    template: str
    fields: tuple[str, ...]
    hide_at_default: bool = False  # no segment when every field is at its default
    whole: bool = (
        True  # read as an integer (absent: the default); False: as recorded (absent: none)
    )
    lead: bool = False  # right after residual/placement, before the attention and the switches


@dataclass(frozen=True, kw_only=True, slots=True)
class Arm:
    """A named benchmark arm (``benchmarks/arms.py``): config overrides without ``model.``."""

    name: str
    overrides: tuple[tuple[str, object], ...]

    @property
    def settings(self) -> dict[str, object]:
        return dict(self.overrides)


@dataclass(frozen=True, kw_only=True, slots=True)
class Entry:
    """What every catalogue entry has."""

    name: str
    paper: str  # short citation
    summary: str = ""  # the docs table's "update" column
    owns: tuple[Owned, ...] = ()  # config fields read by this entry (and refused or kept elsewhere)
    label: tuple[LabelPart, ...] = ()
    flops: Formula | None = None  # training FLOPs per token it adds; None: no matrix product
    flops_text: str = "0"  # the docs table's "extra FLOPs per token" column
    params: Formula | None = None  # parameters it adds; None: no formula (see params_text)
    params_text: str = "0"  # the docs table's "extra parameters" column
    arms: tuple[Arm, ...] = ()
    # The parametrizations (model.parametrization) this entry runs with: those whose coord check
    # (nas coordcheck) it passes; any other is refused, "not yet checked" (sp always), or with
    # the measured reason where it is in ``coordcheck_fails`` (parametrization, what fails).
    parametrizations: tuple[str, ...] = ("sp",)
    coordcheck_fails: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Wiring(Entry):
    """A residual wiring (``model.residual``)."""

    placements: tuple[str, ...]  # the placements it is defined for, the usual one first
    paper_norm: str | None = None  # the norm type its paper fixes (the built-in arms run it)
    # Elements per token each site keeps for the backward beyond the plain residual's add, which
    # keeps nothing: a branch output scaled by a learned weight keeps that output (the weight's
    # gradient reads it). None: nothing. trainers.measure.memory_plan reads it; its depth state
    # (AttnRes's sources, the streams) is that module's own.
    site_keeps: Formula | None = None
    # Elements per token of the float32 stream that a site's own matrix products read: autocast
    # keeps a half-precision copy of each for the backward (under a single precision the product
    # keeps the stream itself, which the plan counts already). None: no such product.
    site_casts: Formula | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Placement(Entry):
    """A norm placement (``model.placement``); its slots are ``trainers.model.placement``'s."""

    input_norm: bool  # whether the sublayer input is normed (what LayerNorm Scaling scales)


@dataclass(frozen=True, kw_only=True, slots=True)
class Attention(Entry):
    """An attention variant (``model.attention``), valid with every wiring."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Switch:
    """An AttnRes design switch (the paper's Table 4, and what a site routes: Delta AttnRes),
    read by the wirings that own it."""

    field: str
    short: str  # its name in labels and in the published overlay (``gate=sigmoid``)
    paper: str


def _arm(name: str, **overrides: object) -> Arm:
    return Arm(name=name, overrides=tuple(overrides.items()))


# ---- FLOP formulas ----------------------------------------------------------------------------
# Each: forward products per token, times TRAIN (or TRAIN_CONST).


def weighted_sum(sources: int, d: int) -> int:
    """Forward FLOPs of a weighted sum of ``sources`` vectors of width d, a product with inner
    dimension ``sources``; over one source it is a scaling, elementwise."""
    return 2 * sources * d if sources > 1 else 0


def attnres_sources(cfg: ModelConfig) -> list[int]:
    """The sources each AttnRes site's softmax reads, in site order (the output site last): Full,
    the embedding and every earlier output; Block, the embedding, the completed blocks' summaries
    and the current block's partial sum; at most 1 + ``attnres_window`` of them. Delta AttnRes's
    additive routing (``attnres_sources`` deltas or cumulative) has no partial source and no
    output site, and its site 0 routes nothing: sites 1..2L - 1, each over the embedding and the
    completed blocks (Full: every earlier output)."""
    counts: list[int] = []
    additive = cfg.attnres_sources != "outputs"
    for block, size in enumerate(cfg.attnres_block_sizes):
        counts += [block + 1 + (k > 0 and not additive) for k in range(size)]
    if additive:
        counts = counts[1:]
    else:
        counts.append(len(cfg.attnres_block_sizes) + 1)  # the output site: every summary
    window = cfg.attnres_window
    return [min(s, window + 1) for s in counts] if window else counts


def _attnres_flops(cfg: ModelConfig) -> int:
    """AttnRes, per site: each source's logit, H full-width queries against the d-wide key (none
    with scalar logits), and the weighted sum of the sources (H groups of d/H channels: 2d per
    source); with input-dependent queries, also the site's d x Hd query projection."""
    d, heads = cfg.d_model, cfg.attnres_heads
    sources = attnres_sources(cfg)
    logit = 0 if cfg.attnres_query == "scalar" else 2 * heads * d
    projection = 2 * _query_projection(cfg)
    return TRAIN * sum(logit * s + weighted_sum(s, d) + projection for s in sources)


def _query_projection(cfg: ModelConfig) -> int:
    """An input-dependent query's projection weights per site (its multiply-adds per token):
    d x H d, or low rank r x d then H d x r; none for a static query or scalar logits."""
    d, hd, r = cfg.d_model, cfg.attnres_heads * cfg.d_model, cfg.attnres_query_rank
    if cfg.attnres_query in ("static", "scalar"):
        return 0
    return r * (d + hd) if cfg.attnres_query == "low_rank" else hd * d


def _read_and_mix(cfg: ModelConfig) -> int:
    """Per site, the read and the stream mix: one (n + 1) x n map applied to the n x d streams."""
    n = cfg.hc_streams
    return 2 * (n + 1) * n * cfg.d_model


def _hyper_flops(cfg: ModelConfig) -> int:
    """Hyper-Connections: the read and mix per site; dynamic, also Norm(H) (n x d) times W_m (d),
    W_r (d x n) and W_b (d)."""
    n, d = cfg.hc_streams, cfg.d_model
    dynamic = 2 * n * d * (n + 2) if cfg.hc_dynamic else 0
    return TRAIN * cfg.n_sublayers * (_read_and_mix(cfg) + dynamic)


def _mhc_flops(cfg: ModelConfig) -> int:
    """mHC: the flattened stream (n d) times the three maps' columns (n + n + n^2), the read and
    mix; Sinkhorn's normalizations are reductions."""
    n, d = cfg.hc_streams, cfg.d_model
    maps = 2 * n * d * (2 * n + n * n)
    return TRAIN * cfg.n_sublayers * (maps + _read_and_mix(cfg))


def _mhc_lite_flops(cfg: ModelConfig) -> int:
    """mHC-lite: mHC's products with n! mixing columns, and H_res = sum_k a_k P_k, the n! weights
    times the constant (n! x n^2) permutation matrices (2x: only the weights need a gradient)."""
    n, d = cfg.hc_streams, cfg.d_model
    perms = math.factorial(n)
    maps = 2 * n * d * (2 * n + perms)
    mix = TRAIN_CONST * 2 * perms * n * n
    return cfg.n_sublayers * (TRAIN * (maps + _read_and_mix(cfg)) + mix)


def _denseformer_flops(cfg: ModelConfig) -> int:
    """DenseFormer: after each block i with p | i, the weighted sum of floor(i/k) + 1 outputs."""
    k, p = cfg.dense_dilation, cfg.dense_period
    return TRAIN * sum(weighted_sum(i // k + 1, cfg.d_model) for i in range(p, cfg.n_layers + 1, p))


def _laurel_lr_flops(cfg: ModelConfig) -> int:
    """x A B at each of the 2L sites: (d x r) then (r x d)."""
    return TRAIN * cfg.n_sublayers * 2 * 2 * cfg.d_model * cfg.laurel_rank


# MUDDFormer's shape, read by trainers/residual/mudd.py too: the streams its aggregations build
# (the order of the generated weights' stream axis) and the last aggregation's hidden width, in
# multiples of its output width (the reference's ``expand_last``).
MUDD_STREAMS = ("q", "k", "v", "r")
MUDD_LAST_BLOCK_EXPAND = 4


def mudd_shape(cfg: ModelConfig, block: int) -> tuple[int, int, int]:
    """(streams C, sources S, hidden width) of the aggregation after block ``block``: C = 4 and
    hidden C S, except after the last block, R alone with hidden 4 S."""
    last = block == cfg.n_layers - 1
    streams = 1 if last else len(MUDD_STREAMS)
    sources = block + 2
    return streams, sources, streams * sources * (MUDD_LAST_BLOCK_EXPAND if last else 1)


def _mudd_flops(cfg: ModelConfig) -> int:
    """MUDDFormer, after block i: the generator's two products, d x (C S e) and (C S e) x (C S),
    and the C weighted sums of S outputs."""
    d, total = cfg.d_model, 0
    for i in range(cfg.n_layers):
        streams, sources, hidden = mudd_shape(cfg, i)
        weights = streams * sources
        total += 2 * d * hidden + 2 * hidden * weights + streams * weighted_sum(sources, d)
    return TRAIN * total


# ---- parameter formulas ---------------------------------------------------------------------


def _nothing(cfg: ModelConfig) -> int:
    """No parameters added."""
    return 0


def _norm_params(cfg: ModelConfig) -> int:
    """Parameters of one norm of width d: a gain (RMSNorm), a gain and a bias (LayerNorm)."""
    return cfg.d_model * (2 if cfg.norm == "layernorm" else 1)


# The input-dependent query forms (trainers.residual.attnres.depth_mixing.QUERY_FORMS, which a test
# holds these to), and those that add the static query.
INPUT_QUERIES = ("input", "input_sqrt_d", "input_d", "static_input", "low_rank", "gated")
_STATIC_PLUS_INPUT = ("static_input", "low_rank", "gated")


def _attnres_params(cfg: ModelConfig) -> int:
    """Per site (2L + 1; 2L - 1 with additive routing): a query of H d, or a d x H d projection,
    and a key gain of d unless the keys are raw; or, with scalar logits, one per source position
    (2L + 1 Full, N + 1 Block; additive: 2L, N)."""
    d, heads = cfg.d_model, cfg.attnres_heads
    sites = len(attnres_sources(cfg))  # 2L + 1; 2L - 1 with additive routing
    if cfg.attnres_query == "scalar":
        blocks = len(cfg.attnres_block_sizes)
        return sites * heads * (blocks + (cfg.attnres_sources == "outputs"))
    static = heads * d if cfg.attnres_query in ("static", *_STATIC_PLUS_INPUT) else 0
    gate = heads if cfg.attnres_query == "gated" else 0
    gain = d if cfg.attnres_key_norm == "rmsnorm" else 0
    return sites * (static + _query_projection(cfg) + gate + gain)


def _hyper_params(cfg: ModelConfig) -> int:
    """Per site: A_m (n), A_r (n^2), B (n); dynamic, also W_m, W_b (d each), W_r (d x n), two
    scales and the norm on the streams."""
    n, d = cfg.hc_streams, cfg.d_model
    dynamic = (n + 2) * d + 2 + _norm_params(cfg) if cfg.hc_dynamic else 0
    return cfg.n_sublayers * (n * n + 2 * n + dynamic)


def _mhc_params(cfg: ModelConfig) -> int:
    """Per site: W_pre, W_post (n d x n), W_res (n d x n^2), three gains, b_pre, b_post, b_res."""
    n, d = cfg.hc_streams, cfg.d_model
    return cfg.n_sublayers * (n * d * (2 * n + n * n) + 3 + 2 * n + n * n)


def _mhc_lite_params(cfg: ModelConfig) -> int:
    """mHC's with n! mixing weights for n^2: W_res (n d x n!) and b_res (n!)."""
    n, d, perms = cfg.hc_streams, cfg.d_model, math.factorial(cfg.hc_streams)
    return cfg.n_sublayers * (n * d * (2 * n + perms) + 2 * n + perms + 3)


def _denseformer_params(cfg: ModelConfig) -> int:
    """A weight per source of each average: floor(i/k) + 1 after each block i with p | i."""
    k, p = cfg.dense_dilation, cfg.dense_period
    return sum(i // k + 1 for i in range(p, cfg.n_layers + 1, p))


def _mudd_params(cfg: ModelConfig) -> int:
    """Per aggregation W_1 (d x hidden), W_2 (hidden x C S) and a (C S); N_K, N_V per block > 0."""
    total = 0
    for i in range(cfg.n_layers):
        streams, sources, hidden = mudd_shape(cfg, i)
        total += (cfg.d_model + streams * sources) * hidden + streams * sources
    return total + 2 * (cfg.n_layers - 1) * _norm_params(cfg)


# ---- the entries --------------------------------------------------------------------------------


def _d_model(cfg: ModelConfig) -> float:
    return cfg.d_model


def _d_model_int(cfg: ModelConfig) -> int:
    """One d-wide vector per token: a scaled branch output."""
    return cfg.d_model


def _n_layers(cfg: ModelConfig) -> float:
    return cfg.n_layers


def _n_sublayers(cfg: ModelConfig) -> float:
    return cfg.n_sublayers


_SWITCH_FIELDS = (
    Owned(field="attnres_key_norm"),
    Owned(field="attnres_gate"),
    Owned(field="attnres_query"),
    Owned(field="attnres_heads"),
    Owned(field="attnres_window", low=0, high=2 * MAX_LAYERS + 1),
    Owned(field="attnres_sources"),
    Owned(field="attnres_query_rank", low=1, high=_d_model),
    Owned(field="attnres_query_lr"),
)
# Hyper-Connections', mHC's and mHC-lite's streams; mHC-lite learns one weight per permutation of
# them, n! (120 at n = 5, 720 at 6).
_HC_STREAMS = Owned(field="hc_streams", low=1, high=64, kept=True)
MHC_LITE_MAX_STREAMS = 5
_ATTNRES = "Kimi Team 2026, arXiv 2603.15031"
_ATTNRES_FLOPS = (
    "3 · Σ_sites (2Hd · S + 2d · S + 2Hd² with `attnres_query` input; no logits with scalar)"
)

# Why each wiring has the placements it has:
# - AttnRes mixes sources with weights that sum to one, which is the residual sum's function only
#   when the sublayer normalizes its input (pre, sandwich).
# - ReZero is defined without norms (its paper) and, as a common variant, with pre-norm; the
#   one-alpha-per-block form (its official code) likewise.
# - DeepNorm is post-norm by definition (x <- LN(alpha*x + F(x))).
# - Hyper-Connections, mHC and mHC-lite widen a pre-norm stream; their init reproduces pre-norm.
# - DenseFormer averages block outputs, whatever the block's own norms are.
# - Mix-LN (placement "mix") is a standard-residual schedule of post- then pre-norm blocks.
# - LAuReL reweights (RW) or augments (LR) a residual connection; its paper's LLMs are pre-norm,
#   and at init both are pre-norm's plain residual.
# - MUDDFormer feeds each attention separately normed query, key and value inputs and a residual
#   stream, pre-norm in its paper and code; its init reproduces pre-norm.
# - LayerScale scales each branch of a pre-norm block (CaiT's blocks are pre-norm).
WIRINGS: tuple[Wiring, ...] = (
    Wiring(
        name="standard",
        placements=("pre", "post", "sandwich", "mix", "none"),
        paper="He et al. 2016; Vaswani et al. 2017",
        summary="x ← x + f(x)",
        params=_nothing,
        # pre-norm is the wiring the µP / Depth-µP / CompleteP rules are published for
        parametrizations=ALL_PARAMETRIZATIONS,
        arms=(
            _arm("standard"),
            _arm("post", placement="post"),
            _arm("sandwich", placement="sandwich"),
            _arm("mix_ln", placement="mix"),
            _arm("lns", norm_scaling="lns"),
        ),
    ),
    Wiring(
        name="rezero",
        placements=("pre", "none"),
        paper="Bachlechner et al. 2020, arXiv 2003.04887",
        summary="x ← x + α·f(x), one scalar α per sublayer, α = 0 at init (the paper's form "
        "is without norms)",
        params=lambda cfg: cfg.n_sublayers,
        params_text="2L",
        site_keeps=_d_model_int,
        arms=(
            _arm("rezero", residual="rezero", placement="none"),
            _arm("rezero_pre", residual="rezero"),
        ),
    ),
    Wiring(
        name="rezero_shared",
        placements=("pre", "none"),
        paper="Bachlechner et al. 2020, arXiv 2003.04887; code github.com/majumderb/rezero",
        summary="x ← x + α_b·f(x), one scalar α_b per block shared by its attention and its MLP "
        "(the official code's form), α = 0 at init",
        params=lambda cfg: cfg.n_layers,
        params_text="L",
        site_keeps=_d_model_int,
        arms=(_arm("rezero_shared", residual="rezero_shared", placement="none"),),
    ),
    Wiring(
        name="deepnorm",
        placements=("post",),
        paper_norm="layernorm",  # DeepNet's x <- LN(alpha*x + f(x)) is a LayerNorm
        paper="Wang et al. 2022, arXiv 2203.00555 (decoder-only constants)",
        summary="x ← LN(α·x + f(x)), α = (2L)^¼; Xavier-normal init with gain β = (8L)^−¼ on the "
        "value, attention-output and both MLP projections (gain 1 on query and key); LN is "
        "`model.norm` (see below)",
        params=_nothing,
        arms=(_arm("deepnorm", residual="deepnorm", placement="post"),),
    ),
    Wiring(
        name="attnres",
        placements=("pre", "sandwich"),
        paper=_ATTNRES,
        summary="Full AttnRes: x_j = Σ_i softmax_i(w_j·RMSNorm_{g_j}(y_i)) y_i over the embedding "
        "and every earlier sublayer output; an output site mixes all before the final norm",
        owns=_SWITCH_FIELDS,
        flops=_attnres_flops,
        flops_text=_ATTNRES_FLOPS,
        params=_attnres_params,
        params_text="(4L + 2)·d (design switches: below)",
        arms=(_arm("attnres", residual="attnres"),),
        parametrizations=WIDTH_ONLY,
        coordcheck_fails=(("depth_mup", _STARVED), ("completep", _STARVED)),
    ),
    Wiring(
        name="block_attnres",
        placements=("pre", "sandwich"),
        paper="Kimi Team 2026",
        summary="Block AttnRes: plain sums inside `attnres_blocks` = N balanced blocks of "
        "sublayers (S = 2L/N each when N divides 2L; see below otherwise), the same softmax "
        "across the block summaries and the current partial sum",
        owns=(Owned(field="attnres_blocks", low=1, high=_n_sublayers, kept=True), *_SWITCH_FIELDS),
        label=(LabelPart(template="N={}", fields=("attnres_blocks",), whole=False, lead=True),),
        flops=_attnres_flops,
        flops_text=_ATTNRES_FLOPS,
        params=_attnres_params,
        params_text="(4L + 2)·d",
        arms=(_arm("block_attnres", residual="block_attnres"),),
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Wiring(
        name="hyper",
        placements=("pre", "sandwich"),
        paper="Zhu et al. 2024, arXiv 2409.19606",
        summary="Hyper-Connections: n copies H; h = A_mᵀH, H ← A_rᵀH + B⊗f(h); static init A_m "
        "one-hot at (sublayer mod n), A_r = I, B = 1; with `hc_dynamic`, each map adds "
        "s·tanh(Norm(H)W) (W = 0, s = 0.01 at init); output = Σ copies",
        owns=(_HC_STREAMS, Owned(field="hc_dynamic", kept=True)),
        flops=_hyper_flops,
        flops_text="3 · 2L · 2n(n + 1)d (read and mix); dynamic + 3 · 2L · 2nd(n + 2)",
        params=_hyper_params,
        params_text="static 2L·(n² + 2n); dynamic 2L·(n² + 2n + (n + 3)·d + 2) with an RMSNorm "
        "(LayerNorm: one more d)",
        arms=(
            _arm("hyper", residual="hyper"),
            _arm("hyper_dynamic", residual="hyper", hc_dynamic=True),
        ),
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Wiring(
        name="mhc",
        placements=("pre", "sandwich"),
        paper="Xie et al. 2025, arXiv 2512.24880",
        summary="mHC: X ← H_res X + H_postᵀ f(H_pre X); maps from the RMS-normalized flattened "
        "n·d stream, α·(x̃W) + b with α = 0.01 and W = 0 at init; H_pre = σ(·), H_post = 2σ(·), "
        "H_res = Sinkhorn–Knopp(exp(·)), `mhc_sinkhorn_iters` = 20",
        owns=(_HC_STREAMS, Owned(field="mhc_sinkhorn_iters", low=1, high=1000, kept=True)),
        flops=_mhc_flops,
        flops_text="3 · 2L · (2nd(2n + n²) + 2n(n + 1)d); Sinkhorn's normalizations are sums",
        params=_mhc_params,
        params_text="2L·(n²d(n + 2) + n² + 2n + 3)",
        arms=(_arm("mhc", residual="mhc"),),
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Wiring(
        name="mhc_lite",
        placements=("pre", "sandwich"),
        paper='Yang & Gao 2026, arXiv 2601.05732 (the "mHC" column of AttnRes\'s Table 2)',
        summary="mHC-lite: mHC with H_res = Σ_k a_k P_k over the n! permutation matrices P_k, "
        "a = softmax(α·(x̃W_res) + b_res) per token (W_res: n·d × n!), exactly doubly "
        "stochastic, no Sinkhorn; H_pre, H_post as `mhc`; b_res = 0 on the identity and −8 "
        "elsewhere; n = `hc_streams` ≤ 5",
        owns=(
            Owned(
                field="hc_streams",
                low=1,
                high=MHC_LITE_MAX_STREAMS,
                kept=True,
                why="residual 'mhc_lite' learns a weight per permutation of the streams, n!",
            ),
        ),
        flops=_mhc_lite_flops,
        flops_text="2L · (3 · (2nd(2n + n!) + 2n(n + 1)d) + 2 · 2n!n²) (the permutation "
        "matrices are constants)",
        params=_mhc_lite_params,
        params_text="2L·(nd(2n + n!) + 2n + n! + 3)",
        arms=(_arm("mhc_lite", residual="mhc_lite"),),
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Wiring(
        name="denseformer",
        placements=("pre", "post", "sandwich", "none"),
        paper="Pagliardini et al. 2024, arXiv 2402.02622 (k×p: §3.2–3.3)",
        summary="after block i (1-based): Y_i = Σ_j α_{i,j} X_j over the embedding X_0 and the "
        "block outputs X_j, j ≤ i, free scalars, identity at init (α_{i,i} = 1). k×p DenseFormer "
        "(`dense_dilation` = k, `dense_period` = p, both 1 by default): an average only after "
        "the blocks i ≡ 0 (mod p), over the X_j with j ≡ i (mod k); other blocks pass X_i on",
        owns=(
            Owned(field="dense_dilation", low=1, high=_n_layers),
            Owned(field="dense_period", low=1, high=_n_layers),
        ),
        # k x p unless the full 1 x 1 (a record from before these fields ran 1 x 1)
        label=(
            LabelPart(
                template="{}x{}", fields=("dense_dilation", "dense_period"), hide_at_default=True
            ),
        ),
        flops=_denseformer_flops,
        flops_text="3 · Σ_{i = p, 2p, … ≤ L} 2(⌊i/k⌋ + 1)d",
        params=_denseformer_params,
        params_text="Σ_{i = p, 2p, … ≤ L} (⌊i/k⌋ + 1); L(L + 3)/2 at 1×1",
        arms=(
            _arm("denseformer", residual="denseformer"),
            _arm("denseformer_2x2", residual="denseformer", dense_dilation=2, dense_period=2),
        ),
        parametrizations=("sp", "mup", "depth_mup"),
        coordcheck_fails=(("completep", _DENSE_ALPHA_1),),
    ),
    Wiring(
        name="laurel_rw",
        placements=("pre",),
        paper="Menghani, Kumar & Kumar 2025, arXiv 2411.07501 (§2.1)",
        summary="LAuReL-RW: x ← α·f(x) + β·x, (α, β) = 2·softmax(a, b) per sublayer, a = b = 0 "
        "at init (α = β = 1)",
        params=lambda cfg: 2 * cfg.n_sublayers,
        params_text="4L",
        site_keeps=_d_model_int,
        arms=(_arm("laurel_rw", residual="laurel_rw"),),
    ),
    Wiring(
        name="laurel_lr",
        placements=("pre",),
        paper="Menghani, Kumar & Kumar 2025, arXiv 2411.07501 (§2.2, eq. 3; init §3.3)",
        summary="LAuReL-LR: x ← f(x) + x + x·A·B per sublayer (row vectors; the paper's B·A·x), "
        "A ∈ ℝ^{d×r}, B ∈ ℝ^{r×d}, r = `laurel_rank` (16); A column-orthogonal "
        "(A_{ij} = 1/√(rd) where i mod r = j), B = 0 at init",
        owns=(Owned(field="laurel_rank", low=1, high=_d_model),),
        # the rank always (a record from before the field ran r = 16)
        label=(LabelPart(template="r={}", fields=("laurel_rank",)),),
        flops=_laurel_lr_flops,
        flops_text="3 · 2L · 4dr",
        params=lambda cfg: cfg.n_sublayers * 2 * cfg.d_model * cfg.laurel_rank,
        params_text="4L·r·d",
        site_keeps=lambda cfg: cfg.laurel_rank,  # x·A, the rank-r projection
        site_casts=_d_model_int,  # x·A reads the raw stream, not a normed copy
        arms=(_arm("laurel_lr", residual="laurel_lr"),),
    ),
    Wiring(
        name="mudd",
        placements=("pre",),
        paper="Xiao et al. 2025, arXiv 2502.12170 (reference code Caiyun-AI/MUDDFormer)",
        summary="MUDDFormer: after block i, A = GELU(RMSNorm(X_i)W_1)W_2 + a per token (RMSNorm "
        "without gain), and four streams X^c = Σ_j A[c, j] X_j over the embedding X_0 and the "
        "block outputs, c ∈ {Q, K, V, R}; block i + 1 computes h = X^R + Attn(N_Q(X^Q), "
        "N_K(X^K), N_V(X^V)), X_{i+1} = h + MLP(N(h)); W_1 ~ N(0, 1/d), W_2 = 0, a one-hot on "
        "X_i at init (pre-norm's function); hidden width C·S (S = i + 2 sources, C = 4 "
        "streams); after the last block R only (C = 1) with hidden 4S",
        flops=_mudd_flops,
        flops_text="3 · Σ_{i < L} (2d · CSe + 2CSe · CS + 2CSd), S = i + 2, C = 4 and e = 1 (the "
        "last block: C = 1, e = 4)",
        params=_mudd_params,
        params_text="Σ_{S=2}^{L} 4S(d + 4S + 1) + (L + 1)(4d + 4L + 5) + 2(L − 1)·d (RMSNorm; "
        "LayerNorm: 2d per norm)",
        arms=(_arm("mudd", residual="mudd"),),
    ),
    Wiring(
        name="layerscale",
        placements=("pre",),
        paper='Touvron et al. 2021, "Going deeper with Image Transformers" (CaiT), arXiv '
        "2103.17239 (§2, eq. 3)",
        summary="LayerScale: x ← x + diag(λ)·f(x), λ ∈ ℝ^d learned per sublayer, every entry ε "
        "at init: 0.1 up to L = 18 blocks, 10⁻⁵ up to 24 (the paper names 24 only), 10⁻⁶ deeper",
        params=lambda cfg: cfg.n_sublayers * cfg.d_model,
        params_text="2L·d",
        site_keeps=_d_model_int,
        arms=(_arm("layerscale", residual="layerscale"),),
    ),
)

PLACEMENTS: tuple[Placement, ...] = (
    Placement(
        name="pre",
        input_norm=True,
        paper="Xiong et al. 2020",
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Placement(name="post", input_norm=False, paper="Vaswani et al. 2017"),
    Placement(
        name="sandwich",
        input_norm=True,
        paper="Ding et al. 2021; Kim et al. 2025, arXiv 2502.02732",
    ),
    Placement(
        name="mix",
        input_norm=False,  # its first blocks are post-norm
        paper="Li, Yin & Liu 2024, arXiv 2412.13795",
        owns=(Owned(field="mix_ln_alpha", low=0.0, high=1.0, kept=True),),
    ),
    Placement(name="none", input_norm=False, paper=""),
)

ATTENTIONS: tuple[Attention, ...] = (
    Attention(
        name="standard",
        paper="Vaswani et al. 2017",
        summary="U_n = A_n V_n",
        params=_nothing,
        parametrizations=ALL_PARAMETRIZATIONS,
    ),
    Attention(
        name="value_residual",
        paper='Zhou et al. 2024, "Value Residual Learning", arXiv 2410.17897 (the paper\'s '
        "main form and its official code)",
        summary="ResFormer: U_n = A_n (½·V_1 + ½·V_n) for blocks n ≥ 2; V_1 = block 1's values "
        "(after its value projection); A_n is block n's own attention",
        label=(LabelPart(template="value_residual", fields=()),),
        params=_nothing,
        arms=(_arm("value_residual", attention="value_residual"),),
    ),
    Attention(
        name="value_residual_learned",
        paper="the paper's learnable variant (Learnable-ResFormer)",
        summary="the same with λ_{n,1}·V_1 + λ_{n,2}·V_n, two learned scalars per block n ≥ 2, "
        "initialized at the fixed form's ½, ½ (not weight-decayed)",
        label=(LabelPart(template="value_residual_learned", fields=()),),
        params=lambda cfg: 2 * (cfg.n_layers - 1),
        params_text="2(L − 1)",
        arms=(_arm("value_residual_learned", attention="value_residual_learned"),),
    ),
)

# The wirings whose depth softmax the fused kernels (flash-attn-res:
# trainers.residual.attnres.fused) compute, and the switch values they compute: the paper's
# design only; any other value changes what a site computes.
FUSED_RESIDUALS = ("attnres", "block_attnres")
FUSED_SWITCHES: tuple[tuple[str, object], ...] = (
    ("attnres_sources", "outputs"),
    ("attnres_query", "static"),
    ("attnres_key_norm", "rmsnorm"),
    ("attnres_gate", "softmax"),
    ("attnres_heads", 1),
    ("attnres_window", 0),
)


def fused_computes(cfg: ModelConfig) -> bool:
    """Whether the fused kernels compute ``cfg``'s depth softmax (a model configuration): its
    wiring and every switch at the kernels' value; device and dtype are the dispatch's."""
    if cfg.residual not in FUSED_RESIDUALS:
        return False
    return all(getattr(cfg, name) == value for name, value in FUSED_SWITCHES)


SWITCHES: tuple[Switch, ...] = (
    Switch(field="attnres_key_norm", short="key_norm", paper="Table 4: w/o key RMSNorm"),
    Switch(field="attnres_gate", short="gate", paper="Table 4: sigmoid instead of softmax"),
    Switch(field="attnres_query", short="query", paper="Table 4: input-dependent query / mixing"),
    Switch(
        field="attnres_query_rank",
        short="query_rank",
        paper="the rank of a low-rank input-dependent query (issue 27: not the paper's)",
    ),
    Switch(
        field="attnres_query_lr",
        short="query_lr",
        paper="a learning-rate multiplier on the input-dependent query's own parameters",
    ),
    Switch(field="attnres_heads", short="heads", paper="Table 4: multi-head depth attention"),
    Switch(field="attnres_window", short="window", paper="Table 4: sliding window"),
    Switch(
        field="attnres_sources",
        short="sources",
        paper="Delta AttnRes (Luo, Cai & Hu 2026, arXiv 2605.18855): additive routing over "
        "deltas or cumulative states",
    ),
)


# The arm every other is compared with in its context (the report's baseline, the pairs that
# size an auto-seeds sweep): plain pre-norm, standard attention, no norm scaling; as the
# record's dotted params spell its fields.
BASELINE = {
    "model.residual": "standard",
    "model.placement": "pre",
    "model.norm_scaling": "none",
    "model.attention": "standard",
}


def is_baseline(value: Callable[[str], object]) -> bool:
    """Whether the configuration whose dotted fields ``value`` reads is ``BASELINE``."""
    return all(str(value(key)) == wanted for key, wanted in BASELINE.items())


def wiring(name: str) -> Wiring:
    """The catalogue entry of residual ``name`` (a ``KeyError`` names an unknown one)."""
    return {w.name: w for w in WIRINGS}[name]


def attention(name: str) -> Attention:
    """The catalogue entry of attention variant ``name``."""
    return {a.name: a for a in ATTENTIONS}[name]


def placement(name: str) -> Placement:
    """The catalogue entry of placement ``name``."""
    return {p.name: p for p in PLACEMENTS}[name]


def parametrization_refusal(cfg: ModelConfig) -> str:
    """The one line refusing ``cfg``'s parametrization with an axis its entry is not checked
    with ("" when every axis is): what is unchecked, and what is checked with it."""
    p = cfg.parametrization
    entries = (
        ("residual", wiring(cfg.residual)),
        ("placement", placement(cfg.placement)),
        ("attention", attention(cfg.attention)),
    )
    for axis, entry in entries:
        failed = dict(entry.coordcheck_fails).get(p)
        if failed:
            return (
                f"model.parametrization: {p!r} with {axis} {entry.name!r} fails the coord check "
                f"({failed}); allowed with it: {', '.join(entry.parametrizations)}"
            )
        if p not in entry.parametrizations:
            return _unchecked(p, f"{axis} {entry.name!r}")
    if p != "sp" and cfg.norm_scaling not in PARAMETRIZED_NORM_SCALINGS:
        return _unchecked(p, f"norm_scaling {cfg.norm_scaling!r}")
    return ""


def _unchecked(parametrization: str, what: str) -> str:
    checked = {
        axis: [e.name for e in group if parametrization in e.parametrizations]
        for axis, group in (
            ("residual", WIRINGS),
            ("placement", PLACEMENTS),
            ("attention", ATTENTIONS),
        )
    }
    allowed = "; ".join(f"{axis} {', '.join(names)}" for axis, names in checked.items())
    return (
        f"model.parametrization: {parametrization!r} with {what} is not yet checked by a coord "
        f"check (nas coordcheck); checked with it: {allowed}; norm_scaling "
        f"{', '.join(PARAMETRIZED_NORM_SCALINGS)}"
    )


def switch_owners() -> tuple[str, ...]:
    """The wirings that read the AttnRes design switches (every one of them)."""
    fields = {s.field for s in SWITCHES}
    return tuple(w.name for w in WIRINGS if fields <= {o.field for o in w.owns})


def owners() -> dict[str, tuple[str, ...]]:
    """Owned field -> the residuals, placements or attention variants that read it, in
    catalogue order (wirings first)."""
    out: dict[str, tuple[str, ...]] = {}
    for entry in (*WIRINGS, *PLACEMENTS, *ATTENTIONS):
        for owned in entry.owns:
            out[owned.field] = (*out.get(owned.field, ()), entry.name)
    return out


def refused_unread() -> tuple[str, ...]:
    """The owned fields a configuration that does not read them refuses away from their
    default (every one not ``kept``), once each, in catalogue order."""
    refused = {o.field: None for e in (*WIRINGS, *PLACEMENTS, *ATTENTIONS) for o in e.owns}
    kept = {o.field for e in (*WIRINGS, *PLACEMENTS, *ATTENTIONS) for o in e.owns if o.kept}
    return tuple(name for name in refused if name not in kept)


def entries(cfg: ModelConfig) -> tuple[Entry, ...]:
    """The catalogue entries a configuration is built of: its residual, placement, attention."""
    return wiring(cfg.residual), placement(cfg.placement), attention(cfg.attention)


def names(group: Sequence[Entry]) -> tuple[str, ...]:
    """The names of a group of entries (``WIRINGS``...), in catalogue order: the values its config
    field accepts."""
    return tuple(e.name for e in group)


def wiring_fields() -> tuple[str, ...]:
    """The config fields that make a wiring: the axes, then every owned field (once)."""
    return (*AXES, *owners())


def wiring_keys() -> tuple[str, ...]:
    """``wiring_fields`` as the record's dotted params spell them (``model.<field>``)."""
    return tuple(f"model.{name}" for name in wiring_fields())


def arms() -> dict[str, dict[str, object]]:
    """Every entry's benchmark arms, by name, in catalogue order."""
    return {a.name: a.settings for e in (*WIRINGS, *ATTENTIONS) for a in e.arms}


# ---- the docs' tables (docs/variants.md carries them; a test holds the two equal) -------------


# trainers.flops' count of what an entry adds (docs/report.md, "Compute", gives the convention).
_FLOPS_COLUMN = "extra training FLOPs per token"


def _row(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    return "\n".join([_row(header), _row(tuple("---" for _ in header)), *map(_row, rows)])


def wirings_markdown() -> str:
    """The residual wirings table of ``docs/variants.md``."""
    rows = [
        (f"`{w.name}`", w.summary, w.paper, ", ".join(w.placements), w.params_text, w.flops_text)
        for w in WIRINGS
    ]
    header = ("name", "update", "paper", "placements", "extra parameters", _FLOPS_COLUMN)
    return _table(header, rows)


def attentions_markdown() -> str:
    """The attention variants table of ``docs/variants.md``."""
    rows = [
        (f"`{a.name}`", a.summary, a.paper, "every wiring", a.params_text, a.flops_text)
        for a in ATTENTIONS
    ]
    header = ("name", "update", "paper", "valid with", "extra parameters", _FLOPS_COLUMN)
    return _table(header, rows)


def parametrizations_markdown() -> str:
    """The parametrization x residual table of ``docs/variants.md``: where each runs, where the
    coord check fails it (refused, with the reason), where it is not yet checked (refused)."""

    def cell(w: Wiring, p: str) -> str:
        failed = dict(w.coordcheck_fails).get(p)
        if failed:
            return f"refused: fails the coord check ({failed})"
        return "yes" if p in w.parametrizations else "refused: not yet checked"

    rows = [(f"`{w.name}`", *(cell(w, p) for p in ALL_PARAMETRIZATIONS)) for w in WIRINGS]
    return _table(("residual", *(f"`{p}`" for p in ALL_PARAMETRIZATIONS)), rows)
