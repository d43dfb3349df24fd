"""Properties of Full and Block AttnRes that follow from the equations in variants.md."""

from __future__ import annotations

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.config import balanced_partition
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual.attnres.block import block_starts


def _logits(model: DeepTransformer, idx: torch.Tensor) -> torch.Tensor:
    return model.eval()(idx)


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
@pytest.mark.parametrize("placement", ["pre", "sandwich"])
@pytest.mark.parametrize("norm", ["rmsnorm", "layernorm"])
def test_zero_query_equals_standard(residual: str, placement: str, norm: str) -> None:
    """With zero pseudo-queries the mix is the mean of the sources; the scale-invariant input
    norm makes that the pre-norm residual sum, so logits match a standard model's state dict."""
    kw = dict(n_layers=6, d_model=32, n_heads=4, norm_eps=1e-12, placement=placement, norm=norm)
    standard = DeepTransformer(tiny(**kw)).double()
    variant = DeepTransformer(tiny(residual=residual, attnres_blocks=3, **kw)).double()
    missing, unexpected = variant.load_state_dict(standard.state_dict(), strict=False)
    assert not unexpected, "AttnRes must keep every parameter name of the standard model"
    assert sorted(missing) == ["stream.sites.key_norm_weights", "stream.sites.queries"]
    idx = torch.randint(0, 32, (3, 12))
    diff = (_logits(standard, idx) - _logits(variant, idx)).abs().max()
    assert diff < 1e-6


def test_epsilon_breaks_the_equivalence_measurably() -> None:
    """At the usual eps=1e-6, the mean's smaller scale meets eps in the norm: logits differ."""
    kw = dict(n_layers=6, d_model=32, n_heads=4, norm_eps=1e-6, init_std=0.002)
    standard = DeepTransformer(tiny(**kw)).double()
    variant = DeepTransformer(tiny(residual="attnres", **kw)).double()
    variant.load_state_dict(standard.state_dict(), strict=False)
    idx = torch.randint(0, 32, (3, 12))
    assert (_logits(standard, idx) - _logits(variant, idx)).abs().max() > 1e-9


def _randomize_mixing(model: DeepTransformer) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("stream.sites."):
                p.copy_(torch.randn_like(p))


@pytest.mark.parametrize("n_layers", [1, 3, 5])
def test_block_with_one_sublayer_per_block_is_full(n_layers: int) -> None:
    """attnres_blocks = 2*n_layers puts each sublayer in its own block: Full AttnRes."""
    full = DeepTransformer(tiny(residual="attnres", n_layers=n_layers)).double()
    _randomize_mixing(full)  # non-trivial weights, so the test sees the mixing
    block = DeepTransformer(
        tiny(residual="block_attnres", n_layers=n_layers, attnres_blocks=2 * n_layers)
    ).double()
    block.load_state_dict(full.state_dict())  # strict: the same parameter names
    idx = torch.randint(0, 32, (2, 12))
    torch.testing.assert_close(_logits(block, idx), _logits(full, idx), rtol=0, atol=1e-12)


def test_one_block_is_standard_residual_with_embedding_apart() -> None:
    """N = 1 with zero queries: one block, so every sublayer sees [embedding, partial sum].

    The residual eps=1e-12 inside the norms moves the result by ~eps/rms^2 relative; 1e-6 is
    the issue's bound for the same effect."""
    kw = dict(n_layers=4, norm_eps=1e-12)
    standard = DeepTransformer(tiny(**kw)).double()
    block = DeepTransformer(tiny(residual="block_attnres", attnres_blocks=1, **kw)).double()
    block.load_state_dict(standard.state_dict(), strict=False)
    idx = torch.randint(0, 32, (2, 12))
    assert (_logits(block, idx) - _logits(standard, idx)).abs().max() < 1e-6


@pytest.mark.parametrize("n_layers,d_model", [(1, 16), (6, 32), (12, 64)])
@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_added_parameter_count(n_layers: int, d_model: int, residual: str) -> None:
    """AttnRes adds (4*n_layers + 2)*d_model parameters: a query and a gain per site."""
    kw = dict(n_layers=n_layers, d_model=d_model, n_heads=4)
    base = num_params(DeepTransformer(tiny(**kw)))
    assert (
        num_params(DeepTransformer(tiny(residual=residual, **kw))) - base
        == (4 * n_layers + 2) * d_model
    )


def test_queries_are_zero_at_init() -> None:
    """Every pseudo-query starts at zero (paper section 5) and every key gain at one."""
    model = DeepTransformer(tiny(residual="attnres", n_layers=3))
    sites = model.stream.sites
    assert sites.queries.shape == sites.key_norm_weights.shape == (2 * 3 + 1, 16)
    assert torch.count_nonzero(sites.queries) == 0
    assert torch.all(sites.key_norm_weights == 1)


@pytest.mark.parametrize(
    "n_sublayers,n_blocks,expected",
    [(8, 4, {2, 4, 6}), (8, 1, set()), (8, 8, {1, 2, 3, 4, 5, 6, 7}), (10, 4, {3, 6, 8})],
)
def test_block_starts(n_sublayers: int, n_blocks: int, expected: set[int]) -> None:
    """Exactly N balanced blocks: S = L / N each when N divides L, else the longer blocks first."""
    assert block_starts(n_sublayers, n_blocks) == expected


PARTITIONS = [(n, k) for n in range(1, 41) for k in range(1, n + 1)]


def test_balanced_partition_covers_every_sublayer_once() -> None:
    """For every (L, N) up to L = 40: N contiguous blocks cover every sublayer exactly once,
    sizes differ by at most one, the longer blocks come first, and block_starts opens each
    block but the first."""
    for n_sublayers, n_blocks in PARTITIONS:
        sizes = balanced_partition(n_sublayers, n_blocks)
        assert len(sizes) == n_blocks and sum(sizes) == n_sublayers and min(sizes) >= 1
        assert max(sizes) - min(sizes) <= 1 and list(sizes) == sorted(sizes, reverse=True)
        owner = [k for k, size in enumerate(sizes) for _ in range(size)]  # each sublayer's block
        starts = block_starts(n_sublayers, n_blocks)
        assert starts == {j for j in range(1, n_sublayers) if owner[j] != owner[j - 1]}


def test_partition_is_unchanged_where_n_divides_the_sublayers() -> None:
    """Where N divides L the blocks are the paper's S = L / N, the boundaries of the earlier
    rule (k * (L // N)): those configurations build the same model as before."""
    for n_sublayers, n_blocks in PARTITIONS:
        if n_sublayers % n_blocks == 0:
            size = n_sublayers // n_blocks
            assert block_starts(n_sublayers, n_blocks) == {k * size for k in range(1, n_blocks)}


def test_model_sites_follow_the_configured_partition() -> None:
    """The model's sites open blocks where ModelConfig.attnres_block_sizes says, and the
    stream keeps one source per block plus the embedding."""
    cfg = tiny(residual="block_attnres", n_layers=6, attnres_blocks=8)
    assert cfg.attnres_block_sizes == (2, 2, 2, 2, 1, 1, 1, 1)
    model = DeepTransformer(cfg)
    sites = [s for b in model.blocks for s in (b.attn_site, b.mlp_site)]
    opened = [j for j, s in enumerate(sites) if s.starts_block]
    assert opened == [2, 4, 6, 8, 9, 10, 11]
    assert model.stream.capacity == 8 + 1
    assert tiny(residual="attnres", n_layers=3).attnres_block_sizes == (1,) * 6
    assert tiny(residual="standard").attnres_block_sizes == ()


def test_unbalanced_partition_keeps_the_zero_query_identity() -> None:
    """Blocks of unequal size still partition every earlier output, so zero queries give the
    pre-norm residual at any (L, N)."""
    kw = dict(n_layers=5, d_model=32, n_heads=4, norm_eps=1e-12)
    standard = DeepTransformer(tiny(**kw)).double()
    block = DeepTransformer(tiny(residual="block_attnres", attnres_blocks=4, **kw)).double()
    block.load_state_dict(standard.state_dict(), strict=False)
    idx = torch.randint(0, 32, (2, 12))
    assert (_logits(block, idx) - _logits(standard, idx)).abs().max() < 1e-6


def _expected_sources(sizes: tuple[int, ...]) -> list[list[frozenset[int]]]:
    """The paper's sources for f_1..f_L over blocks of these sizes, as sets of output indices:
    the embedding, each completed block's sum, then the current block's partial sum if any."""
    out, done, first = [], [frozenset({0})], 1
    for size in sizes:
        for k in range(size):
            partial = [frozenset(range(first, first + k))] if k else []
            out.append(done + partial)
        done = [*done, frozenset(range(first, first + size))]
        first += size
    return out


def _recorded_sources(n_sublayers: int, n_blocks: int) -> list[list[frozenset[int]]]:
    """Runs Block AttnRes's sites symbolically: each branch outputs a one-hot tag of its
    sublayer, so every source a site mixes is a set of indices."""
    from trainers.residual.attnres.block import BlockAttnResSite, BlockState
    from trainers.residual.attnres.depth_attention import Schedule
    from trainers.residual.attnres.depth_buffer import BufferedSources

    seen: list[list[frozenset[int]]] = []
    starts = block_starts(n_sublayers, n_blocks)
    width = n_sublayers + 1

    def tag(j: int) -> torch.Tensor:
        return torch.nn.functional.one_hot(torch.tensor(j), width).double().expand(1, 1, width)

    class Record(torch.nn.Module):
        """Records the sources its site mixed, then emits its own tag."""

        def __init__(self, j: int, state: BlockState) -> None:
            super().__init__()
            self.j, self.state = j, state

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sources = self.state.sources()
            seen.append([frozenset(v.flatten().nonzero().flatten().tolist()) for v in sources])
            return tag(self.j)

    queries = torch.zeros(n_sublayers + 1, width, dtype=torch.float64)
    schedule = Schedule((0, *sorted(starts)), n_sublayers + 1)
    state = BlockState(BufferedSources(1e-6, queries, schedule, capacity=n_blocks + 1))
    state.summaries.append(tag(0))
    for j in range(1, n_sublayers + 1):
        BlockAttnResSite(j - 1, (j - 1) in starts)(state, Record(j, state))
    return seen


def test_block_sources_follow_the_worked_example() -> None:
    """With S = 3 the sources of f_1..f_7 match Su's worked example (spelled out by hand)."""
    e, b1 = frozenset({0}), frozenset({1, 2, 3})
    su = [
        [e],
        [e, frozenset({1})],
        [e, frozenset({1, 2})],
        [e, b1],
        [e, b1, frozenset({4})],
        [e, b1, frozenset({4, 5})],
        [e, b1, frozenset({4, 5, 6})],
    ]
    assert _recorded_sources(9, 3)[:7] == su


@pytest.mark.parametrize("n_sublayers,n_blocks", [(10, 4), (12, 8), (7, 3), (9, 9), (6, 1)])
def test_block_sources_follow_the_partition(n_sublayers: int, n_blocks: int) -> None:
    """At any (L, N), balanced or not, each sublayer mixes the embedding, the completed blocks'
    sums and its own block's partial sum, blocks as ModelConfig.attnres_block_sizes says."""
    sizes = balanced_partition(n_sublayers, n_blocks)
    assert _recorded_sources(n_sublayers, n_blocks) == _expected_sources(sizes)


def _mixing_inputs(n_sites: int = 5, n_sources: int = 7) -> tuple:
    from trainers.residual.attnres.depth_attention import SiteParameters

    torch.manual_seed(0)
    paper = {"queries": torch.zeros(n_sites, 8), "key_norm_weights": torch.ones(n_sites, 8)}
    sites = SiteParameters(paper).double()
    torch.nn.init.normal_(sites.queries)
    torch.nn.init.normal_(sites.key_norm_weights)
    ys = [(torch.randn(2, 3, 8, dtype=torch.float64) * (i + 1)).requires_grad_() for i in range(7)]
    extra = torch.randn(2, 3, 8, dtype=torch.float64, requires_grad=True)
    return sites, ys[:n_sources], extra


def _sources(kind: str, sites, schedule, capacity: int, **switches):  # type: ignore[no-untyped-def]
    """``switches``: the Table 4 ones both serve (eps None, hidden, sigmoid)."""
    from trainers.residual.attnres.depth_attention import StackedSources
    from trainers.residual.attnres.depth_buffer import BufferedSources

    s = {"eps": 1e-6, "hidden": None, "sigmoid": False, **switches}
    if kind == "stacked":
        return StackedSources(s["eps"], sites.folded(), schedule, s["hidden"], s["sigmoid"])
    return BufferedSources(s["eps"], sites.folded(), schedule, capacity, s["hidden"], s["sigmoid"])


@pytest.mark.parametrize("kind", ["stacked", "buffered"])
@pytest.mark.parametrize("group", [1, 3, 100])
def test_sources_compute_the_paper_softmax(kind: str, group: int) -> None:
    """Folded gains, per-source logits, phase-1 groups and the online-softmax merge give exactly
    softmax_i(w_j . RMSNorm_g(v_i)) and sum_i a_i v_i, whatever the grouping or storage."""
    from trainers.residual.attnres.depth_attention import Schedule

    sites, ys, extra = _mixing_inputs()
    state = _sources(kind, sites, Schedule.every(group, 5), capacity=7)
    for y in ys:
        state.append(y)
    rms_norm = torch.nn.functional.rms_norm
    for site in range(5):
        g, w = sites.key_norm_weights[site], sites.queries[site]
        keys = torch.stack([rms_norm(v, (8,), g, 1e-6) for v in [*ys, extra]], -2)
        a = torch.softmax(keys @ w, -1)
        x, weights = state.mix(site, extra)
        torch.testing.assert_close(weights(), a)
        torch.testing.assert_close(x, (a[..., None] * torch.stack([*ys, extra], -2)).sum(-2))


# The Table 4 switches both two-phase paths serve, as ``_sources`` takes them ("window": W = 2).
TWO_PHASE_SWITCHES: dict[str, dict] = {
    "paper": {},
    "raw keys": {"eps": None},
    "window": {"window": 2},
    "sigmoid": {"sigmoid": True},
    "all three": {"eps": None, "window": 2, "sigmoid": True},
}


def _interleaved_run(
    kind: str, group: int, use_extra: bool, switch: str = "paper"
) -> tuple[torch.Tensor, list]:
    """Sources appended between mixes, as in a model: each site's input feeds the next source."""
    from trainers.residual.attnres.depth_attention import Schedule, window_hidden

    sites, ys, extra = _mixing_inputs(n_sites=7, n_sources=7)
    switches = dict(TWO_PHASE_SWITCHES[switch])
    if "window" in switches:  # site j mixes j + 1 stored sources, and the extra one but at 6
        spans = tuple(j + 1 + (use_extra and j < 6) for j in range(7))
        switches["hidden"] = window_hidden(spans, switches.pop("window"), 7)
    state = _sources(kind, sites, Schedule.every(group, 7), capacity=7, **switches)
    state.append(ys[0])
    loss = torch.zeros((), dtype=torch.float64)
    for site in range(6):
        x, _ = state.mix(site, extra * (site + 1) if use_extra else None)
        loss = loss + (x * torch.cos(x)).sum()
        state.append(torch.tanh(x) + ys[site + 1])
    x, _ = state.mix(6)
    loss = loss + x.square().sum()
    return loss, [*sites.parameters(), *ys, extra]


@pytest.mark.parametrize("switch", TWO_PHASE_SWITCHES)
@pytest.mark.parametrize("group", [1, 2, 3, 8])
@pytest.mark.parametrize("use_extra", [False, True])
def test_buffered_backward_equals_autograd(group: int, use_extra: bool, switch: str) -> None:
    """The hand-written backward (buffers, token ordering, the queries' gradient leaving through
    source 0) gives autograd's gradients for every input, in every merge case: phase 1 alone,
    recent sources, the partial sum alone (the two-way path) and both; at the paper's design
    and under each switch the two paths serve."""
    grads = {}
    for kind in ("stacked", "buffered"):
        loss, inputs = _interleaved_run(kind, group, use_extra, switch)
        grads[kind] = torch.autograd.grad(loss, inputs, allow_unused=True)
    for ref, got in zip(grads["stacked"], grads["buffered"], strict=True):
        assert (ref is None) == (got is None)
        if ref is not None:
            torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-12)


def test_buffered_backward_twice_with_retained_graph() -> None:
    """A second backward over a retained graph starts from zeroed buffers: gradients double."""
    loss, inputs = _interleaved_run("buffered", 3, True)
    loss.backward(retain_graph=True)
    first = [t.grad.clone() for t in inputs]
    loss.backward()
    for before, t in zip(first, inputs, strict=True):
        torch.testing.assert_close(t.grad, 2 * before, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_model_gradients_match_the_autograd_reference(residual: str) -> None:
    """A whole model: the buffered path and plain autograd agree on logits and every gradient."""
    from trainers.residual.attnres.depth_attention import StackedSources

    model = DeepTransformer(tiny(residual=residual, n_layers=5, attnres_blocks=3)).double()
    _randomize_mixing(model)
    idx = torch.randint(0, 32, (2, 12))
    results = []
    for stacked in (False, True):
        stream = model.stream
        if stacked:
            stream.new_sources = lambda s=stream: StackedSources(  # type: ignore[method-assign]
                s.eps, s.sites.folded(), s.schedule
            )
        model.zero_grad()
        out = model(idx)
        out.sin().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    (out_b, grads_b), (out_s, grads_s) = results
    torch.testing.assert_close(out_b, out_s, rtol=0, atol=1e-12)
    for got, ref in zip(grads_b, grads_s, strict=True):
        torch.testing.assert_close(got, ref, rtol=1e-9, atol=1e-11)


def test_bf16_autocast_trains() -> None:
    """Under bf16 autocast the buffers hold bf16 values and float32 logits; the backward gives
    finite gradients in each parameter's dtype, close to float32's."""
    torch.manual_seed(0)
    model = DeepTransformer(tiny(residual="block_attnres", n_layers=4, attnres_blocks=2))
    _randomize_mixing(model)
    idx = torch.randint(0, 32, (2, 12))
    grads = []
    for enabled in (False, True):
        model.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled):
            out = model(idx)
        out.float().square().mean().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    ref, got = grads
    assert got.dtype == torch.float32 and torch.isfinite(got).all()
    # bf16 keeps 8 bits of mantissa: a few percent of the gradient's scale
    assert (got - ref).norm() < 0.05 * ref.norm()


@pytest.mark.parametrize("raw", [False, True])
def test_compiled_paths_logits_stay_float32_under_autocast(raw: bool) -> None:
    """The compiled path's logits (``source_logits`` against every site, ``site_logit`` against
    one) are float32 under bf16 autocast, as the buffered path stores them: each equals the
    float64 logit of the same bfloat16 source within float32's bound (2d + 4) u sum_i |k_i q_i|
    (the dot's d u, the key norm's mean of squares d u and its square root). A bfloat16 product
    misses it by orders of magnitude (its rounding alone is 2^-9 of the logit)."""
    from trainers.residual.attnres.depth_attention import site_logit, source_logits

    torch.manual_seed(0)
    d, eps = 64, None if raw else 1e-6
    y, queries = torch.randn(3, 7, d).bfloat16(), torch.randn(9, d)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        every, one = source_logits(y, queries, eps), site_logit(y, queries[4], eps)
    key = y.double()
    if not raw:
        key = key / key.square().mean(-1, keepdim=True).add(eps).sqrt()
    ref, q = key @ queries.double().T, queries.double()
    bound = (2 * d + 4) * 2.0**-24 * (key.abs() @ q.abs().T)
    assert every.dtype == one.dtype == torch.float32
    assert ((every.double() - ref).abs() <= bound).all()
    assert ((one.double() - ref[..., 4]).abs() <= bound[..., 4]).all()


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_inference_mode_computes_what_training_computes(residual: str) -> None:
    """With no gradient wanted the buffered path takes its inference shortcuts (no saved
    tensors, Block's merge as one lerp); the logits stay those of the differentiable path."""
    model = DeepTransformer(tiny(residual=residual, n_layers=5, attnres_blocks=3)).double()
    _randomize_mixing(model)
    idx = torch.randint(0, 32, (2, 12))
    with_grad = model(idx)
    assert with_grad.requires_grad
    with torch.inference_mode():
        without = model(idx)
    torch.testing.assert_close(without, with_grad.detach(), rtol=0, atol=1e-12)
