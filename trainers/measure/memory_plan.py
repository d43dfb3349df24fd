"""The memory plan of one training step on one device: what the parameters, their gradients, the
optimizer's state and one micro-batch's activations take, estimated from the configuration alone.

Torch-free, so that ``nas spaces`` and the sweep driver can plan every cell before anything is
built. The activation terms count what the implementation saves for its backward (read from the
code and held to ``torch.autograd.graph.saved_tensors_hooks`` and a profiled peak on a CPU,
``benchmarks/model/memory_plan.py``), per token, in two kinds of element:

* **wide**: the residual stream and what the norms keep of it, the depth softmax's logits, the
  loss: float32 under mixed precision (the embedding is float32, and adding a bfloat16 output to
  it stays float32);
* **narrow**: what a matrix product reads and writes (the normed inputs, queries, keys, values,
  the MLP's hidden layer, a wiring's stored sources): bfloat16 under mixed precision;
* **cast**: the half-precision copy autocast makes of a float32 activation for each product that
  reads it (autocast caches the casts of weights only, so two products reading one tensor save two
  copies). Nothing under a single precision: there the product saves the activation itself, which
  another term already counts.

Every term is per device: sharding over the workers divides the parameters, their gradients and
the optimizer's state, and a micro-batch's activations do not depend on the worker count.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainers import catalogue
from trainers.config import Checkpointing, ModelConfig, RunConfig, micro_batch_of, micro_steps
from trainers.model.placement import PLACEMENTS

ADAM_STATES = 2  # AdamW's exp_avg and exp_avg_sq, each the parameter's size and dtype
# Sites per AttnRes phase-1 group (trainers.residual.attnres.full.GROUP_SIZE, which a test holds
# this to): phase 1 keeps each group's weights over the sources present at its start.
ATTNRES_GROUP = 8


@dataclass(frozen=True, kw_only=True)
class Bytes:
    """Bytes per element of each kind under one precision."""

    param: int  # a parameter, its gradient and each optimizer state
    wide: int  # the stream and what the norms and the softmaxes keep
    narrow: int  # the matrix products' inputs and outputs
    weight_copy: int  # the half-precision copy autocast makes of each weight (0: none)
    cast: int  # the half-precision copy autocast makes of a float32 activation (0: none)


PRECISION_BYTES: dict[str, Bytes] = {
    "32-true": Bytes(param=4, wide=4, narrow=4, weight_copy=0, cast=0),
    "64-true": Bytes(param=8, wide=8, narrow=8, weight_copy=0, cast=0),
    "bf16-mixed": Bytes(param=4, wide=4, narrow=2, weight_copy=2, cast=2),
    "16-mixed": Bytes(param=4, wide=4, narrow=2, weight_copy=2, cast=2),
    "bf16-true": Bytes(param=2, wide=2, narrow=2, weight_copy=0, cast=0),
}
# The loss is taken in at least float32 (trainers.model.loss): half-precision logits are raised
# to it, float64 logits keep their precision.
LOSS_BYTES = 4


@dataclass(frozen=True, kw_only=True)
class Tokens:
    """Per-token element counts of one group of activations."""

    wide: float = 0.0
    narrow: float = 0.0
    cast: float = 0.0  # autocast's copies: counted under mixed precision only

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(
            wide=self.wide + other.wide,
            narrow=self.narrow + other.narrow,
            cast=self.cast + other.cast,
        )

    def times(self, k: float) -> Tokens:
        return Tokens(wide=self.wide * k, narrow=self.narrow * k, cast=self.cast * k)

    def bytes(self, b: Bytes) -> float:
        return self.wide * b.wide + self.narrow * b.narrow + self.cast * b.cast


@dataclass(frozen=True, kw_only=True)
class MemoryPlan:
    """Bytes one device holds at the peak of a training step (the backward's start, when every
    saved activation is alive and, from the second micro-batch on, the gradients too)."""

    params: int
    grads: int
    optimizer: int
    weight_copies: int  # autocast's half-precision weights, or a sharded model's gathered block
    activations: int  # one micro-batch: the branches, the wiring's depth state, the backward's
    depth_state: int  # the part of ``activations`` the wiring keeps across depth
    logits: int  # the loss over vocab x tokens: saved log-probabilities and their gradients
    micro_batch: int  # sequences per forward on this device
    workers: int
    sharded: bool
    precision: str  # resolved: never 'auto'

    @property
    def total(self) -> int:
        return (
            self.params
            + self.grads
            + self.optimizer
            + self.weight_copies
            + self.activations
            + self.logits
        )

    @property
    def states(self) -> int:
        """Gradients and optimizer state: what ``nas spaces`` shows beside the parameters."""
        return self.grads + self.optimizer


def fused_plan(cfg: RunConfig, gpu: bool) -> bool:
    """Whether the trial's depth softmax runs on the fused kernels
    (``trainers.residual.attnres.fused``): on a GPU in bfloat16, for the wirings and switch
    values they compute, where ``train.depth_path`` pins them, or leaves them to the dispatch
    with the model uncompiled (a compiled model takes the torch path)."""
    t = cfg.train
    bf16 = resolved_precision(t.precision, gpu).startswith("bf16")
    chosen = t.depth_path == "fused" or (t.depth_path == "auto" and t.compile == "false")
    return gpu and bf16 and chosen and catalogue.fused_computes(cfg.model)


def resolved_precision(precision: str, gpu: bool) -> str:
    """'auto' as ``trainers.training.run.resolve_precision`` resolves it: bf16-mixed on a GPU,
    32-true on a CPU."""
    if precision != "auto":
        return precision
    return "bf16-mixed" if gpu else "32-true"


def memory_plan(
    cfg: RunConfig, workers: int = 1, sharded: bool = False, gpu: bool = True
) -> MemoryPlan:
    """The per-device plan of ``cfg`` trained data-parallel over ``workers`` (parameters sharded
    over them when ``sharded``: FSDP), on GPUs (``gpu``: what 'auto' precision resolves to).
    ValueError when the global batch does not split evenly (``trainers.config.micro_steps``)."""
    m, t = cfg.model, cfg.train
    micro_steps(t, workers)  # the split's own error
    micro = micro_batch_of(t) or t.batch_size // workers
    precision = resolved_precision(t.precision, gpu)
    b = PRECISION_BYTES[precision]
    params = param_count(m)
    per_device = -(-params // workers) if sharded and workers > 1 else params
    tokens = micro * m.seq_len
    fused = fused_plan(cfg, gpu)
    depth = depth_state(m, t.checkpointing, fused).bytes(b) * tokens
    acts = activation_tokens(m, t.checkpointing).bytes(b) * tokens + fixed_elements(m) * b.wide
    return MemoryPlan(
        params=per_device * b.param,
        grads=per_device * b.param,
        optimizer=per_device * b.param * ADAM_STATES,
        weight_copies=_weight_copies(m, params, b, sharded and workers > 1),
        activations=round(acts + depth),
        depth_state=round(depth),
        logits=round(logits_tokens(m) * max(LOSS_BYTES, b.wide) * tokens),
        micro_batch=micro,
        workers=workers,
        sharded=sharded,
        precision=precision,
    )


# ---- parameters ---------------------------------------------------------------------------------


def param_count(m: ModelConfig) -> int:
    """Distinct parameters: the plain model's (embeddings, head, sublayers, norms) plus what the
    wiring, the attention variant and the placement add (their catalogue formulas)."""
    d, bias = m.d_model, m.bias
    attention = 4 * d * d + (4 * d if bias else 0)
    mlp = 2 * d * m.mlp_hidden + (m.mlp_hidden + d if bias else 0)
    embeddings = m.vocab_size * d * (1 if m.tie_embeddings else 2)
    embeddings += m.seq_len * d if m.pos == "learned" else 0
    norms = _norm_slots(m) * _norm_params(m)
    extra = 0
    for entry in (catalogue.wiring(m.residual), catalogue.attention(m.attention)):
        extra += entry.params(m) if entry.params is not None else 0
    return embeddings + m.n_layers * (attention + mlp) + norms + extra


def _norm_params(m: ModelConfig) -> int:
    return m.d_model * (2 if m.norm == "layernorm" else 1)


def _norm_slots(m: ModelConfig) -> int:
    """Norms in the model: each block's filled slots (twice: attention and MLP; MUDD's extra key
    and value input norms are the wiring's parameters) and the final norm."""
    placement = PLACEMENTS.get(m.placement)
    per_block = (placement.slots(m, i) for i in range(m.n_layers))
    filled = sum(2 * (s.norm_in + s.norm_out + s.post_main) for s in per_block)
    return filled + (1 if placement.final_norm else 0)


def _weight_copies(m: ModelConfig, params: int, b: Bytes, sharded: bool) -> int:
    """Autocast's half-precision copy of every weight a product reads, cached through the forward
    and saved for the backward; sharded (FSDP), also one gathered block and the next (its
    prefetch) in the parameters' dtype."""
    copies = params * b.weight_copy
    if not sharded:
        return copies
    block = (params - m.vocab_size * m.d_model) / max(m.n_layers, 1)
    return round(copies + 2 * block * b.param)


# ---- activations --------------------------------------------------------------------------------


def activation_tokens(m: ModelConfig, checkpointing: Checkpointing) -> Tokens:
    """Per-token elements of one micro-batch's activations outside the wiring's depth state: the
    sublayers' branches (all they save, or under checkpointing only their inputs plus one branch
    recomputed at a time), the sites' post-merge norms and extras, the final norm and the
    backward's working gradients of the stream."""
    placement = PLACEMENTS.get(m.placement)
    d = m.d_model
    branches, sites = Tokens(), _site_extras(m)
    for i in range(m.n_layers):
        slots = placement.slots(m, i)
        inputs = 3 if m.residual == "mudd" and i > 0 else 1  # MUDD's q, k, v inputs
        branches += _attention(m, slots.norm_in, inputs) + _mlp(m, slots.norm_in)
        branches += _out_norm(m).times(2 * slots.norm_out)
        sites += _post_norm(m).times(2 * slots.post_main)
    if checkpointing == "sublayer":
        largest = max(_attention(m, True, 1), _mlp(m, True), key=lambda t: t.wide + t.narrow)
        inputs = m.n_sublayers + (2 * (m.n_layers - 1) if m.residual == "mudd" else 0)
        branches = Tokens(wide=inputs * d) + largest
    final = 2 * d + _norm(m, d).wide if placement.final_norm else d  # its input, the head's
    if m.residual == "mudd":
        final -= d  # its input is the last aggregation's, the wiring's
    working = Tokens(wide=2 * d)  # the stream's gradient and one sublayer's
    return branches + sites + Tokens(wide=final) + working


def _norm(m: ModelConfig, width: int) -> Tokens:
    """What a norm on a ``width``-wide input keeps besides the input: RMSNorm its normalized
    input and 1/rms; LayerNorm its mean and 1/std."""
    if m.norm == "rmsnorm":
        return Tokens(wide=width + 1)
    return Tokens(wide=2)


def _attention(m: ModelConfig, norm_in: bool, inputs: int) -> Tokens:
    """An attention branch: its input (the stream; MUDD's three are the wiring's), the input
    norms and the products' inputs (the stream itself where no norm precedes: under mixed
    precision that misses its half-precision copy), the fused q, k, v, the rotated q and k, the
    output and its projection's input (a view of the output without rotation), and the softmax's
    log-sum-exp per head (SDPA's flash kernels keep no T x T scores)."""
    d = m.d_model
    stream = d if inputs == 1 else 0
    rope = 2 * d if m.pos == "rope" else 0
    if not norm_in:
        return Tokens(wide=stream + m.n_heads, narrow=3 * d + rope + d + (d if rope else 0))
    norms = _norm(m, d).times(inputs)
    narrow = inputs * d + 3 * d + rope + d + (d if rope else 0)
    return norms + Tokens(wide=stream + m.n_heads, narrow=narrow)


def _mlp(m: ModelConfig, norm_in: bool) -> Tokens:
    """An MLP branch: its input, the input norm and the product's input (the input itself where
    no norm precedes), the hidden layer before and after the GELU."""
    hidden = Tokens(wide=m.d_model, narrow=2 * m.mlp_hidden)
    if not norm_in:
        return hidden
    return _norm(m, m.d_model) + Tokens(narrow=m.d_model) + hidden


def _out_norm(m: ModelConfig) -> Tokens:
    """A norm on the branch output (sandwich) keeps that output, in float32: the norm computes
    in float32, so under mixed precision what it keeps is its float32 copy of the
    half-precision output."""
    return Tokens(wide=m.d_model) + _norm(m, m.d_model)


def _post_norm(m: ModelConfig) -> Tokens:
    """A norm on the stream after the merge (post, Mix-LN's first blocks) keeps the sum; it is
    the site's, outside the branch, so checkpointing keeps it too."""
    return Tokens(wide=m.d_model) + _norm(m, m.d_model)


def _site_extras(m: ModelConfig) -> Tokens:
    """What a wiring's sites keep per sublayer beyond the plain residual's add, which keeps
    nothing: its catalogue entry's ``site_keeps`` (a scaled branch output keeps the output, as
    ReZero and LAuReL-RW do; LAuReL-LR its rank-r projection) and ``site_casts`` (autocast's
    copies of what a site's own products read of the stream: LAuReL-LR's x A)."""
    entry = catalogue.wiring(m.residual)
    keeps = entry.site_keeps(m) if entry.site_keeps else 0
    casts = entry.site_casts(m) if entry.site_casts else 0
    return Tokens(narrow=keeps, cast=casts).times(m.n_sublayers)


def depth_state(
    m: ModelConfig, checkpointing: Checkpointing = "none", fused: bool = False
) -> Tokens:
    """Per-token elements the wiring keeps across depth, outside every branch (checkpointing
    does not touch them): nothing for a single stream; AttnRes's stored sources and their
    logits at every site (and, from the backward's start, a gradient of each; ``fused``: what
    the fused kernels keep instead); n streams per sublayer for Hyper-Connections and mHC;
    DenseFormer's and MUDD's stacked block outputs."""
    kind = m.residual
    if kind in ("attnres", "block_attnres"):
        return fused_saved(m) + fused_backward(m) if fused else _attnres(m)
    if kind in ("hyper", "mhc", "mhc_lite"):
        return _streams(m)
    if kind == "denseformer":
        return _denseformer(m)
    if kind == "mudd":
        return _mudd(m)
    return Tokens()


def _attnres(m: ModelConfig) -> Tokens:
    """Buffered (the default switches, ``depth_buffer``): values (B, T, S, d), logits (B, T, S,
    sites) and 1/rms of the S stored sources, a gradient buffer of the values and the logits
    (allocated by the backward's first mix), phase 1's weights per group; Block AttnRes also keeps
    per sublayer the difference its pair mix saves. The plain path (other switches, Delta
    AttnRes) stacks every source at every site instead."""
    d, sites = m.d_model, m.n_sublayers + 1
    blocks = len(m.attnres_block_sizes) if m.residual == "block_attnres" else m.n_sublayers
    stored = blocks + 1
    if not _buffered(m):
        stacked = sum(range(2, sites + 1)) if m.residual == "attnres" else sites * stored
        return Tokens(narrow=(stacked + stored) * d, wide=sites * stored)
    values = Tokens(narrow=2 * stored * d)
    logits = Tokens(wide=2 * stored * sites + stored)
    if m.residual == "block_attnres":  # every site but a block's first mixes the partial sum
        pairs = Tokens(narrow=(m.n_sublayers - blocks) * d)
        return values + logits + Tokens(wide=_group_weights(m)) + pairs
    return values + logits + Tokens(wide=_group_weights(m) + _merge_weights(m))


def padded_width(m: ModelConfig) -> int:
    """The row width the fused kernels load: ``d_model`` padded to a power of two."""
    return 1 << (m.d_model - 1).bit_length()


def _fused_groups(m: ModelConfig) -> list[tuple[int, int]]:
    """Phase 1's calls on the fused path, as (sources stacked, sites queried). Block AttnRes:
    one per block, at its first site, over the embedding and the summaries before it, for the
    block's sites (the last block's also the output's), then one at the output over every
    summary. Full AttnRes: one per group of ``ATTNRES_GROUP`` sites over every source stored at
    its start, and one at each later site of the group, for itself, over the sources stored
    since."""
    sites = m.n_sublayers + 1
    if m.residual == "block_attnres":
        sizes = m.attnres_block_sizes
        groups = [(b + 1, size) for b, size in enumerate(sizes)]
        last_n, last_g = groups[-1]
        return [*groups[:-1], (last_n, last_g + 1), (len(sizes) + 1, 1)]
    out = []
    for start in range(0, sites, ATTNRES_GROUP):
        size = min(ATTNRES_GROUP, sites - start)
        out.append((start + 1, size))
        out.extend((r, 1) for r in range(1, size))
    return out


def fused_saved(m: ModelConfig) -> Tokens:
    """What the fused path saves for the backward per token (rows of the padded width D):
    each phase-1 call its stacked sources (bfloat16) and, in float32, each queried site's
    log-sum-exp, each source's inverse rms and each site's logits over them. Block AttnRes
    keeps a block's phase-1 outputs (bfloat16) where a later site's phase 2 reads them, and per
    later site of a block phase 2's padded partial sum, its logit and inverse rms; Full AttnRes
    per later site of a group its merge: the two answers widened to float32 and their two
    weights."""
    d_pad, groups = padded_width(m), _fused_groups(m)
    narrow = wide = 0
    for n, g in groups:
        narrow += n * d_pad
        wide += g + n + g * n
    if m.residual == "block_attnres":
        sizes = m.attnres_block_sizes
        later = sum(size - 1 for size in sizes)
        # a block's phase-1 outputs stay alive where a later site's phase 2 reads them
        blocks = groups[: len(sizes)]
        outputs = sum(g for (_, g), size in zip(blocks, sizes, strict=True) if size > 1)
        return Tokens(narrow=narrow + (outputs + later) * d_pad, wide=wide + 2 * later)
    sites = m.n_sublayers + 1
    later = sum(min(ATTNRES_GROUP, sites - s) - 1 for s in range(0, sites, ATTNRES_GROUP))
    return Tokens(narrow=narrow, wide=wide + later * (2 * d_pad + 2))


def fused_backward(m: ModelConfig) -> Tokens:
    """What the backward's first phase-1 call allocates while every activation is alive: the
    gradient of its stacked sources and its per-token query partials, float32 rows of D."""
    n, g = _fused_groups(m)[-1]
    return Tokens(wide=(n + g) * padded_width(m))


def _buffered(m: ModelConfig) -> bool:
    """Whether the buffered two-phase path serves ``m`` (``DepthMixer.buffered``): replacement
    routing with a static query and one channel group."""
    static = m.attnres_query == "static"
    return m.attnres_sources == "outputs" and static and m.attnres_heads == 1


def _group_weights(m: ModelConfig) -> int:
    """Phase 1's weights kept per token: each group's sites over the sources stored at its
    start. Full AttnRes: groups of ``ATTNRES_GROUP`` sites, site j reading j + 1 sources; Block
    AttnRes: one group per block, over the embedding and the summaries before it."""
    sites = m.n_sublayers + 1
    if m.residual == "block_attnres":
        sizes = m.attnres_block_sizes
        return sum(size * (b + 1) for b, size in enumerate(sizes)) + len(sizes) + 1
    starts = range(0, sites, ATTNRES_GROUP)
    return sum(min(ATTNRES_GROUP, sites - s) * (s + 1) for s in starts)


def _merge_weights(m: ModelConfig) -> int:
    """Full AttnRes's phase 2: the site r places past its group's start keeps its merge's 1 + r
    weights."""
    sites = m.n_sublayers + 1
    return sum(1 + (j % ATTNRES_GROUP) for j in range(sites) if j % ATTNRES_GROUP)


def _streams(m: ModelConfig) -> Tokens:
    """Per sublayer: the n streams the read-and-mix product keeps (under autocast its copy of
    them) and the branch output the write keeps, and what the site's maps keep. The first site's
    streams are the embedding, expanded: the product keeps that one row, but autocast's cast of an
    expanded tensor is a full (B, T, n, d) copy."""
    n, d = m.hc_streams, m.d_model
    per = Tokens(narrow=(n + 1) * d) + _site_maps(m)
    first = Tokens(narrow=-(n - 1) * d, cast=(n - 1) * d)
    if m.residual in ("mhc", "mhc_lite"):
        # Flattening the expanded embedding copies it: under float32 the maps' product and RMS
        # keep that copy; under autocast they keep their casts of it (counted per site) instead.
        first += Tokens(narrow=n * d, cast=-n * d)
    return per.times(m.n_sublayers) + first


def _site_maps(m: ModelConfig) -> Tokens:
    """What one site's maps keep per token (trainers/residual/hyper.py, mhc.py, mhc_lite.py)."""
    n = m.hc_streams
    if m.residual == "hyper" and not m.hc_dynamic:
        # the shared read row and mixing matrix (``fixed_elements``), expanded to one per token
        # for the batched product: autocast's cast of the expansion is a copy per token
        return Tokens(cast=(n + 1) * n)
    if m.residual == "hyper":
        return _hyper_maps(m)
    res = n * n if m.residual == "mhc" else _factorial(n)
    maps = _mhc_maps(m, res)
    if m.residual == "mhc":
        return maps + _sinkhorn(m)
    # the permutation weights' softmax output, in float32 as its logits are (its product with
    # the constant permutations keeps no copy: they need no gradient)
    return maps + Tokens(wide=res)


def _hyper_maps(m: ModelConfig) -> Tokens:
    """Dynamic Hyper-Connections' maps. The norm over the n streams keeps its statistics and
    one more float32 row of n d: under float32 its output, which the three products read;
    under autocast its input, of which the read-and-mix product keeps only a copy. Under
    autocast the three products (A_m's, A_r's and B's) each keep a copy of the normed streams.
    Each product's tanh output (2n + n^2) is kept by its scaling, B (n, float32: the static part
    is) by the write, and the read row with the mixing matrix ((n + 1) n) by the read-and-mix
    product."""
    n, d = m.hc_streams, m.d_model
    norm = Tokens(wide=n * d) + _norm(m, d).times(n)
    products = Tokens(cast=3 * n * d)
    return norm + products + Tokens(narrow=2 * n + n * n + (n + 1) * n, wide=n)


def _mhc_maps(m: ModelConfig, res_logits: int) -> Tokens:
    """mHC's and mHC-lite's maps from the flattened streams (n d): under autocast a copy of them
    for the maps' product and one for each operand of the RMS's dot product (a product too); the
    product's logits (2n + the mixing logits), their scaled copy and 1/rms, narrow as the
    product's output is; the two sigmoids' outputs and H_post (3n, float32: their biases are);
    the read row with the mixing matrix ((n + 1) n), kept by the read-and-mix product."""
    n, d = m.hc_streams, m.d_model
    logits = 2 * (2 * n + res_logits) + 1
    return Tokens(cast=3 * n * d, narrow=logits + (n + 1) * n, wide=3 * n)


def _sinkhorn(m: ModelConfig) -> Tokens:
    """Sinkhorn's saved n x n matrices (``mhc._Sinkhorn``): exp(logits) and each half-step's
    normalized matrix, float32 (a division by the sums promotes), and each half-step's sums, a
    product's output."""
    n2, steps = m.hc_streams**2, 2 * m.mhc_sinkhorn_iters
    return Tokens(wide=n2 * (steps + 1), narrow=n2 * steps)


def _factorial(n: int) -> int:
    out = 1
    for k in range(2, n + 1):
        out *= k
    return out


def _denseformer(m: ModelConfig) -> Tokens:
    """After each averaging block i, the stack of the outputs it reads, saved by the weighted
    sum: sum over blocks of (floor(i/k) + 1) d."""
    k, p = m.dense_dilation, m.dense_period
    stacked = sum(len(range(i % k, i + 1, k)) for i in range(1, m.n_layers + 1) if i % p == 0)
    return Tokens(narrow=stacked * m.d_model)


def _mudd(m: ModelConfig) -> Tokens:
    """After block i: the stack of its S sources (saved by the weighted sum), the C mixed
    streams (saved by the norms that read them), the weight generator's input and normalized
    input, its hidden layer before and after the GELU, and the C x S weights. The streams and
    the generator's input are kept by norms, which compute in float32: under mixed precision
    they keep float32 copies of the half-precision mix."""
    d, wide, narrow = m.d_model, 0.0, 0.0
    for i in range(m.n_layers):
        streams, sources, hidden = catalogue.mudd_shape(m, i)
        wide += (streams + 1) * d
        narrow += (sources + 1) * d + 2 * hidden + streams * sources
    return Tokens(wide=wide, narrow=narrow)


def fixed_elements(m: ModelConfig) -> int:
    """Activations that do not grow with the tokens: each mHC site's three projections,
    concatenated into one matrix for one product, each static Hyper-Connections site's read
    row and mixing matrix, and each LAuReL-RW site's two weights (the softmax's output and its
    scaled copy), kept for their backward."""
    n = m.hc_streams
    if m.residual == "laurel_rw":
        return m.n_sublayers * 2 * 2
    if m.residual == "hyper" and not m.hc_dynamic:
        return m.n_sublayers * (n + 1) * n
    if m.residual not in ("mhc", "mhc_lite"):
        return 0
    res = n * n if m.residual == "mhc" else _factorial(n)
    return m.n_sublayers * n * m.d_model * (2 * n + res)


def logits_tokens(m: ModelConfig) -> int:
    """Per-token elements of the loss at the backward's start, in at least float32 (float64
    under 64-true): the saved log-probabilities, their gradient and the logits' gradient,
    vocab_size each."""
    return 3 * m.vocab_size


# ---- reading sizes ------------------------------------------------------------------------------


def gib(n: float) -> str:
    """Bytes as a short human figure: ``1.5 GiB``, ``320 MiB``, ``12 KiB``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{int(n)} B"
