"""DenseFormer's dilation k and period p (the paper's k x p DenseFormer, §3.2-3.3): which block
outputs each depth-weighted average reads, after which blocks one exists, and what it costs."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.trainers.conftest import assert_causal, tiny
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual.denseformer import DenseFormerStream, DenseState, dwa_blocks, dwa_sources
from trainers.residual.probe import mixing_probe

EXACT = dict(norm_eps=1e-12)  # eps out of the way


def _dense(n_layers: int, k: int, p: int, **kw: Any) -> DeepTransformer:
    fields = dict(residual="denseformer", n_layers=n_layers, dense_dilation=k, dense_period=p)
    return DeepTransformer(tiny(**fields, **kw))


def _randomize(model: DeepTransformer) -> None:
    with torch.no_grad():
        for w in model.stream.weights:
            w.normal_()


def _block(block: torch.nn.Module, y: torch.Tensor) -> torch.Tensor:
    """X_i = B_i(Y_{i-1}): one block on its input alone (DenseFormer's sites are plain)."""
    return block(DenseState(y)).x


@torch.no_grad()
def _paper_forward(model: DeepTransformer, idx: torch.Tensor, k: int, p: int) -> torch.Tensor:
    """The paper's definition written out: X_i = B_i(Y_{i-1}); after block i with i = 0 mod p,
    Y_i = sum_{j <= i, j = i mod k} alpha_{i,j} X_j over the stored outputs, else Y_i = X_i."""
    xs = [model.embed(idx)]
    y, weights = xs[0], iter(model.stream.weights)
    for i, block in enumerate(model.blocks, start=1):
        xs.append(_block(block, y))
        y = xs[-1]
        if i % p == 0:
            y = sum(a * xs[j] for a, j in zip(next(weights), range(i % k, i + 1, k), strict=True))
    return model.head(model.final_norm(y))


def test_one_by_one_is_the_full_denseformer_bitwise() -> None:
    """k = p = 1 (the defaults) is the DenseFormer built before the two fields existed: weights
    ``stream.weights.{b}`` of i + 1 = b + 2 entries after every block, and, with random weights,
    bitwise the logits of the average over every stored output."""
    torch.manual_seed(0)
    model = _dense(4, 1, 1).eval()
    _randomize(model)
    shapes = {n: tuple(v.shape) for n, v in model.state_dict().items() if n.startswith("stream")}
    assert shapes == {f"stream.weights.{b}": (b + 2,) for b in range(4)}
    idx = torch.randint(0, 32, (2, 12))
    with torch.no_grad():
        xs = [model.embed(idx)]
        y = xs[0]
        for b, block in enumerate(model.blocks):
            xs.append(_block(block, y))
            y = model.stream.weights[b] @ torch.stack(xs, dim=-2)
        expected = model.head(model.final_norm(y))
        assert torch.equal(model(idx), expected)


def test_paper_index_sets() -> None:
    """The paper's example (k = p = 4, 8 blocks): averages after blocks 4 and 8 only, over
    {X_0, X_4} and {X_0, X_4, X_8}; and k = 2, p = 3 reads {X_1, X_3} and {X_0, X_2, X_4, X_6}."""
    assert dwa_blocks(8, 4) == [4, 8]
    assert [dwa_sources(i, 4) for i in (4, 8)] == [[0, 4], [0, 4, 8]]
    assert dwa_blocks(7, 3) == [3, 6]
    assert [dwa_sources(i, 2) for i in (3, 6)] == [[1, 3], [0, 2, 4, 6]]
    assert dwa_blocks(3, 1) == [1, 2, 3] and dwa_sources(3, 1) == [0, 1, 2, 3]


@pytest.mark.parametrize("k,p", [(2, 1), (3, 2), (2, 3)])
def test_each_average_reads_exactly_its_sources(k: int, p: int) -> None:
    """Fed fixed block outputs, each average changes when an output it reads is perturbed and
    stays bitwise the same when any other earlier output is; blocks without one pass X_i on."""
    n_layers, d = 7, 4
    stream = DenseFormerStream(
        tiny(residual="denseformer", n_layers=n_layers, dense_dilation=k, dense_period=p)
    )
    with torch.no_grad():
        for w in stream.weights:
            w.normal_()
    xs = torch.randn(n_layers + 1, 1, 1, d)

    def outputs(xs: torch.Tensor) -> list[torch.Tensor]:
        state, ys = stream.begin(xs[0]), []
        for b in range(n_layers):
            state.x = xs[b + 1]
            state = stream.after_block(state, b)
            ys.append(state.x)
        return ys

    base = outputs(xs)
    for i in range(1, n_layers + 1):
        if i % p:
            assert torch.equal(base[i - 1], xs[i])
            continue
        for j in range(i + 1):
            moved = xs.clone()
            moved[j] += 1.0
            changed = not torch.equal(outputs(moved)[i - 1], base[i - 1])
            assert changed == (j in dwa_sources(i, k)), (i, j)


@pytest.mark.parametrize("k,p", [(2, 3), (3, 2)])
def test_kxp_model_is_the_papers_formula(k: int, p: int) -> None:
    """With random weights the whole model computes the paper's k x p recursion, the last
    blocks without an average included (7 blocks, float64)."""
    model = _dense(7, k, p, **EXACT).double().eval()
    _randomize(model)
    idx = torch.randint(0, 32, (2, 12))
    torch.testing.assert_close(model(idx), _paper_forward(model, idx, k, p), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k,p", [(2, 1), (1, 2), (2, 3)])
def test_kxp_equals_standard_at_init(k: int, p: int) -> None:
    """Identity-initialized averages (alpha_{i,i} = 1, the rest 0) pass each output on: any
    k x p DenseFormer is the standard model at init, exactly."""
    standard = DeepTransformer(tiny(n_layers=5, **EXACT)).double().eval()
    dense = _dense(5, k, p, **EXACT).double().eval()
    dense.load_state_dict(standard.state_dict(), strict=False)
    idx = torch.randint(0, 32, (3, 12))
    with torch.no_grad():
        assert torch.equal(standard(idx), dense(idx))


def test_kxp_is_causal() -> None:
    """A 2 x 2 DenseFormer with random weights stays causal."""
    model = _dense(4, 2, 2).double().eval()
    _randomize(model)
    assert_causal(model)


def test_probe_reports_rows_of_the_alpha_matrix() -> None:
    """Diagnostics see row i of the paper's alpha matrix (i + 1 entries), zero at the outputs a
    dilated average skips, for the blocks that have an average."""
    model = _dense(6, 2, 3).eval()
    _randomize(model)
    with mixing_probe() as found, torch.no_grad():
        model(torch.randint(0, 32, (1, 12)))
    rows = found["dwa"]
    assert sorted(rows) == [2, 5]  # 0-based blocks 3 and 6
    w = model.stream.weights
    assert rows[2].shape == (4,) and rows[5].shape == (7,)
    assert torch.equal(rows[2][1::2], w[0]) and not rows[2][0::2].any()  # reads X_1, X_3
    assert torch.equal(rows[5][0::2], w[1]) and not rows[5][1::2].any()  # X_0, X_2, X_4, X_6


@pytest.mark.parametrize(
    "n_layers,k,p", [(1, 1, 1), (6, 1, 1), (8, 4, 4), (8, 4, 1), (9, 2, 3), (12, 4, 5)]
)
def test_kxp_extra_parameter_count(n_layers: int, k: int, p: int) -> None:
    """DWA i has floor(i/k) + 1 weights and exists for i = 0 mod p: sum over i = p, 2p, ... <= L;
    L(L + 3)/2 at k = p = 1 (the paper's count)."""
    formula = sum(i // k + 1 for i in range(p, n_layers + 1, p))
    if k == p == 1:
        assert formula == n_layers * (n_layers + 3) // 2
    base = num_params(DeepTransformer(tiny(n_layers=n_layers)))
    assert num_params(_dense(n_layers, k, p)) - base == formula


def test_dilation_and_period_are_validated() -> None:
    """Each field lies in 1..n_layers for denseformer, and any other residual refuses a value
    other than 1; each error names the field."""
    with pytest.raises(
        ValueError, match=r"model\.dense_dilation: 0 is out of range; allowed: 1 to 4"
    ):
        tiny(residual="denseformer", n_layers=4, dense_dilation=0)
    with pytest.raises(
        ValueError, match=r"model\.dense_period: 5 is out of range; allowed: 1 to 4"
    ):
        tiny(residual="denseformer", n_layers=4, dense_period=5)
    with pytest.raises(
        ValueError, match=r"model\.dense_dilation: 2 applies to residual 'denseformer'"
    ):
        tiny(dense_dilation=2)
    with pytest.raises(
        ValueError, match=r"model\.dense_period: 2 applies to residual 'denseformer'"
    ):
        tiny(residual="attnres", dense_period=2)
