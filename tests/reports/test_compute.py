"""reports/compute.py and reports/flops.py: power-law fits, the rule for when loss falls with
compute, and compute multipliers checked on curves whose answer the math fixes, plus the
bootstrap's determinism and coverage of its own estimate; a trial's compute, recorded or (for
runs recorded before the count) estimated, and the compute section naming the estimated runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from record.schema import Metric
from reports.compute import (
    PowerLaw,
    compute_advantage,
    compute_multiplier,
    fit_power_law,
    scaling_trend,
)
from reports.document import Paragraph
from reports.flops import estimated_flops, trial_flops
from reports.sections import compute_section
from tests.reports.frames import sweep, trial

A, ALPHA = 400.0, 0.076
COMPUTE = np.logspace(15, 20, 6)


def exact(c: np.ndarray, k: float = 1.0) -> np.ndarray:
    """The baseline curve read at k · C: L_b(k C)."""
    return A * (k * c) ** (-ALPHA)


def test_fit_recovers_exact_power_law() -> None:
    """Noise-free points give back A and alpha, and a perfect fit."""
    fit = fit_power_law(COMPUTE, exact(COMPUTE))
    assert fit.a == pytest.approx(A, rel=1e-9)
    assert fit.alpha == pytest.approx(ALPHA, abs=1e-9)
    assert fit.r2 == pytest.approx(1.0, abs=1e-12) and fit.n == len(COMPUTE)


def test_compute_for_inverts_loss() -> None:
    """compute_for(loss(C)) == C, even at training-scale compute."""
    law = PowerLaw(A, ALPHA, 1.0, 2)
    for c in (1e6, 3e18, 1e23):
        assert law.compute_for(law.loss(c)) == pytest.approx(c, rel=1e-12)


@pytest.mark.parametrize("k", [1.25, 0.8, 3.0])
@pytest.mark.parametrize("at", [1e14, 3e17, 1e21])
def test_multiplier_is_the_compute_shift(k: float, at: float) -> None:
    """L_v(C) = L_b(k C) means the baseline needs k · C wherever it is read."""
    base = fit_power_law(COMPUTE, exact(COMPUTE))
    variant = fit_power_law(COMPUTE, exact(COMPUTE, k))
    assert compute_multiplier(base, variant, at) == pytest.approx(k, rel=1e-9)


def test_identical_fits_have_multiplier_one() -> None:
    """A variant on the baseline's own curve has no advantage."""
    law = PowerLaw(A, ALPHA, 1.0, 6)
    assert compute_multiplier(law, law, 2e18) == pytest.approx(1.0, rel=1e-12)


def noisy(k: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two seeds per compute level, 1% multiplicative noise, seeded so the test is fixed."""
    c = np.repeat(COMPUTE, 2)
    noise = np.random.default_rng(seed).normal(0.0, 0.01, size=len(c))
    return c, exact(c, k) * np.exp(noise)


def test_bootstrap_interval_contains_estimate_and_is_deterministic() -> None:
    """The percentile interval brackets the point estimate; a fixed seed fixes the answer."""
    bc, bl = noisy(1.0, seed=1)
    vc, vl = noisy(1.25, seed=2)
    adv = compute_advantage(bc, bl, vc, vl, n_boot=300, seed=7)
    assert adv.low <= adv.multiplier <= adv.high
    assert 0 < adv.n_boot <= 300
    assert adv == compute_advantage(bc, bl, vc, vl, n_boot=300, seed=7)
    assert adv.low < 1.25 < adv.high


def test_at_compute_defaults_to_geometric_mean_of_variant_compute() -> None:
    """The multiplier is read in the middle of the variant's data, in log space."""
    adv = compute_advantage(COMPUTE, exact(COMPUTE), COMPUTE, exact(COMPUTE, 2.0), n_boot=0)
    assert adv.at_compute == pytest.approx(np.sqrt(1e15 * 1e20))
    assert adv.multiplier == pytest.approx(2.0, rel=1e-9)


def test_exact_falling_law_falls_and_its_exponent_interval_is_the_exponent() -> None:
    """Points exactly on A C^-alpha: every resample fits alpha, so the interval is alpha."""
    trend = scaling_trend(COMPUTE, exact(COMPUTE), n_boot=200)
    assert trend.alpha_low == pytest.approx(ALPHA) and trend.alpha_high == pytest.approx(ALPHA)
    assert trend.distinct == len(COMPUTE) and trend.falls


def test_rising_or_flat_loss_does_not_fall() -> None:
    """Loss that grows with compute, or noise about a flat line whose interval spans zero, is
    not loss falling with compute."""
    assert not scaling_trend(COMPUTE, A * COMPUTE**ALPHA, n_boot=200).falls
    # Two runs per compute value, alternately 2% above and below a flat line: no trend.
    c = np.repeat(COMPUTE, 2)
    flat = 3.0 * np.exp(0.02 * np.repeat([1, -1, 1, -1, 1, -1], 2))
    trend = scaling_trend(c, flat, n_boot=500)
    assert trend.alpha_low < 0 < trend.alpha_high and not trend.falls


def test_two_compute_values_never_fall() -> None:
    """Two compute values fit any power law exactly: too few to say that loss falls."""
    c = np.array([1e18, 1e18, 1e19, 1e19])
    trend = scaling_trend(c, exact(c), n_boot=200)
    assert trend.law.alpha == pytest.approx(ALPHA) and trend.distinct == 2 and not trend.falls


def test_fit_rejects_what_it_cannot_fit() -> None:
    """One compute value, or a non-positive value, is a clear ValueError."""
    with pytest.raises(ValueError, match="2 distinct compute"):
        fit_power_law([1e18, 1e18], [3.0, 3.1])
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([1e18, 1e19], [3.0, 0.0])
    with pytest.raises(ValueError, match="positive"):
        fit_power_law([-1e18, 1e19], [3.0, 2.9])


def test_recorded_flops_win_over_the_estimate() -> None:
    """A trial's recorded final/train_flops is its compute; without one (absent or NaN: recorded
    before the count existed) the estimate stands in."""
    row = pd.Series(trial("standard", 0, 2.0))
    assert trial_flops(row) == estimated_flops(row)
    assert trial_flops(pd.Series({**row, Metric.FINAL_TRAIN_FLOPS: 1.5e15})) == 1.5e15
    assert trial_flops(pd.Series({**row, Metric.FINAL_TRAIN_FLOPS: np.nan})) == estimated_flops(row)


def test_estimate_is_6nd_plus_attention() -> None:
    """The estimate: 6 per non-embedding parameter (the recorded count less the tied embedding)
    plus 6 n_layers seq_len d_model, per token of every step; twice the steps, twice the FLOPs."""
    row = pd.Series(trial("standard", 0, 2.0))
    n, d, vocab, seq = 4, 32, 256, 32
    tokens = 20 * 4 * seq  # max_steps x batch_size x seq_len
    per_token = 6 * (12 * n * d * d) + 6 * n * seq * d  # frames.trial's parameter count
    assert estimated_flops(row) == per_token * tokens
    assert row[Metric.FINAL_PARAMS] == 12 * n * d * d + vocab * d
    longer = pd.Series({**row, "train.max_steps": 40})
    assert estimated_flops(longer) == 2 * estimated_flops(row)


def test_compute_section_names_the_runs_placed_by_the_estimate() -> None:
    """Runs with a recorded count are fitted on it and named nowhere; the note lists exactly the
    runs without one, and is absent when every run has one."""
    rows = []
    for residual in ("standard", "block_attnres"):
        for d in (32, 64, 96):
            for seed in (0, 1):
                row = trial(residual, seed, 1.0, model__residual=residual, model__d_model=d)
                row[Metric.FINAL_TRAIN_FLOPS] = 1e12 * d * (2 if residual == "standard" else 3)
                row[Metric.FINAL_VAL_LOSS] = 50.0 * row[Metric.FINAL_TRAIN_FLOPS] ** -0.05
                rows.append(row)

    def notes(rows: list[dict[str, object]]) -> list[str]:
        section = compute_section(sweep(rows))
        assert section is not None
        return [b.text for b in section.blocks if isinstance(b, Paragraph) and "recorded" in b.text]

    assert notes(rows) == []
    rows[0][Metric.FINAL_TRAIN_FLOPS] = np.nan  # standard, d 32, seed 0
    del rows[7][Metric.FINAL_TRAIN_FLOPS]  # block_attnres, d 32, seed 1
    (note,) = notes(rows)
    assert note.startswith("2 of the 12 fitted runs were recorded before their FLOPs were:")
    assert "`block_attnres` seed 1, `standard` seed 0." in note
