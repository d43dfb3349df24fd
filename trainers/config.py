"""Typed, frozen, validated configuration: one field per architecture or training choice.

Each closed set is a ``Literal`` whose values are registry keys (``trainers.model.norms``,
``trainers.residual.attnres.depth_mixing``, ``trainers.data``); a test keeps them in sync. The
residual wiring, the norm placement and the attention variant are the catalogue's entries
(``trainers.catalogue``): their fields accept the catalogue's names, and what each entry is (its
placements, the fields it owns, their bounds and whether an unread one is refused) is read from it.
This module imports no torch so that search spaces, the CLI and the reports can validate and read
configurations cheaply.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from stats.saturation import COLLAPSED_SHARE, SATURATED
from trainers import catalogue
from trainers.identity import refusal, unread_fields

# The residual wirings, norm placements and attention variants are the catalogue's entries,
# named once there: their fields are typed ``str`` (a Literal cannot be computed from the catalogue
# and still be read by mypy), checked against these names at construction, and listed by
# ``nas train --help`` and the type errors through the field's ``choices``.
RESIDUAL_NAMES: tuple[str, ...] = catalogue.names(catalogue.WIRINGS)
PLACEMENT_NAMES: tuple[str, ...] = catalogue.names(catalogue.PLACEMENTS)
NormName = Literal["layernorm", "rmsnorm"]
NormScaling = Literal["none", "lns"]
# Attention variants (registry keys in trainers.attention): what happens inside every attention.
ATTENTION_NAMES: tuple[str, ...] = catalogue.names(catalogue.ATTENTIONS)
PositionName = Literal["learned", "rope"]
# AttnRes design switches (the paper's Table 4); registry keys in
# trainers.residual.attnres.depth_mixing.
KeyNormName = Literal["rmsnorm", "none"]
GateName = Literal["softmax", "sigmoid"]
QueryName = Literal[
    "static", "input", "input_sqrt_d", "input_d", "static_input", "low_rank", "gated", "scalar"
]
# What AttnRes routes (trainers.residual.attnres.delta): the paper's replacement over sublayer
# outputs, or Delta AttnRes's additive routing over deltas or over cumulative states.
SourcesName = Literal["outputs", "deltas", "cumulative"]
# How width and depth scale the init, the forward multipliers and the per-group AdamW settings
# (trainers.model.parametrization); every one is the standard parametrization at base sizes.
ParametrizationName = Literal["sp", "mup", "depth_mup", "completep"]
DataSource = Literal["stdlib", "text", "tokens", "shards", "synthetic"]
Precision = Literal["auto", "32-true", "64-true", "bf16-mixed", "16-mixed", "bf16-true"]
# What a training step recomputes in its backward instead of keeping from the forward
# (trainers.model.checkpointing): nothing, or each sublayer's branch (norm, attention or MLP, norm).
Checkpointing = Literal["none", "sublayer"]
# Whether training runs the model through torch.compile (trainers.training.run.resolve_compile):
# 'auto' compiles on a GPU, where the depth-mixing wirings' many small kernels cost most eagerly,
# and not on a CPU, where a short trial does not win back the first step's compilation.
Compile = Literal["auto", "true", "false"]
# Which implementation mixes Full and Block AttnRes's depth (trainers.training.paths): the fused
# Triton kernels where the dispatch rule allows them ('auto'), always ('fused': refused where they
# cannot run), or never ('torch'; compiled when train.compile is). The paths compute one function
# but round differently (the kernels store bfloat16), so a campaign can pin one.
DepthPath = Literal["auto", "fused", "torch"]
# Sequences one forward holds on one device: a number (0: the worker's whole share), or 'auto':
# the largest that the memory plan fits on the trial's device with headroom, with activation
# checkpointing only where no micro-batch fits without it (trainers.measure.memory_fit.fit_auto).
AUTO = "auto"
MicroBatch = int | Literal["auto"]

# The validity matrix: the placements each residual type is defined for (each entry of
# trainers.catalogue says why in its module and docs row).
VALID_PLACEMENTS: dict[str, tuple[str, ...]] = {w.name: w.placements for w in catalogue.WIRINGS}
# LayerNorm Scaling scales the norm on a sublayer's input, so it needs one there.
LNS_PLACEMENTS = tuple(p.name for p in catalogue.PLACEMENTS if p.input_norm)

MAX_LAYERS = catalogue.MAX_LAYERS

# train.routing_alarm's default: the top-1 mass above which a token reads one source. Named, so
# that the mixing probe measures at it where no run's setting is at hand (a bare profile).
ROUTING_ALARM = 0.95

# The one rule for a field a configuration does not read (trainers.identity.READERS says who
# reads what): a sweep gives it its default (trainers.identity.normalized), and an explicit
# setting of it is refused with trainers.identity.refusal's line. A ModelConfig itself refuses
# these fields away from their default where they are unread: every owned field its catalogue
# entries do not mark ``kept`` (such as attnres_blocks or hc_streams, which records and
# checkpoints written before the rule hold), and the parametrization's own.
REFUSED_UNREAD: tuple[str, ...] = (
    *catalogue.refused_unread(),
    "base_width",
    "base_depth",
    "depth_alpha",
)


def _help(text: str, default: Any) -> Any:
    return field(default=default, metadata={"help": text})


def _named(text: str, default: str, choices: tuple[str, ...]) -> Any:
    """A field naming a catalogue entry: its help, and the names it accepts."""
    return field(default=default, metadata={"help": text, "choices": choices})


def _choices(section: str, name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(
            f"{section}.{name}: {value!r} is not allowed; choose one of: {', '.join(allowed)}"
        )


def _at_least(section: str, name: str, value: float, low: float) -> None:
    if value < low:
        raise ValueError(f"{section}.{name}: {value!r} is too small; it must be >= {low}")


def _in_range(section: str, name: str, value: float, low: float, high: float) -> None:
    if not low <= value <= high:
        raise ValueError(f"{section}.{name}: {value!r} is out of range; allowed: {low} to {high}")


def _owned_in_range(
    owned: catalogue.Owned, value: Any, low: float | None, high: float | None
) -> None:
    if (low is None or value >= low) and (high is None or value <= high):
        return
    allowed = (
        f"{low} to {high}"
        if low is not None and high is not None
        else f">= {low}"
        if low is not None
        else f"<= {high}"
    )
    why = f" ({owned.why})" if owned.why else ""
    raise ValueError(f"model.{owned.field}: {value!r} is out of range{why}; allowed: {allowed}")


def balanced_partition(n_sublayers: int, n_blocks: int) -> tuple[int, ...]:
    """Block sizes of ``n_sublayers`` split into ``n_blocks`` contiguous blocks whose sizes differ
    by at most one, the longer blocks first (``numpy.array_split``'s rule). When N divides the
    sublayers this is the paper's S = L/N; otherwise the paper puts the remainder in the last
    block, which at L = 12, N = 8 makes blocks of [1, 1, 1, 1, 1, 1, 1, 5]."""
    size, longer = divmod(n_sublayers, n_blocks)
    return tuple(size + 1 if k < longer else size for k in range(n_blocks))


def partition_label(sizes: tuple[int, ...]) -> str:
    """``N = 8 AttnRes blocks of 4 sublayers``, or each size when they differ
    (``N = 8 AttnRes blocks of 2,2,2,2,1,1,1,1 sublayers``): what ``nas spaces`` shows."""
    each = str(sizes[0]) if len(set(sizes)) == 1 else ",".join(map(str, sizes))
    return f"N = {len(sizes)} AttnRes blocks of {each} sublayer{'' if each == '1' else 's'}"


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """The architecture of one decoder-only causal Transformer LM."""

    vocab_size: int = _help("Vocabulary size (256 for byte-level data).", 256)
    d_model: int = _help("Width of the residual stream.", 128)
    n_heads: int = _help("Attention heads; must divide d_model.", 4)
    n_layers: int = _help("Transformer blocks (each: one attention and one MLP sublayer).", 4)
    mlp_ratio: float = _help("MLP hidden width as a multiple of d_model.", 4.0)
    seq_len: int = _help("Maximum sequence length (context) in tokens.", 128)
    dropout: float = _help("Dropout on attention weights and on each sublayer output.", 0.0)
    bias: bool = _help("Biases in linear layers.", False)
    tie_embeddings: bool = _help("Share the token embedding with the LM head.", True)
    pos: PositionName = _help("Positions: 'learned' absolute embeddings or 'rope' rotary.", "rope")
    rope_base: float = _help("Rotary base frequency.", 10000.0)
    residual: str = _named(
        "How sublayer outputs are combined (the residual wiring).", "standard", RESIDUAL_NAMES
    )
    placement: str = _named("Where norms sit around each sublayer.", "pre", PLACEMENT_NAMES)
    attention: str = _named(
        "Attention variant, with any residual wiring: 'standard'; 'value_residual' (ResFormer: "
        "every later attention's values are 1/2 V_1 + 1/2 its own, V_1 the first layer's); "
        "'value_residual_learned' (the same two weights learned per layer, from 1/2).",
        "standard",
        ATTENTION_NAMES,
    )
    norm: NormName = _help("Normalization layer.", "rmsnorm")
    norm_eps: float = _help("Epsilon of every norm (also AttnRes key norms).", 1e-6)
    norm_scaling: NormScaling = _help(
        "'lns': LayerNorm Scaling, the input norm of block l scaled by 1/sqrt(l) (pre, sandwich; "
        "turns scaled_init off).",
        "none",
    )
    attnres_blocks: int = _help(
        "Block AttnRes: the number N of AttnRes blocks (not Transformer blocks) the 2*n_layers "
        "sublayers are split into, balanced (sizes differ by at most one; the first "
        "2*n_layers mod N are the longer).",
        8,
    )
    attnres_key_norm: KeyNormName = _help(
        "attnres, block_attnres: the keys are the sources RMS-normalized with a per-site gain "
        "('rmsnorm', the paper's) or the raw sources ('none').",
        "rmsnorm",
    )
    attnres_gate: GateName = _help(
        "attnres, block_attnres: depth weights are a softmax over the sources ('softmax', the "
        "paper's) or an independent sigmoid per source ('sigmoid', not renormalized).",
        "softmax",
    )
    attnres_query: QueryName = _help(
        "attnres, block_attnres: the query is a learned vector w per site ('static', the "
        "paper's); input-dependent, from the newest source s (RMS-normalized) through a per-site "
        "d x d projection P: P s ('input', unstable: the softmax saturates in warm-up), P s / "
        "sqrt(d) ('input_sqrt_d'), P s / d ('input_d'), w + P s / d ('static_input', Table 4's "
        "row here), w + U V s with U zero at init ('low_rank'), w + g P s / sqrt(d) with a gate g "
        "zero at init ('gated'); or no query and key at all, a learned logit per site and source "
        "('scalar').",
        "static",
    )
    attnres_query_rank: int = _help(
        "attnres, block_attnres with attnres_query 'low_rank': the rank r of U V.", 16
    )
    attnres_query_lr: float = _help(
        "attnres, block_attnres with an input-dependent attnres_query: the learning rate of the "
        "query's own parameters (P, U, V, g) as a multiple of train.lr.",
        1.0,
    )
    attnres_heads: int = _help(
        "attnres, block_attnres: depth weights per channel group; H groups of d_model/H "
        "channels, each with its own query (1: one set of weights, the paper's).",
        1,
    )
    attnres_window: int = _help(
        "attnres, block_attnres: sources each site mixes: 0 all (the paper's), W the "
        "embedding plus the W newest others.",
        0,
    )
    attnres_sources: SourcesName = _help(
        "attnres, block_attnres: what a site routes. 'outputs' (the paper's): x = softmax-"
        "weighted sum of the embedding and the sublayer (Block: block) outputs, no residual "
        "stream. 'deltas' (Delta AttnRes, arXiv 2605.18855): x = h + the softmax-weighted sum of "
        "the embedding and the completed sublayers' (Block: blocks') deltas, h the plain "
        "residual sum. 'cumulative': the same with each delta replaced by the cumulative state "
        "through it (the states the Delta paper says collapse the routing).",
        "outputs",
    )
    hc_streams: int = _help(
        "hyper, mhc, mhc_lite: number of residual streams n (mhc_lite: at most 5, it weights "
        "all n! permutations).",
        4,
    )
    hc_dynamic: bool = _help("hyper: input-dependent (dynamic) connection weights.", False)
    mhc_sinkhorn_iters: int = _help("mhc: Sinkhorn-Knopp iterations for the stream mixing.", 20)
    mix_ln_alpha: float = _help(
        "mix: the first floor(alpha*n_layers) blocks are post-norm, the rest pre-norm.", 0.25
    )
    laurel_rank: int = _help(
        "laurel_lr: rank r of the learned low-rank map B A added on each residual connection "
        "(1 to d_model; 2*r*d_model parameters per sublayer).",
        16,
    )
    dense_dilation: int = _help(
        "denseformer: dilation k; the average after block i reads only the outputs X_j with "
        "j = i mod k (1: every output, the full DenseFormer).",
        1,
    )
    dense_period: int = _help(
        "denseformer: period p; an average only after every p-th block (1: after every block).",
        1,
    )
    init_std: float = _help("Std of the normal init of linear and embedding weights.", 0.02)
    scaled_init: bool = _help(
        "Scale output-projection init by 1/sqrt(2*n_layers) (GPT-2 style); off under 'lns'.", True
    )

    parametrization: ParametrizationName = _help(
        "How width and depth scale init, multipliers and per-group AdamW settings: 'sp' "
        "(standard), 'mup' (width), 'depth_mup' (width and depth, alpha 1/2), 'completep' "
        "(width and depth, alpha = depth_alpha); each is 'sp' at base_width and base_depth.",
        "sp",
    )
    base_width: int = _help(
        "mup, depth_mup, completep: the d_model the others are scaled from (m_w = "
        "d_model/base_width; its head size base_width/n_heads sets the attention scale).",
        128,
    )
    base_depth: int = _help(
        "depth_mup, completep: the n_layers the others are scaled from (m_L = "
        "n_layers/base_depth).",
        4,
    )
    depth_alpha: float = _help(
        "completep: residual branches scaled by m_L^-alpha, alpha in [0.5, 1] (1: CompleteP; "
        "0.5: Depth-muP).",
        1.0,
    )

    def __post_init__(self) -> None:
        s = "model"
        _choices(s, "residual", self.residual, RESIDUAL_NAMES)
        _choices(s, "placement", self.placement, PLACEMENT_NAMES)
        _choices(s, "norm", self.norm, get_args(NormName))
        _choices(s, "pos", self.pos, get_args(PositionName))
        _choices(s, "norm_scaling", self.norm_scaling, get_args(NormScaling))
        _choices(s, "attention", self.attention, ATTENTION_NAMES)
        _at_least(s, "vocab_size", self.vocab_size, 2)
        _at_least(s, "d_model", self.d_model, 1)
        _at_least(s, "n_heads", self.n_heads, 1)
        _in_range(s, "n_layers", self.n_layers, 1, MAX_LAYERS)
        _at_least(s, "seq_len", self.seq_len, 1)
        _in_range(s, "dropout", self.dropout, 0.0, 0.999)
        if self.mlp_ratio <= 0:
            raise ValueError(f"{s}.mlp_ratio: {self.mlp_ratio!r} must be > 0")
        if self.norm_eps <= 0 or self.init_std <= 0 or self.rope_base <= 0:
            raise ValueError(f"{s}: norm_eps, init_std and rope_base must be > 0")
        if self.d_model % self.n_heads:
            divisors = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            raise ValueError(
                f"{s}.n_heads: {self.n_heads} does not divide d_model={self.d_model}; "
                f"allowed: {', '.join(map(str, divisors))}"
            )
        if self.pos == "rope" and self.head_dim % 2:
            raise ValueError(
                f"{s}.pos: 'rope' needs an even head dimension, got d_model/n_heads={self.head_dim}"
            )
        if self.placement not in VALID_PLACEMENTS[self.residual]:
            raise ValueError(
                f"{s}.placement: {self.placement!r} is not defined for residual "
                f"{self.residual!r}; choose one of: {', '.join(VALID_PLACEMENTS[self.residual])}"
            )
        if self.norm_scaling == "lns" and self.placement not in LNS_PLACEMENTS:
            raise ValueError(
                f"{s}.norm_scaling: 'lns' scales the sublayer input norm, which placement "
                f"{self.placement!r} does not have; use placement {' or '.join(LNS_PLACEMENTS)}"
            )
        self._check_attnres_switches()
        self._check_parametrization()
        self._check_unread_fields()

    def _check_parametrization(self) -> None:
        """The parametrization a known one, its base sizes and alpha in range, and every
        wiring axis one whose catalogue entry is checked with it (its coord check)."""
        s = "model"
        _choices(s, "parametrization", self.parametrization, get_args(ParametrizationName))
        _at_least(s, "base_width", self.base_width, 1)
        _at_least(s, "base_depth", self.base_depth, 1)
        _in_range(s, "depth_alpha", self.depth_alpha, 0.5, 1.0)
        problem = catalogue.parametrization_refusal(self)
        if problem:
            raise ValueError(problem)
        routed = self.residual in catalogue.switch_owners() and self.attnres_sources != "outputs"
        if routed and self.parametrization != "sp":
            # The coord check measured AttnRes's replacement routing, not the additive one.
            raise ValueError(
                f"{s}.parametrization: {self.parametrization!r} with attnres_sources "
                f"{self.attnres_sources!r} is not yet checked by a coord check (nas coordcheck); "
                "allowed with it: sp"
            )

    def _check_attnres_switches(self) -> None:
        s = "model"
        _choices(s, "attnres_key_norm", self.attnres_key_norm, get_args(KeyNormName))
        _choices(s, "attnres_gate", self.attnres_gate, get_args(GateName))
        _choices(s, "attnres_query", self.attnres_query, get_args(QueryName))
        _choices(s, "attnres_sources", self.attnres_sources, get_args(SourcesName))
        if not (math.isfinite(self.attnres_query_lr) and self.attnres_query_lr > 0):
            raise ValueError(
                f"{s}.attnres_query_lr: {self.attnres_query_lr} is not allowed; "
                "allowed: a positive finite multiple of train.lr"
            )
        if self.attnres_heads < 1 or self.d_model % self.attnres_heads:
            divisors = [h for h in range(1, self.d_model + 1) if self.d_model % h == 0]
            raise ValueError(
                f"{s}.attnres_heads: {self.attnres_heads} does not divide d_model={self.d_model}; "
                f"allowed: {', '.join(map(str, divisors))}"
            )

    def _check_unread_fields(self) -> None:
        """Each of ``REFUSED_UNREAD`` at its default where it is not read; each field the
        configuration's catalogue entries own within that entry's bounds where it is read."""
        unread = unread_fields(self)
        for name in unread:
            if name in REFUSED_UNREAD and getattr(self, name) != MODEL_DEFAULTS[name]:
                raise ValueError(refusal(self, name))
        for entry in catalogue.entries(self):
            for owned in entry.owns:
                if owned.field not in unread:
                    _owned_in_range(owned, getattr(self, owned.field), *owned.bounds(self))

    @property
    def attnres_switched(self) -> bool:
        """Whether any AttnRes design switch this configuration reads differs from the paper's
        choice (an input-dependent query's own settings are read only with such a query)."""
        unread = unread_fields(self)
        return any(getattr(self, k) != v for k, v in ATTNRES_SWITCHES.items() if k not in unread)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_sublayers(self) -> int:
        """Attention and MLP sublayers in execution order: the AttnRes paper's "layers"."""
        return 2 * self.n_layers

    @property
    def uses_scaled_init(self) -> bool:
        """LayerNorm Scaling turns scaled output-projection init off: its paper reports that the
        two together hurt."""
        return self.scaled_init and self.norm_scaling == "none"

    @property
    def mlp_hidden(self) -> int:
        return max(1, round(self.mlp_ratio * self.d_model))

    @property
    def attnres_block_sizes(self) -> tuple[int, ...]:
        """Sublayers per AttnRes block, in order: Block AttnRes's balanced partition, one
        sublayer per block for Full AttnRes, empty for other wirings."""
        if self.residual == "block_attnres":
            return balanced_partition(self.n_sublayers, self.attnres_blocks)
        if self.residual == "attnres":
            return (1,) * self.n_sublayers
        return ()


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimization and the Lightning Trainer."""

    seed: int = _help("Seed for initialization, data order and dropout.", 0)
    batch_size: int = _help(
        "Sequences per optimizer step: the global batch, over every data-parallel worker.", 16
    )
    micro_batch: MicroBatch = _help(
        "Sequences one forward holds on one device: each worker accumulates its share of the "
        "global batch in micro-batches of this size (0: its whole share at once; 'auto': the "
        "largest the memory plan fits on the trial's device with headroom, checkpointing "
        "every sublayer only where none fits without). How a step runs, not what it trains: "
        "not part of a trial's identity.",
        0,
    )
    checkpointing: Checkpointing = _help(
        "Activation checkpointing: 'sublayer' keeps only each sublayer's inputs and recomputes "
        "its branch (norm, attention or MLP, norm) in the backward, for every wiring; 'none' "
        "keeps everything. Same gradients either way: not part of a trial's identity.",
        "none",
    )
    max_steps: int = _help(
        "Optimizer steps (with target_flops or tokens_per_param: derived from the budget; leave "
        "it at its default).",
        600,
    )
    target_flops: float = _help(
        "Training FLOPs budget (trainers.flops' count, the wiring's included): max_steps = "
        "ceil(target_flops / (FLOPs per token x batch_size x seq_len)), warmup_steps and "
        "val_every scaled from the 600-step schedule (trainers.budget); 0: no budget.",
        0.0,
    )
    tokens_per_param: float = _help(
        "Data-to-parameter ratio: train on this many tokens per weight-matrix parameter of the "
        "sublayers, n_layers (4 d^2 + 2 d h); max_steps derived as for target_flops; 0: none.",
        0.0,
    )
    lr: float = _help("Peak learning rate (AdamW).", 3e-3)
    min_lr_ratio: float = _help("Final learning rate as a fraction of lr (cosine floor).", 0.1)
    warmup_steps: int = _help(
        "Linear warm-up steps before cosine decay (with a budget: of a 600-step run, scaled).", 50
    )
    weight_decay: float = _help("AdamW weight decay (never on norms, biases, gains, queries).", 0.1)
    beta1: float = _help("AdamW beta1.", 0.9)
    beta2: float = _help("AdamW beta2.", 0.95)
    grad_clip: float = _help("Gradient-norm clipping (0 turns it off).", 1.0)
    divergence_factor: float = _help(
        "A training loss above this factor times the lowest smoothed training loss so far, "
        "after warm-up, ends the run as diverged (0 turns this comparison off; a NaN or "
        "infinite loss always ends it).",
        4.0,
    )
    val_every: int = _help(
        "Validate every this many steps, and at the end (with a budget: of a 600-step run, "
        "scaled).",
        200,
    )
    val_batches: int = _help("Validation batches per validation.", 8)
    log_every: int = _help("Log training loss every this many steps.", 10)
    diagnostics_every: int = _help("Dilution profile every this many validations (0: off).", 1)
    diagnostics_batch: int = _help("Held-out sequences the dilution profile is measured on.", 8)
    diagnostics_removal: bool = _help(
        "Also measure the loss change when each block is removed (one forward per block).", False
    )
    diagnostics_importance: bool = _help(
        "At the last profile, also measure each depth-softmax source's causal importance: the "
        "loss change when that source is left out of that site's mixing, the rest renormalized "
        "(one forward per site and source).",
        False,
    )
    routing_alarm: float = _help(
        "Routing alarm: a depth-softmax site (two or more sources) is named as collapsed in the "
        "run's reason, description and report when, at a dilution profile, more than "
        f"{COLLAPSED_SHARE:.0%} of its tokens have a top-1 mass above this and the runner-up "
        f"more than {SATURATED:g} nats below the top (a saturated softmax); in (0, 1] (1: never).",
        ROUTING_ALARM,
    )
    precision: Precision = _help(
        "Lightning precision; 'auto' is bf16-mixed on a GPU and 32-true on a CPU.", "auto"
    )
    accelerator: str = _help("Lightning accelerator: auto, cpu, gpu, ...", "auto")
    compile: Compile = _help(
        "torch.compile the model's forward and backward (in place: state-dict keys unchanged): "
        "'true', 'false', or 'auto' (compiled on a GPU, eager on a CPU); the first step pays "
        "the compilation, which Inductor's on-disk cache spares later runs of the same shapes.",
        "auto",
    )
    depth_path: DepthPath = _help(
        "Which implementation mixes Full and Block AttnRes's depth: 'auto' (flash-attn-res's fused "
        "kernels where they compute the model: CUDA, bfloat16, the paper's switches, eager), "
        "'fused' (those kernels, or the run is refused), 'torch' (never them; compiled when "
        "train.compile is). Each run records the path it took.",
        "auto",
    )

    def __post_init__(self) -> None:
        s = "train"
        _choices(s, "precision", self.precision, get_args(Precision))
        _choices(s, "checkpointing", self.checkpointing, get_args(Checkpointing))
        _choices(s, "compile", self.compile, get_args(Compile))
        _choices(s, "depth_path", self.depth_path, get_args(DepthPath))
        if self.depth_path == "fused" and self.compile == "true":
            raise ValueError(
                f"{s}.depth_path=fused, {s}.compile=true: the fused kernels run eagerly; set "
                f"{s}.compile to false or auto, or {s}.depth_path to torch or auto"
            )
        for name in ("batch_size", "max_steps", "val_every", "val_batches", "log_every"):
            _at_least(s, name, getattr(self, name), 1)
        _at_least(s, "warmup_steps", self.warmup_steps, 0)
        _check_micro_batch(self.batch_size, self.micro_batch)
        # ranges, not lower bounds: a NaN or infinite budget fails them
        _in_range(s, "target_flops", self.target_flops, 0.0, 1e30)
        _in_range(s, "tokens_per_param", self.tokens_per_param, 0.0, 1e9)
        if self.target_flops > 0 and self.tokens_per_param > 0:
            raise ValueError(
                f"{s}.target_flops, {s}.tokens_per_param: both set; set exactly one of "
                f"{s}.max_steps, {s}.target_flops, {s}.tokens_per_param"
            )
        _at_least(s, "diagnostics_every", self.diagnostics_every, 0)
        _at_least(s, "diagnostics_batch", self.diagnostics_batch, 1)
        if self.lr <= 0:
            raise ValueError(f"{s}.lr: {self.lr!r} must be > 0")
        _in_range(s, "min_lr_ratio", self.min_lr_ratio, 0.0, 1.0)
        _at_least(s, "weight_decay", self.weight_decay, 0.0)
        _in_range(s, "beta1", self.beta1, 0.0, 0.9999)
        _in_range(s, "beta2", self.beta2, 0.0, 0.9999)
        _at_least(s, "grad_clip", self.grad_clip, 0.0)
        _at_least(s, "divergence_factor", self.divergence_factor, 0.0)
        if not 0.0 < self.routing_alarm <= 1.0:  # NaN fails it too
            raise ValueError(
                f"{s}.routing_alarm: {self.routing_alarm!r} is out of range; allowed: above 0, "
                "up to 1 (a top-1 mass)"
            )


def _check_micro_batch(batch_size: int, micro_batch: MicroBatch) -> None:
    if micro_batch == AUTO:
        return
    if not isinstance(micro_batch, int) or isinstance(micro_batch, bool):
        raise ValueError(
            f"train.micro_batch: {micro_batch!r} is not allowed; allowed: 'auto', 0 (the whole "
            "batch) or a divisor of train.batch_size"
        )
    if micro_batch < 0:
        raise ValueError(
            f"train.micro_batch: {micro_batch} is negative; allowed: 0 (the whole batch) or a "
            "divisor of train.batch_size"
        )
    if micro_batch > batch_size:
        raise ValueError(
            f"train.micro_batch: {micro_batch} is larger than train.batch_size {batch_size}; "
            "allowed: 0 (the whole batch) or a divisor of the batch"
        )
    if micro_batch and batch_size % micro_batch:
        raise ValueError(
            f"train.micro_batch: {micro_batch} does not divide train.batch_size {batch_size}; "
            "allowed: 0 (the whole batch) or a divisor of the batch"
        )


def micro_steps(t: TrainConfig, workers: int = 1) -> int:
    """Micro-batches each of ``workers`` data-parallel workers accumulates per optimizer step;
    ValueError naming the fields when the global batch does not split into them evenly."""
    if t.batch_size % workers:
        raise ValueError(
            f"train.batch_size: {t.batch_size} does not split evenly over {workers} workers; "
            "data-parallel workers each take an equal share of every batch"
        )
    share = t.batch_size // workers
    micro = micro_batch_of(t)
    if micro and share % micro:
        raise ValueError(
            f"train.micro_batch: {t.micro_batch} does not divide each worker's share ({share}) "
            f"of train.batch_size {t.batch_size} over {workers} workers; allowed: a divisor of "
            f"{share}, or 0 (the whole share at once)"
        )
    return share // micro if micro else 1


def micro_batch_of(t: TrainConfig) -> int:
    """``train.micro_batch`` as a number (0: the whole share); ValueError while it is 'auto',
    which only the device it runs on resolves (``trainers.measure.memory_fit.resolve_auto``)."""
    if isinstance(t.micro_batch, str):
        raise ValueError(
            "train.micro_batch: 'auto' is not resolved; trainers.measure.memory_fit.fit_auto "
            "chooses it for the device (training does)"
        )
    return t.micro_batch


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Where the tokens come from. Every source works offline."""

    source: DataSource = _help(
        "stdlib: the running Python's standard-library source as bytes; text: a file or folder "
        "as bytes; tokens: nanoGPT train.bin/val.bin (uint16); shards: a folder nas data prepare "
        "wrote; synthetic: k-hop pointer chasing.",
        "stdlib",
    )
    path: str = _help("File or folder for 'text', 'tokens' and 'shards'.", "")
    manifest: str = _help(
        "shards: the corpus's manifest hash; '' takes the folder's (nas train and every sweep "
        "trial fill it in, so the record names the data), another refuses a re-prepared folder.",
        "",
    )
    val_fraction: float = _help("Held-out fraction for 'stdlib' (by file) and 'text' (tail).", 0.1)
    max_bytes: int = _help("Cap on the default corpus size in bytes (0: no cap).", 16_000_000)
    cache_dir: str = _help("Cache folder for the default corpus ('' = ~/.cache/...).", "")
    hops: int = _help("synthetic: pointer hops needed per answer (the depth the task needs).", 2)
    n_symbols: int = _help("synthetic: distinct symbols the pointer function ranges over.", 32)

    def __post_init__(self) -> None:
        s = "data"
        _choices(s, "source", self.source, get_args(DataSource))
        _in_range(s, "val_fraction", self.val_fraction, 0.001, 0.5)
        _at_least(s, "max_bytes", self.max_bytes, 0)
        _at_least(s, "hops", self.hops, 1)
        _at_least(s, "n_symbols", self.n_symbols, 2)
        if self.source in ("text", "tokens", "shards") and not self.path:
            raise ValueError(f"{s}.path: source {self.source!r} needs a path to a file or folder")
        if self.manifest and self.source != "shards":
            raise ValueError(f"{s}.manifest: only source 'shards' has a manifest; leave it ''")


@dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Everything one training run needs; the unit a sweep samples and MLflow records."""

    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)


MODEL_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(ModelConfig)}

# The AttnRes design switches (trainers.catalogue.SWITCHES) and the paper's choice for each (the
# default).
ATTNRES_SWITCHES: dict[str, object] = {s.field: MODEL_DEFAULTS[s.field] for s in catalogue.SWITCHES}


SECTIONS: dict[str, type[Any]] = {"model": ModelConfig, "train": TrainConfig, "data": DataConfig}


def to_dict(cfg: RunConfig) -> dict[str, dict[str, Any]]:
    """Nested plain dict (YAML/JSON friendly)."""
    return {name: dataclasses.asdict(getattr(cfg, name)) for name in SECTIONS}


def flatten(cfg: RunConfig) -> dict[str, Any]:
    """Dotted names (``model.residual``) to values: the MLflow parameter names."""
    return {f"{s}.{k}": v for s, sec in to_dict(cfg).items() for k, v in sec.items()}


# How a run executes, not what it trains: two configurations that differ only here train the same
# model on the same batches to the same parameters (up to the order of float sums), so the trial
# key ignores them and a sweep may change them between invocations. The record keeps them. The
# source importance is one more measurement of the trained model, after training. Compiling and
# the depth mixing's implementation change which kernels run (each run records the ones it
# took: trainers.training.paths), so the record says where arms ran differently.
EXECUTION_FIELDS: frozenset[str] = frozenset(
    {
        "train.micro_batch",
        "train.checkpointing",
        "train.diagnostics_importance",
        "train.compile",
        "train.depth_path",
    }
)


def without_execution(flat: dict[str, Any]) -> dict[str, Any]:
    """A flattened configuration without ``EXECUTION_FIELDS``."""
    return {k: v for k, v in flat.items() if k not in EXECUTION_FIELDS}


def flatten_read(cfg: RunConfig) -> dict[str, Any]:
    """``flatten`` without the model fields ``cfg`` does not read (``trainers.identity``) and
    without ``EXECUTION_FIELDS``: what two configurations must agree on to train the same
    model the same way."""
    unread = {f"model.{name}" for name in unread_fields(cfg.model)}
    return {k: v for k, v in without_execution(flatten(cfg)).items() if k not in unread}


def valid_wirings() -> list[tuple[str, str, str, str]]:
    """Every valid (residual, placement, norm, norm_scaling): what the contract tests run over."""
    return [
        (r, p, n, sc)
        for r in RESIDUAL_NAMES
        for p in VALID_PLACEMENTS[r]
        for n in get_args(NormName)
        for sc in get_args(NormScaling)
        if sc == "none" or p in LNS_PLACEMENTS
    ]


def validity_matrix_markdown() -> str:
    """The residual x placement validity table (every norm is valid wherever a cell is; 'lns'
    wherever the placement is pre or sandwich)."""
    placements = PLACEMENT_NAMES
    lines = [
        "| residual | " + " | ".join(placements) + " |",
        "| --- | " + " | ".join("---" for _ in placements) + " |",
    ]
    for r in RESIDUAL_NAMES:
        cells = ("yes" if p in VALID_PLACEMENTS[r] else "—" for p in placements)
        lines.append(f"| `{r}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)
