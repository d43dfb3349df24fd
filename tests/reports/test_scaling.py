"""The compute-advantage section on constructed sweeps whose losses are fixed functions of the
report's own FLOP count: a multiplier only where each loss falls with compute over enough
distinct compute values, and then the compute shift the losses were built with."""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
import pytest

from record.schema import Metric
from reports.document import Paragraph, Section, Table
from reports.flops import trial_flops
from reports.sections import compute_section
from tests.reports.frames import sweep, trial

A, ALPHA = 40.0, 0.05
WIRINGS = {"standard": "standard/pre", "block_attnres": "block_attnres/pre"}


def _runs(widths: tuple[int, ...], loss_of: dict[str, Callable[[float], float]]) -> Section | None:
    """Two seeds per width and wiring; each run's final loss is ``loss_of[residual](C)`` at its
    training FLOPs C as the report counts them."""
    rows = []
    for residual, law in loss_of.items():
        for d in widths:
            for seed in (0, 1):
                row = trial(residual, seed, 1.0, model__residual=residual, model__d_model=d)
                row[Metric.FINAL_VAL_LOSS] = law(trial_flops(pd.Series(row)))
                rows.append(row)
    return compute_section(sweep(rows))


def _multipliers(section: Section) -> dict[str, str]:
    table = next(b for b in section.blocks if isinstance(b, Table))
    return {r[0]: r[-1] for r in table.rows}


def _text(section: Section) -> str:
    return " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))


def test_loss_rising_with_compute_gives_no_multiplier() -> None:
    """Equal-step depth sweeps: loss grows with compute for both wirings, so no multiplier is
    printed, and one sentence says why."""
    rising = lambda c: A * c**ALPHA  # noqa: E731
    section = _runs((32, 64, 96, 128), {"standard": rising, "block_attnres": rising})
    assert section is not None
    assert set(_multipliers(section).values()) == {"—"}
    text = _text(section)
    assert "×" not in text  # not even the paper's figure beside an empty column
    (sentence,) = [
        p.text
        for p in section.blocks
        if isinstance(p, Paragraph) and "No compute multiplier" in p.text
    ]
    assert "rises with compute" in sentence and "confounded with compute" in sentence
    assert sentence.count(". ") == 0 and sentence.endswith(".")  # one sentence


@pytest.mark.parametrize("k", [1.7, 0.6])
def test_multiplier_recovers_a_known_compute_shift(k: float) -> None:
    """Baseline L(C) = A C^-alpha, variant L(k C): the baseline needs k times the compute, so
    the multiplier's interval contains k. The losses are exact, so every bootstrap fit recovers
    k up to rounding; the only tolerance is the cell's two decimals (half a unit: 0.005)."""
    laws = {
        "standard": lambda c: A * c**-ALPHA,
        "block_attnres": lambda c: A * (k * c) ** -ALPHA,
    }
    section = _runs((32, 64, 96, 128), laws)
    assert section is not None
    cell = _multipliers(section)[WIRINGS["block_attnres"]]
    point, low, high = (
        float(x) for x in re.fullmatch(r"([\d.]+)× \[([\d.]+), ([\d.]+)\]", cell).groups()
    )
    assert low - 0.005 <= k <= high + 0.005
    assert point == pytest.approx(k, abs=0.005)
    assert "No compute multiplier" not in _text(section)


def test_two_compute_values_are_too_few_for_a_multiplier() -> None:
    """A power law through two compute values fits any two points: even a loss that falls with
    compute gets no multiplier, and the sentence names the count."""
    laws = {
        "standard": lambda c: A * c**-ALPHA,
        "block_attnres": lambda c: A * (1.5 * c) ** -ALPHA,
    }
    section = _runs((32, 64), laws)
    assert section is not None
    assert set(_multipliers(section).values()) == {"—"}
    assert "spans 2 distinct compute values" in _text(section)
