"""A search's arms compared at their best points (issue 25 §3): in a search that samples the
learning rate, an arm is its configuration without the sampled training settings, and the
results compare each arm at its best point (lowest mean final loss over the point's seeds), say
so, and show the point; the search section still reads every point. Grids are unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from record.schema import Status
from reports.ablation import arm_rows
from reports.build import build_report
from reports.document import Paragraph, Section, Table
from reports.normalize import best_points, tuned_keys
from tests.reports.frames import sweep, trial

SEARCH = {
    "kind": "search",
    "params": {
        "model.residual": {"choice": ["standard", "attnres"]},
        "train.lr": {"float": [1e-4, 1e-1], "log": True},
    },
}
# arm -> learning rate -> each seed's final loss. attnres is best at 0.001 and bad at 0.1, so
# its mean over all its trials (4.06) is worse than standard's (3.56), its best (3.01) better.
LOSSES = {
    "attnres": {0.001: (3.00, 3.02, 3.01), 0.1: (5.0, 5.1, 5.2)},
    "standard": {0.003: (3.50, 3.51, 3.53), 0.01: (3.60, 3.62, 3.61)},
}


def _trial(residual: str, lr: float, seed: int, loss: float | None, **kw: Any) -> dict[str, Any]:
    row = trial("search", seed, loss, model__residual=residual, train__lr=lr, **kw)
    row["run_id"] = row["key"] = f"{residual}-{lr}-{seed}"
    return row


def _search(losses: dict[str, dict[float, tuple[float, ...]]] = LOSSES) -> Any:
    rows = [
        _trial(residual, lr, seed, loss)
        for residual, by_lr in losses.items()
        for lr, seeds in by_lr.items()
        for seed, loss in enumerate(seeds)
    ]
    return sweep(rows, space=SEARCH)


def _results(doc: Any) -> Section:
    (found,) = [s for s in doc.sections if s.title == "Results"]
    return found


def test_a_search_tunes_its_sampled_training_settings() -> None:
    """The sampled ``train.*`` parameters of a search are tuned per arm; a grid tunes none."""
    assert tuned_keys(SEARCH) == ("train.lr",)
    assert tuned_keys({**SEARCH, "kind": "grid"}) == ()
    assert tuned_keys(None) == ()


def test_the_better_best_wins_though_its_mean_is_worse() -> None:
    """attnres's mean over all its trials is worse than standard's, its best point better: the
    comparison is at each arm's best point, attnres 'better' than the standard baseline, and
    the statistics rest on that point's three seeds."""
    data = _search()
    assert data.trials.groupby("model.residual")["final/val_loss"].mean()["attnres"] > 4.0
    rows = {r.arm: r for r in arm_rows(data.view)}
    assert set(rows) == {"residual=attnres", "residual=standard"}
    attnres, standard = rows["residual=attnres"], rows["residual=standard"]
    assert attnres.final.mean == pytest.approx(3.01)
    assert standard.final.mean == pytest.approx(3.5133333)
    assert attnres.seeds == (0, 1, 2) and standard.baseline == "residual=standard"
    assert attnres.baseline == "residual=standard" and attnres.verdict == "better"
    assert [r.arm for r in arm_rows(data.view)] == ["residual=attnres", "residual=standard"]


def test_the_report_says_so_and_shows_each_best_point() -> None:
    """The results section carries the sentence and a table of each arm's best learning rate,
    its loss there, the points that finished and the mean over all of them; the search
    section's best trials still list every point, with its learning rate."""
    doc = build_report(_search())
    results = _results(doc)
    notes = [b.text for b in results.blocks if isinstance(b, Paragraph)]
    assert any(
        "compares each arm (its configuration without those settings) at its best point" in t
        and "`train.lr`" in t
        for t in notes
    )
    main, best = [b for b in results.blocks if isinstance(b, Table)]
    assert main.rows[0][0] == "residual=attnres" and main.rows[0][-1] == "better"
    assert best.columns[:2] == ("arm", "lr")
    assert [r[:2] for r in best.rows] == [
        ("residual=attnres", "0.001"),
        ("residual=standard", "0.003"),
    ]
    assert [r[-2:] for r in best.rows] == [("2", "4.0550"), ("2", "3.5617")]
    (search,) = [s for s in doc.sections if s.title == "Search"]
    trials = next(b for b in search.blocks if isinstance(b, Table))
    assert trials.rows[0][0] == "residual=attnres/lr=0.001"
    assert len(trials.rows) == 10  # of the 12 trials, the best ten: every point is there


def test_a_point_with_an_unfinished_seed_is_not_an_arm_s_best() -> None:
    """A point where one seed diverged cannot be the best, however good its other seeds; an
    arm with no point whose every seed finished has nothing to compare, its outcomes shown."""
    rows = [
        _trial("attnres", 0.001, 0, 2.0),
        _trial("attnres", 0.001, 1, None, status=Status.DIVERGED),
        _trial("attnres", 0.01, 0, 3.2),
        _trial("attnres", 0.01, 1, 3.3),
        _trial("standard", 0.1, 0, None, status=Status.DIVERGED),
    ]
    data = sweep(rows, space=SEARCH)
    assert best_points(data.view.labelled, ("train.lr",)) == {"residual=attnres": ("0.01",)}
    by_arm = {r.arm: r for r in arm_rows(data.view)}
    assert by_arm["residual=attnres"].final.mean == 3.25
    standard = by_arm["residual=standard"]
    assert standard.final.n == 0 and standard.statuses[Status.DIVERGED] == 1


def test_a_grid_is_not_tuned() -> None:
    """A grid whose arms differ in train.lr: every trial is compared, labels as recorded."""
    rows = [trial("fast", s, 3.0 + s / 10, train__lr=0.01) for s in (0, 1)] + [
        trial("slow", s, 3.5, train__lr=0.001) for s in (0, 1)
    ]
    data = sweep(rows)
    assert data.view.tuned == () and len(data.view.comparable) == 4
    assert {r.arm for r in arm_rows(data.view)} == {"fast", "slow"}
