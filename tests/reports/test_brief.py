"""The report's results table in brief (``reports.brief``), as ``nas sweep`` ends with it, on
constructed sweeps: the report's own numbers (loss and interval, seeds, Δ, test, Holm-adjusted p,
verdict, the seeds section's MDE) for each arm; and one seed, one arm, no baseline, trials that
did not finish and no finished trial each said in a line."""

from __future__ import annotations

from typing import Any

from record.schema import Status
from reports.brief import MAX_ARMS, NONE_FINISHED, results_brief
from reports.document import Table
from reports.sections.results import main_table
from reports.sections.seeds import seed_section
from tests.reports.frames import sweep, trial

BLOCK = {"model__residual": "block_attnres", "model__attnres_blocks": 4}
# The demo's per-seed final losses (docs/results/demo/report.md): block_attnres better, paired.
STANDARD = (2.2777, 2.3111, 2.3307, 2.3465, 2.3257, 2.2651)
BLOCK_LOSSES = (2.2506, 2.2695, 2.2641, 2.3047, 2.2666, 2.2690)


def _rows(arm: str, losses: tuple[float | None, ...], **config: Any) -> list[dict[str, Any]]:
    return [trial(arm, seed, loss, **config) for seed, loss in enumerate(losses)]


def _line(lines: list[str], arm: str) -> str:
    """The table row of ``arm``."""
    return next(line for line in lines if line.split()[:1] == [arm])


def _cell(table: Table, arm: str, column: str) -> str:
    row = next(r for r in table.rows if r[0].removesuffix(" (baseline)") == arm)
    return row[table.columns.index(column)]


def test_each_arm_shows_the_report_first_table_numbers_and_its_mde() -> None:
    """The demo's two arms: each row holds the report's loss ± interval, seeds, Δ [CI], test,
    p (Holm) and verdict, and the seeds section's MDE, as the report prints them."""
    data = sweep(_rows("standard", STANDARD) + _rows("block_attnres", BLOCK_LOSSES, **BLOCK))
    lines = results_brief(data)
    results, rows = main_table(data, None)
    table = results.blocks[0]
    seeds = seed_section(data, rows)
    assert isinstance(table, Table) and seeds is not None
    mde = next(b for b in seeds.blocks if isinstance(b, Table) and b.columns[0] == "arm")
    block = _line(lines, "block_attnres")
    for column in ("final val loss", "seeds", "test", "p (Holm)", "verdict"):
        assert _cell(table, "block_attnres", column) in block, column
    assert _cell(table, "block_attnres", "Δ vs baseline [95% CI]").removesuffix(" *") in block
    assert _cell(mde, "block_attnres", "MDE (80% power)") in block
    assert "-0.0387 [-0.0651, -0.0123]" in block and "better" in block and "0.013" in block
    standard = _line(lines, "standard")
    assert _cell(table, "standard", "final val loss") in standard and "baseline" in standard
    assert lines.index(block) < lines.index(standard)  # sorted by loss, as the report
    assert any("Holm-corrected over 1 test" in line for line in lines)
    assert not any("model:" in line or "residual:" in line for line in lines)  # no YAML


def test_one_seed_per_arm_has_no_interval_and_says_so() -> None:
    """One seed each: the loss without ±, Δ with the verdict 'too few seeds', no test columns,
    and a line saying why and what to run."""
    data = sweep(_rows("standard", (2.3,)) + _rows("block_attnres", (2.2,), **BLOCK))
    lines = results_brief(data)
    table = [line for line in lines if line.startswith("  ")]
    assert not any("±" in line or "MDE" in line or "p (Holm)" in line for line in table)
    assert "-0.1000" in _line(lines, "block_attnres")
    assert "too few seeds" in _line(lines, "block_attnres")
    assert any(line.startswith("one seed per arm: no interval and no test") for line in lines)
    assert any("`--seeds 0,1,2`" in line for line in lines)


def test_one_arm_has_no_delta() -> None:
    """A sweep of one arm: its loss and seeds, no Δ column, and one line saying why."""
    lines = results_brief(sweep(_rows("standard", (2.30, 2.31, 2.29))))
    assert "2.3000 ± " in _line(lines, "standard")
    assert not any("Δ vs baseline" in line for line in lines)
    assert "one arm: no Δ to compute." in lines


def test_arms_without_a_baseline_say_how_to_name_one() -> None:
    """No standard/pre arm: no Δ, and the report's --baseline named."""
    data = sweep(
        _rows("attnres", (2.3, 2.4), model__residual="attnres")
        + _rows("block_attnres", (2.2, 2.3), **BLOCK)
    )
    lines = results_brief(data)
    assert not any("Δ vs baseline" in line for line in lines)
    assert any("`nas report --baseline ARM`" in line for line in lines)


def test_trials_that_did_not_finish_are_counted_not_averaged() -> None:
    """A diverged and a failed seed: the arm's statistics over its one finished seed (Welch
    against the baseline's three), and a line saying how its other seeds ended."""
    block = [
        trial("block_attnres", 0, 2.2, **BLOCK),
        trial("block_attnres", 1, None, Status.DIVERGED, "loss is nan", **BLOCK),
        trial("block_attnres", 2, None, Status.FAILED, "worker died", **BLOCK),
    ]
    lines = results_brief(sweep(_rows("standard", (2.30, 2.31, 2.29)) + block))
    row = _line(lines, "block_attnres").split()
    assert row[1:3] == ["2.2000", "1"]
    assert "block_attnres: 1 of 3 seeds diverged, 1 of 3 failed; its statistics are over the 1" in (
        " ".join(lines)
    )


def test_no_finished_trial_is_one_line() -> None:
    """Every trial diverged or failed: one line, no table."""
    data = sweep(
        [
            trial("standard", 0, None, Status.DIVERGED),
            trial("block_attnres", 0, None, Status.FAILED, **BLOCK),
        ]
    )
    assert results_brief(data) == [NONE_FINISHED]
    assert results_brief(sweep([])) == [NONE_FINISHED]


def test_many_arms_show_the_best_and_say_how_many() -> None:
    """More arms than a screen holds: the best ``MAX_ARMS``, and how many there are."""
    rows = [
        r
        for n in range(MAX_ARMS + 2)
        for r in _rows(
            f"standard/n_layers={n + 1}",
            (3.0 - n / 100, 3.01 - n / 100),
            **{"model__n_layers": n + 1},
        )
    ]
    lines = results_brief(sweep(rows))
    assert sum(line.startswith("  standard/") for line in lines) == MAX_ARMS
    assert f"  (the best {MAX_ARMS} of {MAX_ARMS + 2} arms; `nas report` lists them all)" in lines
