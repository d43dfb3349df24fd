"""Routing health: per-token statistics of mixing weights against answers from the math, the
collapse alarm's rule, and the profile's routing fields for every depth-mixing wiring."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from record.schema import Metric
from stats.routing import SATURATED, STATS, RoutingAlarm, collapsed_sites, token_routing
from tests.trainers.conftest import tiny
from trainers.config import ROUTING_ALARM, TrainConfig
from trainers.measure.diagnostics import dilution_profile
from trainers.model.transformer import DeepTransformer
from trainers.training.callbacks import DilutionCallback


def _stats(weights: torch.Tensor, threshold: float = ROUTING_ALARM) -> dict[str, float]:
    return dict(zip(STATS, token_routing(weights, threshold).tolist(), strict=True))


def test_uniform_weights_have_entropy_one_top1_one_over_n_and_n_sources() -> None:
    """Uniform weights over n = 5: normalized entropy 1, top-1 mass 1/5, effective sources 5,
    logit spread 0."""
    s = _stats(torch.full((3, 7, 5), 0.2))
    assert s["entropy"] == pytest.approx(1.0)
    assert s["top1"] == pytest.approx(0.2)
    assert s["sources"] == pytest.approx(5.0)
    assert s["spread"] == pytest.approx(0.0, abs=1e-12)


def test_one_hot_weights_have_entropy_zero_and_top1_one() -> None:
    """One source per token: entropy 0, top-1 mass 1, one effective source."""
    w = torch.nn.functional.one_hot(torch.randint(0, 4, (2, 9)), 4).float()
    s = _stats(w)
    assert s["entropy"] == pytest.approx(0.0, abs=1e-12)
    assert s["top1"] == pytest.approx(1.0)
    assert s["sources"] == pytest.approx(1.0)


def test_per_token_collapse_hidden_by_the_token_average() -> None:
    """Half the tokens one-hot on source 0, half on source 1: the token-averaged weights are
    (1/2, 1/2), entropy 1, but every token reads one source: per-token entropy 0, top-1 1."""
    w = torch.zeros(1, 10, 2)
    w[0, :5, 0] = 1.0
    w[0, 5:, 1] = 1.0
    averaged = w.mean((0, 1))
    assert _stats(averaged)["entropy"] == pytest.approx(1.0)
    s = _stats(w)
    assert s["entropy"] == pytest.approx(0.0, abs=1e-12)
    assert s["top1"] == pytest.approx(1.0)


def test_spread_is_the_softmax_logit_spread() -> None:
    """For softmax weights, log a_i - log a_j = l_i - l_j: the spread read from the weights is
    max l - min l, per token, then averaged (here 3 and 7: 5)."""
    logits = torch.tensor([[[0.0, 1.0, 3.0]], [[-2.0, 5.0, 0.0]]])  # (2, 1, 3)
    assert _stats(logits.softmax(-1))["spread"] == pytest.approx(5.0, rel=1e-6)


def test_free_weights_are_read_as_shares_of_absolute_weight() -> None:
    """DenseFormer-style free weights (1, -1, 2): p = (1/4, 1/4, 1/2), top-1 1/2, entropy
    H(p) / log 3 with H(p) = 1.5 log 2."""
    s = _stats(torch.tensor([1.0, -1.0, 2.0]))
    assert s["top1"] == pytest.approx(0.5)
    assert s["entropy"] == pytest.approx(1.5 * math.log(2) / math.log(3))


def test_one_source_has_no_entropy_and_is_never_an_alarm() -> None:
    """A site with one source: entropy NaN (log 1 = 0), top-1 1, and the alarm skips it."""
    assert math.isnan(_stats(torch.ones(2, 3, 1))["entropy"])
    alarm = RoutingAlarm(0.95)
    weights = np.array([[1.0, np.nan], [0.99, 0.01]])
    alarm.observe(np.array([1.0, 0.5]), np.array([0.0, 30.0]), weights, step=10)
    assert alarm.found == {}


def test_alarm_keeps_the_first_step_and_names_the_site_and_source() -> None:
    """A site with most of its tokens collapsed is named with the step it first collapsed at
    and the source holding most of its weight; a later profile does not move the step."""
    alarm = RoutingAlarm(0.95)
    weights = np.array([[1.0, np.nan, np.nan], [0.9, 0.1, np.nan], [0.3, 0.3, 0.4]])
    top1, spread = np.array([1.0, 0.97, 0.6]), np.array([0.0, 12.0, 1.0])
    alarm.observe(top1, spread, weights, step=40, collapsed=np.array([np.nan, 0.8, 0.0]))
    alarm.observe(top1, spread, weights, step=60, collapsed=np.array([np.nan, 0.9, 0.6]))
    assert [(c.site, c.step) for c in alarm.found.values()] == [(1, 40), (2, 60)]
    assert alarm.message().startswith(
        "routing alarm (top-1 mass > 0.95 and runner-up > 10 nats down on over 50% of tokens): "
        "site 1 collapsed onto the embedding by step 40"
    )
    assert "site 2 collapsed onto source 2 by step 60" in alarm.message()
    assert RoutingAlarm(0.95).message() == ""
    collapsed = collapsed_sites(np.array([1.0, 0.97, 0.6]), np.full(3, 12.0), weights, 0.95)
    assert collapsed.tolist() == [False, True, False]


def test_the_alarm_survives_a_checkpoint(tmp_path: Path) -> None:
    """The dilution callback's state (validations, collapsed sites) goes through a checkpoint
    file loaded with weights_only=True; restored into a fresh alarm it names the same sites, and
    a site found again later keeps its earlier step."""
    alarm = RoutingAlarm(0.95)
    weights = np.array([[1.0, np.nan], [0.99, 0.01]])
    alarm.observe(np.array([1.0, 0.99]), np.array([0.0, 15.0]), weights, step=40)
    saved = DilutionCallback(batch=(torch.zeros(1), torch.zeros(1)), folder=tmp_path, alarm=alarm)
    saved.validations = 3
    torch.save({"callback": saved.state_dict()}, tmp_path / "ckpt.pt")
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)["callback"]
    fresh = RoutingAlarm(0.95)
    resumed = DilutionCallback(batch=(torch.zeros(1), torch.zeros(1)), folder=tmp_path, alarm=fresh)
    fresh.observe(np.array([1.0, 0.99]), np.array([0.0, 15.0]), weights, step=80)  # again
    resumed.load_state_dict(state)
    assert resumed.validations == 3
    assert fresh.message() == alarm.message()
    assert "by step 40" in fresh.message()


@pytest.mark.parametrize(
    ("top1", "spread", "collapsed"),  # a profile without the collapsed share (before issue 50)
    [
        (0.97, 2 * math.log(0.97 / 0.03), False),  # leaning: every logit within reach
        (0.97, SATURATED - 0.1, False),
        (0.97, SATURATED + 0.1, True),  # one source, the others out of reach
        (0.90, 60.0, False),  # saturated against one source, but reading two: sparse, not one
        (0.97, math.nan, False),  # free weights: no logits, never an alarm
    ],
)
def test_an_old_profile_is_judged_by_the_rule_it_was_recorded_under(
    top1: float, spread: float, collapsed: bool
) -> None:
    """A profile recorded before the collapsed share (``collapsed`` None) falls back to the
    averaged rule: the token-averaged top-1 mass above the threshold and the token-averaged
    logit spread above ``SATURATED``, both needed. A two-source site at top-1 mass 0.97 per
    token sits log(0.97/0.03) = 3.5 nats apart: a preference, not a collapse."""
    weights = np.array([[top1, 1 - top1]])
    found = collapsed_sites(np.array([top1]), np.array([spread]), weights, 0.95)
    assert found.tolist() == [collapsed]


def _by_hand(logits: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per token of ``logits`` (tokens, S), from the logits themselves: the runner-up margin
    (the top logit minus the second) and whether the token is collapsed (its softmax's top-1
    mass above ``threshold`` and the margin above 10 nats)."""
    ordered = np.sort(logits, axis=-1)
    margin = ordered[:, -1] - ordered[:, -2]
    top1 = 1.0 / np.exp(logits - ordered[:, -1:]).sum(-1)
    return margin, (top1 > threshold) & (margin > 10.0)


def _judged(logits: np.ndarray, threshold: float) -> tuple[dict[str, float], bool, bool]:
    """One site's statistics from the float32 softmax of ``logits`` (as the forward makes the
    weights), and whether it collapsed by this rule and by the averaged rule before it."""
    w = torch.from_numpy(logits).float().softmax(-1)
    s = _stats(w, threshold)
    averaged = w.double().mean(0).numpy()[None]
    top1, spread = np.array([s["top1"]]), np.array([s["spread"]])
    new = collapsed_sites(top1, spread, averaged, threshold, np.array([s["collapsed"]]))
    old = collapsed_sites(top1, spread, averaged, threshold)
    return s, bool(new[0]), bool(old[0])


def test_a_stale_source_does_not_collapse_a_site_whose_runner_up_is_close() -> None:
    """Full AttnRes at 48 layers: an output site over 97 sources, per token the top logit at 0,
    the runner-up 3 to 3.5 nats below, one stale source 12 below and the other 94 at 11 below:
    top-1 mass 0.951 to 0.969 on every token, spread 12. The averaged rule called that a
    collapse; the runner-up keeps e^-3.5 (3%) or more of the top's weight, and of its gradient,
    so no token is collapsed and the site does not alarm."""
    tokens = 64
    gen = torch.Generator().manual_seed(0)
    logits = np.full((tokens, 97), -11.0)
    logits[:, 0] = 0.0
    logits[:, 1] = -3.0 - 0.5 * torch.rand(tokens, generator=gen, dtype=torch.float64).numpy()
    logits[:, 96] = -12.0
    margin, collapsed = _by_hand(logits, ROUTING_ALARM)
    s, new, old = _judged(logits, ROUTING_ALARM)
    assert not collapsed.any() and s["collapsed"] == 0.0
    # float32 weights: log p is exact to a few float32 ulps (1e-7 relative) of p
    assert s["margin"] == pytest.approx(margin.mean(), abs=1e-5)
    assert s["spread"] == pytest.approx(12.0, abs=1e-5)
    assert s["top1"] > ROUTING_ALARM
    assert old and not new


def test_a_site_half_on_one_source_half_on_another_collapses() -> None:
    """Half the tokens read source 0, half source 1, each through a saturated softmax (the
    others 12 nats down): the token-averaged weights look split (0.5, 0.5), but every token is
    collapsed, so the site alarms."""
    logits = np.full((32, 4), -12.0)
    logits[:16, 0] = 0.0
    logits[16:, 1] = 0.0
    margin, collapsed = _by_hand(logits, ROUTING_ALARM)
    assert collapsed.all()
    s, new, _ = _judged(logits, ROUTING_ALARM)
    averaged = torch.from_numpy(logits).float().softmax(-1).mean(0)
    assert float(averaged.max()) == pytest.approx(0.5, abs=1e-4)
    assert s["collapsed"] == 1.0
    assert s["margin"] == pytest.approx(margin.mean(), abs=1e-5)
    assert new


# (threshold, [(tokens, logits of each)]): the top-1 mass and saturation hold, but never on one
# token. At the default 0.95 only the spread can part from the top-1 mass: a margin above 10
# nats forces a top-1 mass above 1 / (1 + (S - 1) e^-10), which exceeds 0.95 for S < 1161.
APART = [
    # most tokens lean on one source (margin 7, top-1 0.994); a few, split two ways (top-1
    # 0.62), have a stale source 80 nats down: averaged, top-1 0.957 and spread 14.3
    (ROUTING_ALARM, [(36, [0.0] + [-7.0] * 7), (4, [0.0, -0.5] + [-80.0] * 6)]),
    # near 1 the margin itself parts from the top-1 mass: half the tokens above 0.9999 with a
    # margin of 9.9, half saturated (margin 10.2) at top-1 0.99989: averaged, top-1 0.99992,
    # margin 10.05
    (0.9999, [(16, [0.0, -9.9, -40.0, -40.0]), (16, [0.0, -10.2, -10.2, -10.2])]),
]


@pytest.mark.parametrize(("threshold", "groups"), APART)
def test_the_two_conditions_must_hold_on_the_same_tokens(
    threshold: float, groups: list[tuple[int, list[float]]]
) -> None:
    """Tokens above the threshold and tokens with a saturated softmax, but none both: no token
    is collapsed and the site does not alarm, though its averages pass both cuts (and the
    averaged rule alarmed)."""
    logits = np.concatenate([np.tile(row, (n, 1)) for n, row in groups])
    margin, collapsed = _by_hand(logits, threshold)
    assert not collapsed.any()
    s, new, old = _judged(logits, threshold)
    assert s["collapsed"] == 0.0
    assert s["margin"] == pytest.approx(margin.mean(), abs=1e-5)
    assert s["top1"] > threshold and s["spread"] > SATURATED
    assert old and not new


@pytest.mark.parametrize(
    ("share", "sources", "collapsed"),
    [(0.5, 2, False), (0.52, 2, True), (math.nan, 2, False), (1.0, 1, False)],
)
def test_a_site_alarms_when_most_of_its_tokens_collapsed(
    share: float, sources: int, collapsed: bool
) -> None:
    """The cut is a strict majority of the site's tokens; NaN (no logits) and a site with one
    source never count."""
    weights = np.array([[1.0] * sources + [np.nan] * (2 - sources)])
    found = collapsed_sites(np.array([1.0]), np.array([0.0]), weights, 0.95, np.array([share]))
    assert found.tolist() == [collapsed]


@pytest.mark.parametrize("value", [0.0, -0.1, 1.01, math.nan])
def test_routing_alarm_outside_zero_one_is_refused(value: float) -> None:
    """train.routing_alarm is a top-1 mass threshold: (0, 1], anything else is bad input."""
    with pytest.raises(ValueError, match="train.routing_alarm"):
        TrainConfig(routing_alarm=value)
    assert TrainConfig(routing_alarm=1.0).routing_alarm == 1.0


SOFTMAX = [
    {"residual": "attnres"},
    {"residual": "block_attnres"},
    {"residual": "attnres", "attnres_query": "input"},
    {"residual": "attnres", "attnres_heads": 2},
    {"residual": "attnres", "attnres_window": 2},
    {"residual": "attnres", "attnres_query": "scalar"},
]
FREE = [
    {"residual": "denseformer"},
    {"residual": "mudd"},
    {"residual": "attnres", "attnres_gate": "sigmoid"},
]
MATRIX = [{"residual": "hyper"}, {"residual": "mhc"}]


def _id(overrides: dict[str, object]) -> str:
    return "-".join(f"{v}" if k == "residual" else f"{k}={v}" for k, v in overrides.items())


def _profile(**overrides: object) -> object:
    cfg = tiny(n_layers=3, attnres_blocks=3, **overrides)
    model = DeepTransformer(cfg)
    idx = torch.randint(0, 32, (2, 12))
    return dilution_profile(model, idx, idx.roll(-1, 1))


@pytest.mark.parametrize("overrides", SOFTMAX, ids=_id)
def test_softmax_wirings_start_uniform_per_token(overrides: dict[str, object]) -> None:
    """Zero queries (or logits) at init: every softmax site is uniform over its sources token by
    token, so its per-token entropy is 1 (a window masks sources: the sources it reads are
    uniform, below 1 over all of them), spread 0; the summaries and the wiring's gradient share
    are reported."""
    p = _profile(**overrides)
    assert p.routing_top1 is not None and p.routing_spread is not None
    assert p.depth_weights is not None and len(p.routing_top1) == len(p.depth_weights)
    counts = np.sum(~np.isnan(p.depth_weights), axis=1)
    if "attnres_window" not in overrides:
        np.testing.assert_allclose(p.routing_top1, 1.0 / counts, rtol=1e-5)
        np.testing.assert_allclose(p.routing_sources, counts, rtol=1e-5)
    np.testing.assert_allclose(p.routing_spread, 0.0, atol=1e-5)
    assert p.routing_margin is not None and p.routing_collapsed is not None
    many = counts >= 2
    np.testing.assert_allclose(p.routing_margin[many], 0.0, atol=1e-5)
    assert (p.routing_collapsed[many] == 0).all() and np.isnan(p.routing_collapsed[~many]).all()
    assert p.collapse_threshold == ROUTING_ALARM
    s = p.summaries()
    names = (Metric.ROUTING_ENTROPY, Metric.ROUTING_TOP1_MAX, Metric.ROUTING_SPREAD_MAX)
    for name in (*names, Metric.ROUTING_MARGIN_MAX, Metric.ROUTING_COLLAPSED_MAX):
        assert name in s
    assert 0.0 < s[Metric.WIRING_GRAD_SHARE] < 1.0


@pytest.mark.parametrize("overrides", FREE + MATRIX, ids=_id)
def test_free_weights_and_matrices_report_shares_but_no_spread(
    overrides: dict[str, object],
) -> None:
    """DenseFormer, MUDDFormer, a sigmoid gate (free weights) and HC / mHC (stream-mixing
    matrices) report per-site entropy, top-1 mass and sources of their absolute weights, in
    range; no logits, so no spread."""
    p = _profile(**overrides)
    assert p.routing_top1 is not None and p.routing_entropy is not None
    assert np.all((p.routing_top1 > 0) & (p.routing_top1 <= 1 + 1e-9))
    for no_logits in (p.routing_spread, p.routing_margin, p.routing_collapsed):
        assert no_logits is not None and np.isnan(no_logits).all()
    summaries = p.summaries()
    for name in (
        Metric.ROUTING_SPREAD_MAX,
        Metric.ROUTING_MARGIN_MAX,
        Metric.ROUTING_COLLAPSED_MAX,
    ):
        assert name not in summaries


def test_standard_has_no_routing() -> None:
    """A plain residual mixes nothing: no routing arrays, no routing summaries, no wiring
    share (it has no parameters of its own)."""
    p = _profile()
    assert p.routing_top1 is None and p.wiring_grad_share is None
    assert not any(k.startswith("dilution/routing") for k in p.summaries())


def test_profile_json_holds_the_per_site_arrays() -> None:
    """The per-site arrays go to the profile artifact (``to_dict``), not to metric keys."""
    data = _profile(residual="attnres").to_dict()
    for name in ("routing_top1", "routing_margin", "routing_collapsed"):
        assert len(data[name]) == 2 * 3 + 1
    assert data["collapse_threshold"] == ROUTING_ALARM
    assert all(not k[-1].isdigit() for k in data["summaries"])
