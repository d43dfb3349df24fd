"""The report's seeds section on constructed sweeps (``reports.sections.seeds``): one sentence per
comparison with its interval, what the seeds could detect and the seeds an effect needs, at
Holm's first-step level over the results table's tests; the cannot-estimate text under 3 seeds;
a noisy arm named; each seed's final loss listed; and ``nas report --effect``'s bad input
refused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from nas.cli import build_parser, main
from reports.build import build_report
from reports.document import Paragraph, Table
from reports.power import DEFAULT_EFFECT, POWER, mde, seeds_needed
from reports.render_md import render_markdown
from reports.sections.results import main_table
from reports.sections.seeds import PAIRING, seed_section
from reports.tidy import arm_table
from tests.reports.frames import sweep, trial

BLOCK = {"model__residual": "block_attnres"}
FULL = {"model__residual": "attnres"}
# Per-seed final losses: block_attnres is about 0.05 below standard with paired noise ~0.01;
# attnres has one seed far off the others.
STANDARD = (3.00, 3.02, 2.98, 3.01)
BLOCK_LOSSES = (2.95, 2.96, 2.94, 2.95)
FULL_LOSSES = (3.00, 3.03, 2.97, 3.40)


def _rows(**per_arm: tuple[tuple[float, ...], dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        trial(arm, seed, loss, **config)
        for arm, (losses, config) in per_arm.items()
        for seed, loss in enumerate(losses)
    ]


def _data() -> Any:
    return sweep(
        _rows(
            standard=(STANDARD, {}),
            block_attnres=(BLOCK_LOSSES, BLOCK),
            attnres=(FULL_LOSSES, FULL),
        )
    )


def _section(data: Any, effect: float = 0.02) -> Any:
    _, rows = main_table(data, None)
    section = seed_section(data, rows, effect)
    assert section is not None
    return section, rows


def _texts(section: Any) -> list[str]:
    return [b.text for b in section.blocks if isinstance(b, Paragraph)]


def test_each_comparison_gets_one_actionable_sentence_at_holms_first_step() -> None:
    """The block_attnres sentence gives its Δ and interval, the MDE at its 4 seeds and the seeds
    that 0.02 needs, both computed at α = 0.05 / 2 (two comparisons tested) from the sd of the
    paired differences; the table shows the same numbers."""
    section, rows = _section(_data())
    block = next(r for r in rows if r.arm == "block_attnres")
    c = block.comparison
    assert c is not None and c.test == "paired t" and c.n == 4
    diffs = [b - s for b, s in zip(BLOCK_LOSSES, STANDARD, strict=True)]
    assert c.sd == pytest.approx(pd.Series(diffs).std())
    alpha = 0.05 / 2
    detect = mde(c.sd, 4, alpha, POWER, paired=True)
    need = seeds_needed(c.sd, 0.02, alpha, POWER, paired=True)
    sentence = next(t for t in _texts(section) if t.startswith("`block_attnres` vs `standard`"))
    assert sentence == (
        f"`block_attnres` vs `standard`: Δ {c.diff:+.4f} [{c.low:+.4f}, {c.high:+.4f}]; with 4 "
        f"seeds this sweep could detect |Δ| ≥ {detect:.4f}; about {need} seeds per arm would "
        "detect 0.02."
    )
    table = next(b for b in section.blocks if isinstance(b, Table) and "MDE" in " ".join(b.columns))
    assert "α = 0.025 (Holm's first step)" in table.caption
    row = next(r for r in table.rows if r[0] == "block_attnres")
    assert row[5] == f"{detect:.4f}" and row[6] == str(need)


def test_the_sentence_appears_in_the_rendered_report_and_follows_the_effect() -> None:
    """The rendered Markdown carries the sentence; ``effect`` changes the seeds asked for."""
    text, _ = render_markdown(build_report(_data(), effect=0.1))
    assert "## Seeds: noise and what this sweep could detect" in text
    line = next(x for x in text.splitlines() if x.startswith("`block_attnres` vs `standard`: Δ"))
    assert "with 4 seeds this sweep could detect |Δ| ≥ " in line
    assert line.endswith("its 4 seeds already suffice to detect 0.1.")
    assert "seeds for \\|Δ\\| = 0.1" in text or "seeds for |Δ| = 0.1" in text


def test_fewer_than_three_seeds_say_the_noise_cannot_be_estimated() -> None:
    """Two seeds per arm: a paired test runs, but the section prints no MDE, only the
    cannot-estimate sentence, and no table of numbers."""
    data = sweep(_rows(standard=(STANDARD[:2], {}), block_attnres=(BLOCK_LOSSES[:2], BLOCK)))
    section, _ = _section(data)
    (sentence,) = [t for t in _texts(section) if " vs " in t]
    assert sentence.startswith("`block_attnres` vs `standard`: Δ ")
    assert "from 2 seeds: the seed noise cannot be estimated from fewer than 3 seeds" in sentence
    assert "could detect |Δ| ≥" not in sentence
    assert not any(isinstance(b, Table) and "MDE" in " ".join(b.columns) for b in section.blocks)


def test_a_comparison_too_few_seeds_to_test_is_not_in_holms_family() -> None:
    """An arm of one seed is not tested, so Holm's family is the one other comparison: α 0.05,
    and its own sentence says the noise cannot be estimated."""
    data = sweep(
        _rows(
            standard=(STANDARD[:3], {}),
            block_attnres=(BLOCK_LOSSES[:3], BLOCK),
            attnres=(FULL_LOSSES[:1], FULL),
        )
    )
    section, _ = _section(data)
    table = next(b for b in section.blocks if isinstance(b, Table) and "MDE" in " ".join(b.columns))
    assert "α = 0.05 (Holm's first step)" in table.caption
    assert "Holm's first step over the 1 comparison the results table tests" in _texts(section)[0]
    (single,) = [t for t in _texts(section) if t.startswith("`attnres` vs")]
    assert "from 1 seed: the seed noise cannot be estimated" in single


def test_unpaired_comparison_shows_each_arms_sd() -> None:
    """Different seed sets: Welch's test, the noise shown per arm, sized from their RMS sd."""
    data = sweep(
        [trial("standard", s, v) for s, v in enumerate(STANDARD[:3])]
        + [trial("block_attnres", s + 10, v, **BLOCK) for s, v in enumerate(BLOCK_LOSSES[:3])]
    )
    section, rows = _section(data)
    block = next(r for r in rows if r.arm == "block_attnres")
    base = next(r for r in rows if r.arm == "standard")
    assert block.comparison is not None and block.comparison.test == "Welch t"
    assert block.comparison.sd == pytest.approx(
        math.sqrt((block.final.sd**2 + base.final.sd**2) / 2)
    )
    table = next(b for b in section.blocks if isinstance(b, Table) and "MDE" in " ".join(b.columns))
    assert table.rows[0][4] == f"{block.final.sd:.4f} (arm), {base.final.sd:.4f} (baseline)"
    detect = mde(block.comparison.sd, 3, 0.05, POWER, paired=False)
    assert table.rows[0][5] == f"{detect:.4f}"


def test_noisy_arm_is_named_as_a_finding() -> None:
    """attnres's outlier seed makes its sd many times the others': named, with its ratio."""
    section, _ = _section(_data())
    (warning,) = [b for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert warning.text.startswith("`attnres`'s seeds spread more than the other arms'")
    assert "A noisy arm is itself a finding" in warning.text


def test_each_seeds_final_loss_is_listed() -> None:
    """Per arm, every seed's final loss in seed order, so the outlier seed 3 is visible."""
    section, _ = _section(_data())
    table = next(
        b
        for b in section.blocks
        if isinstance(b, Table) and b.columns[0] == "arm" and "final val loss by seed" in b.columns
    )
    cells = {row[0]: row[1] for row in table.rows}
    assert cells["attnres"] == "0: 3.0000, 1: 3.0300, 2: 2.9700, 3: 3.4000"


@pytest.mark.parametrize("value", ["0", "-0.01", "abc", "nan", "inf"])
def test_bad_effect_exits_2_with_one_line_and_writes_nothing(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["report", "x", "--effect", value, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--effect" in err and value in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_effect_flag_parses_a_number_and_leaves_the_default_to_the_report() -> None:
    """``--effect`` parses a positive number; without it, None: the report takes the sweep's
    recorded effect, else ``DEFAULT_EFFECT`` (the test above)."""
    parser = build_parser()
    assert parser.parse_args(["report", "x", "--effect", "0.05"]).effect == 0.05
    assert parser.parse_args(["report", "x"]).effect is None


def test_a_seeds_auto_sweep_gets_one_note_with_its_choice() -> None:
    """A sweep that ``--seeds auto`` sized (its ``seeds.json``): one note with the seeds chosen,
    the pilot, the effect, power, level and cap, and each comparison's sd and need."""
    data = _data()
    data = type(data)(**{**_fields(data), "seeds_auto": SEEDS_AUTO})
    section, _ = _section(data)
    notes = [t for t in _texts(section) if t.startswith("`--seeds auto`")]
    assert notes == [
        "`--seeds auto` chose 4 seeds per arm from a pilot of 3, from the pilot's noise alone "
        "(never its Δ): the seeds each comparison needs to detect 0.005 nats at 80% power and "
        "α = 0.025 each, at most 5 (block_attnres vs standard: sd 0.0023 over 3 pairs, 4; "
        "attnres vs standard: sd 0.0400 over 3 pairs, over the cap)."
    ]


SEEDS_AUTO = {
    "pilot_seeds": [0, 1, 2],
    "effect": 0.005,
    "power": 0.8,
    "alpha": 0.05,
    "alpha_each": 0.025,
    "max_seeds": 5,
    "seeds": 4,
    "comparisons": {
        "block_attnres": {"baseline": "standard", "n": 3, "sd": 0.0023, "needed": 4},
        "attnres": {"baseline": "standard", "n": 3, "sd": 0.04, "needed": None},
    },
}


def _fields(data: Any) -> dict[str, Any]:
    import dataclasses

    return {f.name: getattr(data, f.name) for f in dataclasses.fields(data) if f.init}


def test_the_effect_defaults_to_the_one_seeds_auto_sized_the_sweep_for() -> None:
    """A sweep that ``--seeds auto`` sized for 0.1 is reported for 0.1 unless ``--effect`` says
    otherwise, and the report says which one it used and why."""
    data = dataclasses.replace(
        _data(), seeds_auto={"pilot_seeds": [0, 1, 2], "effect": 0.1, "max_seeds": 5, "power": 0.8}
    )
    recorded, _ = render_markdown(build_report(data))
    assert "would detect |Δ| = 0.1 nats (the effect this sweep's `--seeds auto` was sized for)" in (
        recorded
    )
    given, _ = render_markdown(build_report(data, effect=0.03))
    assert "would detect |Δ| = 0.03 nats (`--effect`)" in given
    plain, _ = render_markdown(build_report(_data()))
    assert f"would detect |Δ| = {DEFAULT_EFFECT:g} nats (the default" in plain


def test_a_paired_comparison_says_what_a_seed_fixes() -> None:
    section, _ = _section(_data())
    assert PAIRING in section.blocks
    unpaired = sweep(
        [trial("standard", s, v) for s, v in enumerate(STANDARD[:3])]
        + [trial("block_attnres", s + 10, v, **BLOCK) for s, v in enumerate(BLOCK_LOSSES[:3])]
    )
    section, _ = _section(unpaired)
    assert PAIRING not in section.blocks


def test_arms_csv_carries_the_seeds_sections_numbers() -> None:
    """``arms.csv`` gives each comparison's noise, level, MDE and seeds needed, the numbers the
    seeds section prints; an arm compared on 2 seeds leaves them empty (not estimated)."""
    data = _data()
    _, rows = main_table(data, None)
    table = arm_table(data, rows, 0.02).set_index("arm")
    c = next(r for r in rows if r.arm == "block_attnres").comparison
    assert c is not None
    block = table.loc["block_attnres"]
    assert (block["noise_sd"], block["alpha"], block["effect"]) == (c.sd, 0.05 / 2, 0.02)
    assert block["mde"] == pytest.approx(mde(c.sd, 4, 0.05 / 2, POWER, paired=True), rel=1e-12)
    assert block["seeds_needed"] == seeds_needed(c.sd, 0.02, 0.05 / 2, POWER, paired=True)
    assert math.isnan(table.loc["standard", "mde"])  # the baseline has no comparison
    two = sweep(_rows(standard=(STANDARD[:2], {}), block_attnres=(BLOCK_LOSSES[:2], BLOCK)))
    _, rows = main_table(two, None)
    assert arm_table(two, rows, 0.02)[["noise_sd", "mde", "seeds_needed"]].isna().all().all()
