"""How trials that did not finish reach the report, on constructed sweeps: counted per arm in
words, kept out of means, intervals and tests, shown as divergence per cell at depth, and
listed with their status, step and reason."""

from __future__ import annotations

import numpy as np
import pytest

from record.schema import Status
from reports.build import build_report
from reports.document import Table
from reports.outcomes import counts, describe
from reports.plans import select_plan
from reports.sections import axis_effects, main_table, provenance
from tests.reports.frames import sweep, trial


def _table(section, caption: str) -> Table:
    """The table of ``section`` with this caption."""
    return next(b for b in section.blocks if isinstance(b, Table) and b.caption.startswith(caption))


def _row(table: Table, first: str) -> dict[str, str]:
    """The row whose first cell is ``first``, keyed by column."""
    row = next(r for r in table.rows if r[0].removesuffix(" (baseline)") == first)
    return dict(zip(table.columns, row, strict=True))


def _base(seeds: range = range(3), **config) -> list[dict]:
    return [trial("base", s, 3.0 + 0.1 * s, **config) for s in seeds]


def test_a_diverged_seed_is_counted_not_averaged() -> None:
    """An arm with one diverged seed says "1 of 3 seeds diverged", and its mean is the mean of
    the other two: the diverged run's last finite loss stays out of it."""
    rows = [
        *_base(),
        trial("deep", 0, 0.5, Status.DIVERGED, "loss is nan", step=7, model__norm="layernorm"),
        trial("deep", 1, 3.0, model__norm="layernorm"),
        trial("deep", 2, 3.2, model__norm="layernorm"),
    ]
    section, arms = main_table(sweep(rows), "base")
    row = _row(_table(section, "arms"), "deep")
    assert row["outcomes"] == "1 of 3 seeds diverged"
    assert row["seeds"] == "2"
    assert row["final val loss"].startswith(f"{np.mean([3.0, 3.2]):.4f} ± ")
    (deep,) = [a for a in arms if a.arm == "deep"]
    assert deep.seeds == (1, 2)
    text = " ".join(p.text for p in section.blocks if hasattr(p, "text"))
    assert "`deep`" in text and "survivors" in text


def test_every_status_is_counted_per_arm() -> None:
    """Timed out, failed, stopped early and interrupted seeds are each counted against the arm's
    seeds; only the finished one is in the statistics."""
    ended = [Status.TIMED_OUT, Status.FAILED, Status.STOPPED_EARLY, Status.KILLED]
    rows = [trial("arm", 0, 3.0)]
    rows += [trial("arm", i + 1, 2.0, status) for i, status in enumerate(ended)]
    section, _ = main_table(sweep(rows), None)
    row = _row(_table(section, "arms"), "arm")
    assert row["outcomes"] == (
        "1 of 5 seeds timed out, 1 of 5 failed, 1 of 5 stopped early, 1 of 5 interrupted"
    )
    assert row["seeds"] == "1" and row["final val loss"] == "3.0000"


def test_describe_says_all_finished_or_names_each_other_status() -> None:
    """Counts in words: every seed finished, or each other status as "k of n"."""
    assert describe({Status.FINISHED: 3}) == "all 3 seeds finished"
    assert describe({Status.FINISHED: 1}) == "1 seed finished"
    found = {Status.FINISHED: 1, Status.DIVERGED: 2, Status.TIMED_OUT: 1}
    assert describe(found) == "2 of 4 seeds diverged, 1 of 4 timed out"


def test_an_arm_whose_seeds_all_diverged_stays_in_the_table() -> None:
    """Divergence is a result: an arm with no finished seed is a row with no loss, not a missing
    row, and it is compared with nothing."""
    rows = [
        *_base(),
        *[trial("deep", s, None, Status.DIVERGED, "nan", 3, model__n_layers=64) for s in range(3)],
    ]
    rows += [trial("base", s, 3.0, model__n_layers=64) for s in range(3)]
    section, _ = main_table(sweep(rows), "base")
    row = _row(_table(section, "arms"), "deep")
    assert row["outcomes"] == "3 of 3 seeds diverged"
    assert row["final val loss"] == "—" and row["verdict"] == "none finished"
    assert section.blocks[0].rows[-1][0] == "deep"  # arms without a loss sort last


def test_axis_effects_show_divergence_per_cell() -> None:
    """Each depth cell gives the survivors' mean and how many of its trials diverged; a cell
    where all diverged has no mean but still says so."""
    rows = []
    for depth, lost in ((4, 0), (8, 1), (16, 2)):
        for s in range(2):
            rows.append(trial("standard", s, 3.0 + s, model__n_layers=depth))
            status = Status.DIVERGED if s < lost else Status.FINISHED
            rows.append(
                trial(
                    "attnres", s, 2.0 + s, status, model__n_layers=depth, model__residual="attnres"
                )
            )
    section = axis_effects(sweep(rows))
    table = _table(section, "effect of model.n_layers")
    attnres = _row(table, "attnres")
    assert attnres["4"] == f"{np.mean([2.0, 3.0]):.4f}"
    assert attnres["8"] == "3.0000 (1/2 diverged)"  # seed 0 diverged; seed 1's loss is 3.0
    assert attnres["16"] == "— (2/2 diverged)"
    assert _row(table, "standard")["16"] == f"{np.mean([3.0, 4.0]):.4f}"


def test_run_counts_and_reasons_use_the_statuses() -> None:
    """Provenance counts trials per status and lists each trial outside the statistics with
    its status, the step it ended at and its reason (or what its status implies)."""
    rows = [
        trial("a", 0, 3.0),
        trial("a", 1, None, Status.DIVERGED, "val loss 41.2 above 4x its best", step=12),
        trial("a", 2, None, Status.TIMED_OUT, "ran past 600 s", step=30),
        trial("a", 3, None, Status.STOPPED_EARLY, step=5),
        trial("b", 0, None, Status.INFEASIBLE, "n_heads 3 does not divide d_model 32", step=0),
    ]
    section = provenance(sweep(rows))
    facts = dict(section.blocks[0].rows)
    assert (
        facts["trials"]
        == "1 finished, 1 diverged, 1 timed out, 1 infeasible, 1 stopped early, 0 skipped"
    )
    reasons = {r[0]: r[1:] for r in _table(section, "not in the statistics").rows}
    assert reasons["a seed 1"] == ("diverged", "12", "val loss 41.2 above 4x its best")
    assert reasons["a seed 2"] == ("timed out", "30", "ran past 600 s")
    assert reasons["a seed 3"] == ("stopped early", "5", "stopped by the scheduler (ASHA)")
    assert reasons["key-b-0-4-32"][0] == "infeasible"  # an infeasible trial goes by its key


def test_a_run_still_open_is_not_called_interrupted() -> None:
    """A trial without an outcome whose MLflow run is still open may be training right now: the
    report says "running or interrupted", not "interrupted"; a closed killed run stays
    "interrupted"."""
    live = {**trial("a", 1, None, Status.KILLED, step=None), "run_status": "RUNNING"}
    rows = [trial("a", 0, 3.0), live, trial("a", 2, None, Status.KILLED, step=None)]
    reasons = {r[0]: r[1:] for r in _table(provenance(sweep(rows)), "not in the").rows}
    assert reasons["a seed 1"][0] == "running or interrupted"
    assert "still training" in reasons["a seed 1"][2]
    assert reasons["a seed 2"][0] == "interrupted"
    assert reasons["a seed 2"][2].startswith("interrupted; run the same command")


def test_counts_cover_every_status() -> None:
    """Every status has a count, zero where no trial ended so."""
    found = counts(sweep([trial("a", 0, 3.0)]).trials)
    assert set(found) == set(Status) and sum(found.values()) == 1


def test_latest_plan_keeps_only_its_trials() -> None:
    """``--plan latest`` keeps the trials whose keys the latest plan names, and the report says
    which plan it covers."""
    rows = [trial("a", s, 3.0) for s in range(3)]
    keys = [r["key"] for r in rows]
    plans = [
        {"command": "one", "space": "s", "keys": keys},
        {"command": "two", "space": "s", "keys": keys[1:]},
    ]
    data = sweep(rows, plans=plans)
    latest = select_plan(data, "latest")
    assert sorted(latest.trials["key"]) == sorted(keys[1:])
    assert select_plan(data, "all") is data
    doc = build_report(latest)
    assert doc.subtitle == "2 finished trials, latest plan only"
    assert "plan 2 of 2" in dict(doc.sections[0].blocks[0].rows)["plans"]


def test_latest_plan_is_refused_without_plans() -> None:
    """A sweep recorded before plans were kept has no latest plan: one line says so."""
    with pytest.raises(
        ValueError, match=r"^--plan latest: sweep 'constructed' recorded no plans"
    ) as err:
        select_plan(sweep([trial("a", 0, 3.0)]), "latest")
    assert "\n" not in str(err.value)
