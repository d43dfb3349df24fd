"""The input-dependent query's forms (issue 27, ``model.attnres_query``): each is what its formula
says, shown by the equivalences between them (each reduces to another under a choice of its
parameters, down to the raw projection 'input' that test_attnres_switches.py holds to the
paper's description); every form starts at the static query's uniform weights; the random parts
are drawn after the weights every wiring shares; and ``attnres_query_lr`` scales the query's
update and nothing else."""

from __future__ import annotations

import math
from typing import Any, get_args

import pytest
import torch
from torch import Tensor

from tests.trainers.conftest import tiny
from trainers import catalogue
from trainers.config import QueryName, TrainConfig
from trainers.model.optim_groups import optimizer_groups
from trainers.model.transformer import DeepTransformer
from trainers.residual.attnres.depth_mixing import QUERY_FORMS, DepthMixer

RESIDUALS = ("attnres", "block_attnres")
D = 16  # tiny's width


def _model(seed: int = 0, **kw: Any) -> DeepTransformer:
    torch.manual_seed(seed)
    return DeepTransformer(tiny(**kw)).double()


def _mixer(model: DeepTransformer) -> DepthMixer:
    (mixer,) = [m for m in model.modules() if isinstance(m, DepthMixer)]
    return mixer


def _logits(model: DeepTransformer) -> Tensor:
    idx = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.seq_len), generator=_gen())
    with torch.no_grad():
        return model(idx)


def _gen() -> torch.Generator:
    return torch.Generator().manual_seed(11)


def _perturb(model: DeepTransformer) -> None:
    """Every parameter moved away from its init (zero queries would hide the forms)."""
    g = _gen()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))


def _set(model: DeepTransformer, **values: Tensor) -> None:
    mixer = _mixer(model)
    with torch.no_grad():
        for name, value in values.items():
            mixer.param(name).copy_(value)


def _shared(target: DeepTransformer, source: DeepTransformer) -> None:
    """``target`` takes every parameter of ``source`` of the same name (all but the forms' own)."""
    mine = dict(target.named_parameters())
    with torch.no_grad():
        for name, p in source.named_parameters():
            if name in mine and mine[name].shape == p.shape:
                mine[name].copy_(p)


def test_the_forms_are_the_config_and_catalogue_names() -> None:
    """One list of forms: the config's literal, the catalogue's (FLOPs, params, who reads the
    query's settings) and the mixer's registry name the same input-dependent queries."""
    assert tuple(QUERY_FORMS) == catalogue.INPUT_QUERIES
    assert set(get_args(QueryName)) == {"static", "scalar", *QUERY_FORMS}


@pytest.mark.parametrize("residual", RESIDUALS)
@pytest.mark.parametrize("form", list(QUERY_FORMS))
def test_every_form_starts_as_the_static_query(residual: str, form: str) -> None:
    """At init every form's query is zero (a zero static part, projection, up-projection or
    gate), so the depth weights are uniform: the logits are the static-query model's."""
    static = _model(residual=residual)
    mine = _model(residual=residual, attnres_query=form)
    _shared(mine, static)  # the same shared weights (they are: see the seed test below)
    torch.testing.assert_close(_logits(mine), _logits(static), rtol=0, atol=1e-12)


@pytest.mark.parametrize("residual", RESIDUALS)
def test_scaled_projections_are_the_raw_one_rescaled(residual: str) -> None:
    """input_sqrt_d with P is input with P / sqrt(d); input_d with P is input with P / d."""
    raw = _model(residual=residual, attnres_query="input")
    _perturb(raw)
    p = _mixer(raw).param("query_proj").detach().clone()
    for form, factor in (("input_sqrt_d", D**-0.5), ("input_d", 1 / D)):
        mine = _model(residual=residual, attnres_query=form)
        _shared(mine, raw)
        _set(mine, query_proj=p / factor)
        torch.testing.assert_close(_logits(mine), _logits(raw), rtol=0, atol=1e-10)


@pytest.mark.parametrize("residual", RESIDUALS)
def test_static_input_is_the_static_query_plus_input_d(residual: str) -> None:
    """static_input with w = 0 is input_d with the same P; with P = 0 it is the static query."""
    mine = _model(residual=residual, attnres_query="static_input")
    _perturb(mine)
    w = _mixer(mine).param("queries").detach().clone()
    p = _mixer(mine).param("query_proj").detach().clone()

    _set(mine, queries=torch.zeros_like(w))
    scaled = _model(residual=residual, attnres_query="input_d")
    _shared(scaled, mine)
    torch.testing.assert_close(_logits(mine), _logits(scaled), rtol=0, atol=1e-10)

    _set(mine, queries=w, query_proj=torch.zeros_like(p))
    static = _model(residual=residual)
    _shared(static, mine)
    torch.testing.assert_close(_logits(mine), _logits(static), rtol=0, atol=1e-10)
    assert not torch.allclose(_logits(mine), _logits(scaled))  # w did matter


@pytest.mark.parametrize("residual", RESIDUALS)
def test_gated_and_low_rank_are_static_input_under_a_choice(residual: str) -> None:
    """gated with g = 1 / sqrt(d) is w + P s / d; low rank with r = d, V = I and U = P / d is
    too: both are static_input with the same w and P."""
    ref = _model(residual=residual, attnres_query="static_input")
    _perturb(ref)
    w, p = (_mixer(ref).param(n).detach().clone() for n in ("queries", "query_proj"))
    expected = _logits(ref)

    gated = _model(residual=residual, attnres_query="gated")
    _shared(gated, ref)
    _set(gated, query_gate=torch.full_like(_mixer(gated).param("query_gate"), D**-0.5))
    torch.testing.assert_close(_logits(gated), expected, rtol=0, atol=1e-10)

    low = _model(residual=residual, attnres_query="low_rank", attnres_query_rank=D)
    _shared(low, ref)
    eye = torch.eye(D, dtype=torch.float64).expand_as(_mixer(low).param("query_down"))
    _set(low, query_down=eye, query_up=p / D)
    torch.testing.assert_close(_logits(low), expected, rtol=0, atol=1e-10)
    assert w.abs().sum() > 0


@pytest.mark.parametrize("form", ["gated", "low_rank"])
def test_random_query_parts_leave_the_shared_weights_to_the_seed(form: str) -> None:
    """gated's P and low rank's V are drawn N(0, 1/d) after the model's own init, so under one
    seed every weight the model shares with standard pre-norm starts where standard's does;
    and they are drawn (not left at zero, where gated's gate and P would get no gradient)."""
    torch.manual_seed(3)
    standard = DeepTransformer(tiny()).state_dict()
    torch.manual_seed(3)
    model = DeepTransformer(tiny(residual="attnres", attnres_query=form))
    mine = model.state_dict()
    for key, value in standard.items():
        if key in mine and mine[key].shape == value.shape:
            assert torch.equal(mine[key], value), key
    drawn = _mixer(model).param("query_proj" if form == "gated" else "query_down")
    assert abs(drawn.std().item() * math.sqrt(D) - 1) < 0.2  # N(0, 1/d), thousands of draws


def _one_step(model: DeepTransformer, t: TrainConfig) -> dict[str, Tensor]:
    """Each parameter's change after one AdamW step on one batch."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(optimizer_groups(model, t), lr=t.lr, betas=(t.beta1, t.beta2))
    idx = torch.randint(0, model.cfg.vocab_size, (2, model.cfg.seq_len + 1), generator=_gen())
    logits = model(idx[:, :-1])
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten()).backward()
    opt.step()
    return {n: p.detach() - before[n] for n, p in model.named_parameters()}


@pytest.mark.parametrize("parametrization", ["sp", "mup"])
def test_query_lr_scales_the_query_update_and_nothing_else(parametrization: str) -> None:
    """Adam's first step moves each entry by lr g / (|g| + eps): with the multiplier m on the
    query's parameters, from the same state, their step is m times the default's and every
    other parameter's is the same."""
    t = TrainConfig(lr=1e-2, weight_decay=0.1)
    kw = dict(residual="attnres", attnres_query="low_rank", parametrization=parametrization)
    default = _model(**kw)
    _perturb(default)
    slowed = _model(**kw, attnres_query_lr=0.25)
    slowed.load_state_dict(default.state_dict())
    a, b = _one_step(default, t), _one_step(slowed, t)
    own = {"stream.sites.query_down", "stream.sites.query_up"}
    assert own <= set(a)
    for name in a:
        factor = 0.25 if name in own else 1.0
        torch.testing.assert_close(b[name], factor * a[name], rtol=1e-9, atol=1e-15)
    assert all(a[n].abs().max() > 0 for n in own)


@pytest.mark.parametrize(
    ("overrides", "wanted"),
    [
        ({"residual": "attnres", "attnres_query_rank": 8}, "attnres_query 'low_rank'"),
        ({"attnres_query_lr": 0.5}, "residual 'attnres' or 'block_attnres'"),
        ({"residual": "attnres", "attnres_query_lr": 0.5}, "attnres_query 'input'"),
        ({"residual": "attnres", "attnres_query": "input", "attnres_query_lr": 0.0}, "positive"),
        (
            {"residual": "attnres", "attnres_query": "low_rank", "attnres_query_rank": 17},
            "attnres_query_rank",
        ),
        ({"residual": "standard", "attnres_query": "gated"}, "attnres_query"),
    ],
)
def test_query_settings_where_they_are_not_read_are_refused(
    overrides: dict[str, object], wanted: str
) -> None:
    with pytest.raises(ValueError, match=wanted):
        tiny(**overrides)
