"""The learning-rate transfer section (``reports.lr_transfer``, ``reports.sections.lr_transfer``)
on constructed stages: an optimum that moves with depth is reported as drift with its slope, one
that stays put as no drift, an optimum on the grid's edge as a bound; sweeps whose stage spans
one depth have no such section."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from reports.build import build_report
from reports.document import Figure, Paragraph, Table
from reports.lr_transfer import drift, fit_slope, refine
from reports.sections import transfer_section
from search_spaces.lr_stage import LrStage, choose
from tests.reports.frames import sweep, trial

STAGE = LrStage("train.lr", 1e-3, 6.4e-2, points=7)  # powers of two
VALUES = STAGE.values()
DEPTHS = (2, 4, 8, 16)


def _basin(optimum: float, width: float = 0.05) -> dict[float, float]:
    """A loss per grid value, quadratic in log learning rate with its minimum at ``optimum``."""
    return {v: 3.0 + width * math.log(v / optimum) ** 2 for v in VALUES}


def _optimum(depth: int, slope: float) -> float:
    """The constructed optimum at ``depth``: moving as L^slope, off the grid, about the grid's
    middle value (8e-3) at the depths' geometric mean, so a slope up to 1 stays inside."""
    return 1.1 * 8e-3 * ((depth / 2) / 2**1.5) ** slope


def _choices(slope: float, noise: float = 0.0, seed: int = 0) -> dict[int, Any]:
    """Each depth's stage choice where the optimum is ``_optimum``, the losses jittered by
    ``noise`` nats (seeded)."""
    rng = np.random.default_rng(seed)
    out = {}
    for depth in DEPTHS:
        basin = _basin(_optimum(depth, slope))
        out[depth] = choose({v: [m + noise * rng.standard_normal()] for v, m in basin.items()})
    return out


def test_the_parabola_recovers_an_optimum_between_grid_points() -> None:
    """A quadratic basin in log lr whose minimum lies between two grid values: the choice is
    the nearer grid value, the refined estimate the true minimum."""
    choice = choose({v: [m] for v, m in _basin(5e-3).items()})
    assert choice is not None
    optimum = refine(VALUES, 4, choice)
    assert optimum.best == 0.004 and optimum.bracketed
    assert optimum.estimate == pytest.approx(5e-3, rel=1e-9)


@pytest.mark.parametrize("slope", [-1.0, -0.5, 0.5, 1.0])
def test_a_constructed_drift_is_reported_as_drift(slope: float) -> None:
    """An optimum moving as L^slope is found to drift, with that slope and an interval that
    excludes 0; the chosen grid value moves by slope x 3 grid points from 2 to 16 blocks (the
    grid steps by 2, the depths by 8 = 2^3), to within the one step the grid rounds to."""
    found = drift("standard/sp", VALUES, _choices(slope))
    assert found.verdict == "drifts"
    assert found.slope == pytest.approx(slope, abs=1e-6)
    assert found.low < slope < found.high or found.stderr == pytest.approx(0, abs=1e-9)
    assert abs(found.steps_moved - 3 * slope) < 1
    assert found.resolution == pytest.approx(1 / 3)


def test_flat_optima_are_no_drift() -> None:
    """The same optimum at every depth: slope 0, no drift detected, the choice unmoved."""
    found = drift("standard/completep", VALUES, _choices(0.0))
    assert (found.verdict, found.slope, found.steps_moved) == ("no drift detected", 0.0, 0)


@pytest.mark.parametrize("seed", range(5))
def test_noise_alone_never_moves_the_choice_into_a_drift(seed: int) -> None:
    """Flat optima with the losses jittered by 3 millinats: the grid's choice stays put and the
    verdict is never "drifts"; at most (the 95% interval missing 0, one time in twenty) a
    drift within a step, which says the grid's choice did not move."""
    found = drift("standard/completep", VALUES, _choices(0.0, noise=0.003, seed=seed))
    assert found.verdict in ("no drift detected", "drifts within a step")
    assert found.steps_moved == 0
    assert abs(found.slope) < 0.1


def test_a_noisy_drift_is_still_drift_and_its_interval_holds_the_truth() -> None:
    """A slope of -1 under 3 millinats of noise: drift, the 95% interval containing -1."""
    for seed in range(5):
        found = drift("standard/sp", VALUES, _choices(-1.0, noise=0.003, seed=seed))
        assert found.verdict == "drifts"
        assert found.low <= -1.0 <= found.high


def test_the_slope_fit_and_its_interval() -> None:
    """Points on a power law fit exactly with zero error; two points have no interval."""
    slope, stderr, low, high = fit_slope([2, 4, 8], [1.0, 0.5, 0.25])
    assert (slope, stderr) == (pytest.approx(-1.0), pytest.approx(0.0, abs=1e-12))
    assert low == pytest.approx(-1.0) and high == pytest.approx(-1.0)
    assert fit_slope([2, 4], [1.0, 2.0])[0] == pytest.approx(1.0)
    assert math.isnan(fit_slope([2, 4], [1.0, 2.0])[1])


# ---- the section, on a constructed sweep ------------------------------------------------------


def _stage_sweep(
    slopes: dict[str, float], depths: tuple[int, ...] = DEPTHS, again: float | None = None
) -> Any:
    """A tuned grid's stage: each family (wiring/parametrization -> the slope its optimum moves
    with) at each depth, one seed per grid value, the optimum at ``_optimum``; with ``again``,
    the space's seed 1 at each chosen value, its loss ``again`` nats above the stage's there."""
    rows, arms = [], {}
    for family, slope in slopes.items():
        wiring, parametrization = family.split("/")
        for depth in depths:
            label = f"{family}/n_layers={depth}"
            keys = {}
            for value, loss in _basin(_optimum(depth, slope)).items():
                config = {
                    "model__n_layers": depth,
                    "model__residual": wiring,
                    "model__parametrization": parametrization,
                    "train__lr": value,
                }
                row = trial(f"{label}/lr={value!r}", 0, loss, **config)
                key = f"stage-{label}-{value!r}"
                rows.append({**row, "key": key, "run_id": key})
                keys[repr(value)] = [key]
            arms[label] = {"keys": keys}
            if again is not None:
                basin = _basin(_optimum(depth, slope))
                best = min(basin, key=lambda v: basin[v])
                config = {**config, "train__lr": best}
                rows.append(trial(label, 1, basin[best] + again, **config))
    state = {"param": "train.lr", "values": list(VALUES), "seeds": 1, "arms": arms}
    return sweep(rows, lr_stage=state)


def test_the_section_reports_drift_under_one_family_and_none_under_the_other() -> None:
    """standard/sp's optimum halves with each doubling of depth, standard/completep's stays:
    the table gives each family's best per depth (refined in brackets), slope and verdict; the
    text calls the first drift and the second no drift, with no edge warning; both figures are
    drawn; the report carries the section."""
    data = _stage_sweep({"standard/sp": -1.0, "standard/completep": 0.0})
    section = transfer_section(data)
    assert section is not None
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert table.columns[:5] == ("family", "L=2", "L=4", "L=8", "L=16")
    rows = {r[0]: r for r in table.rows}
    assert rows["standard/sp"][1:5] == (
        "0.032 (0.0249)",
        "0.016 (0.0124)",
        "0.008 (0.00622)",
        "0.004 (0.00311)",
    )
    assert rows["standard/sp"][-2:] == ("-3", "drifts")
    assert rows["standard/completep"][1] == "0.008 (0.0088)"
    assert rows["standard/completep"][-2:] == ("+0", "no drift detected")
    texts = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert any(t.startswith("standard/sp: the optimum drifts with depth") for t in texts)
    assert any(t.startswith("standard/completep: no drift detected") for t in texts)
    assert not [b for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    names = [b.name for b in section.blocks if isinstance(b, Figure)]
    assert names == ["lr_transfer_basins", "lr_transfer_optima"]
    assert section.title in [s.title for s in build_report(data).sections]


def test_an_optimum_beyond_the_grid_is_a_bound() -> None:
    """An optimum moving as L^-2 leaves the grid at depth: those depths' best is the grid's
    lowest value, marked and warned of as not bracketed (the slope through them a bound)."""
    section = transfer_section(_stage_sweep({"standard/sp": -2.0}))
    assert section is not None
    row = next(b for b in section.blocks if isinstance(b, Table)).rows[0]
    assert row[4] == "0.001*"
    warnings = [b.text for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert warnings and all(w.startswith("standard/sp at ") for w in warnings)
    assert "the grid's lowest value, not bracketed" in warnings[-1]


def test_a_stage_at_one_depth_has_no_transfer_section() -> None:
    """One depth per family (or no stage at all): nothing to transfer across."""
    assert transfer_section(_stage_sweep({"standard/sp": -1.0}, depths=(4,))) is None
    assert transfer_section(sweep([trial("a", 0, 3.0)])) is None


def test_seed_noise_at_the_optimum_larger_than_the_lead_is_warned_of() -> None:
    """The space's seed at each chosen value 0.3 nats off the stage's loss: the section gives
    that median and the chosen values' lead, and warns that the choice (and any drift) is within
    seed noise; 0.001 nats off, below every lead, says the numbers and warns of nothing."""
    noisy = transfer_section(_stage_sweep({"standard/sp": -1.0}, again=0.3))
    assert noisy is not None
    texts = [b.text for b in noisy.blocks if isinstance(b, Paragraph)]
    assert any(t.startswith("Seed noise at the optimum") and "median of 0.300" in t for t in texts)
    warned = [b.text for b in noisy.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert any("within seed noise" in w for w in warned)
    quiet = transfer_section(_stage_sweep({"standard/sp": -1.0}, again=0.001))
    assert quiet is not None
    assert not [b for b in quiet.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert any("median of 0.001" in b.text for b in quiet.blocks if isinstance(b, Paragraph))
