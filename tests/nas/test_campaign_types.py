"""The two campaign types (``nas.campaign.kinds``) without Ray: what is left, how many in all and how
many settled given a record, the Tune trials each hands Tune, the spec of a Tune config, the
summary's plan, and the plan holding one campaign made from its space's kind."""

from __future__ import annotations

import math
import pickle
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from nas.campaign.kinds import CAMPAIGNS, GridCampaign, SearchCampaign, campaign_of
from nas.spec import search_spec, trial_label
from nas.store.tracking import RecordedTrial
from record.schema import GRID_PARAM, Status
from search_spaces import BUILTIN
from search_spaces.space import Kind
from tests.nas.spaces import SEARCH as RECORD_SEARCH
from tests.nas.spaces import recorded as recorded_as
from trainers.config import RunConfig

SEARCH = replace(RECORD_SEARCH, trials=5)


def _recorded(spec, status: Status | None) -> RecordedTrial:  # type: ignore[no-untyped-def]
    return recorded_as(spec, status, {"final/val_loss": 2.5} if status == Status.FINISHED else {})


def _grid() -> GridCampaign:
    """smoke at two seeds: two arms x two seeds, four cells."""
    space = replace(BUILTIN["smoke"], seeds=(0, 1))
    grid = campaign_of(space, RunConfig())
    assert isinstance(grid, GridCampaign)
    return grid


def test_every_kind_of_space_has_one_campaign_type() -> None:
    """The registry covers the space's ``kind`` Literal exactly, and each kind makes its type."""
    assert set(CAMPAIGNS) == set(get_args(Kind))
    assert isinstance(campaign_of(SEARCH, RunConfig()), SearchCampaign)
    assert isinstance(campaign_of(BUILTIN["smoke"], RunConfig()), GridCampaign)


def test_a_grid_counts_what_the_record_settled() -> None:
    """Of four cells, a finished and a diverged one are settled and a killed one is not: two
    are left (the killed one and the unrecorded one, in plan order), four in all, two settled."""
    grid = _grid()
    a, b, c, d = grid.specs
    recorded = {
        a.key: _recorded(a, Status.FINISHED),
        b.key: _recorded(b, Status.KILLED),
        c.key: _recorded(c, Status.DIVERGED),
        "dropped": replace(_recorded(a, Status.FINISHED), key="dropped"),  # an earlier plan's
    }
    assert (grid.total, grid.left(recorded), grid.settled(recorded)) == (4, 2, 2)
    assert grid.todo(recorded) == [b, d]
    assert (grid.left({}), grid.settled({})) == (4, 0)


def test_a_grid_hands_tune_the_keys_still_to_run() -> None:
    """Tune gets a grid search over the unsettled keys, one sample, no searcher; each key's
    Tune config finds its spec; nothing is a worst value and ASHA is not the default."""
    grid = _grid()
    a, b, c, d = grid.specs
    recorded = {a.key: _recorded(a, Status.FINISHED), c.key: _recorded(c, Status.INFEASIBLE)}
    trials = grid.tune_trials(recorded, None, "smoke")
    assert trials.param_space == {GRID_PARAM: {"grid_search": [b.key, d.key]}}
    assert (trials.num_samples, trials.search_alg) == (1, None)
    assert [grid.spec_for({GRID_PARAM: s.key}) for s in grid.specs] == list(grid.specs)
    assert grid.worst() == {} and not grid.asha_by_default and not grid.has_study


def test_a_grid_s_summary_plan_is_its_cells() -> None:
    """Every cell by key with its label, whatever the record holds; nothing else."""
    grid = _grid()
    a = grid.specs[0]
    planned = {s.key: trial_label(s.arm, s.seed) for s in grid.specs}
    assert grid.planned({a.key: _recorded(a, Status.FINISHED)}, repeats=3) == planned


def test_a_grid_survives_the_pickle_to_a_worker() -> None:
    """Tune pickles the trials' context: the campaign's lookup by key comes back with it."""
    grid = _grid()
    back = pickle.loads(pickle.dumps(grid))
    assert back.spec_for({GRID_PARAM: grid.specs[3].key}) == grid.specs[3]


def test_a_grid_with_no_valid_cell_has_nothing_in_all_and_says_why() -> None:
    """Every cell rejected: no trials, each cell skipped with the configuration's reason."""
    space = replace(BUILTIN["smoke"], base={**BUILTIN["smoke"].base, "model.n_heads": 7})
    grid = campaign_of(space, RunConfig())
    assert grid.total == 0 and len(grid.skipped) == 2
    assert all("n_heads" in s.reason for s in grid.skipped)


def _search_record() -> tuple[SearchCampaign, dict[str, RecordedTrial]]:
    """Three recorded proposals: finished, diverged (both settled) and killed (run again)."""
    search = campaign_of(SEARCH, RunConfig())
    assert isinstance(search, SearchCampaign)
    points = [
        {"train.lr": 0.001, "model.d_model": 32},
        {"train.lr": 0.009, "model.d_model": 64},
        {"train.lr": 0.0003, "model.d_model": 64},
    ]
    statuses = [Status.FINISHED, Status.DIVERGED, Status.KILLED]
    specs = [search.spec_for(p) for p in points]
    return search, {s.key: _recorded(s, st) for s, st in zip(specs, statuses, strict=True)}


def test_a_search_counts_its_settled_trials_against_its_trials() -> None:
    """Five trials in all, two settled, three left (the killed one is proposed again)."""
    search, recorded = _search_record()
    assert (search.total, search.left(recorded), search.settled(recorded)) == (5, 3, 2)
    assert (search.left({}), search.settled({})) == (5, 0)


def test_a_search_hands_tune_a_warm_searcher_for_what_is_left() -> None:
    """No param space (the searcher proposes), as many samples as are left, an Optuna searcher
    whose study holds the settled trials and proposes the killed point first; the worst value
    per objective; ASHA by default."""
    from ray.tune.search.optuna import OptunaSearch

    search, recorded = _search_record()
    trials = search.tune_trials(recorded, None, "s")
    assert trials.param_space == {} and trials.num_samples == 3
    assert isinstance(trials.search_alg, OptunaSearch)
    study = trials.search_alg._ot_study
    assert sorted(t.value for t in study.trials if t.state.name == "COMPLETE") == [2.5, math.inf]
    assert trials.search_alg.suggest("t1") == {"train.lr": 0.0003, "model.d_model": 64}
    assert search.worst() == {"val_loss": math.inf}
    assert search.asha_by_default and search.has_study


def test_a_search_makes_each_proposal_s_spec_with_its_first_seed() -> None:
    """A proposal's spec is ``search_spec`` at the space's first seed; one the configuration
    rejects raises ValueError (an infeasible proposal)."""
    search = campaign_of(replace(SEARCH, seeds=(7, 8)), RunConfig())
    point = {"train.lr": 0.001, "model.d_model": 32}
    assert search.spec_for(point) == search_spec(RunConfig(), search.space, point, 7)
    with pytest.raises(ValueError, match="d_model"):
        search.spec_for({"train.lr": 0.001, "model.d_model": 33})


def test_a_search_s_summary_plan_is_what_it_recorded_then_what_it_did_not_propose() -> None:
    """Every recorded trial by key with its label, then one 'proposal N' per proposal not made:
    three left, less the killed one (listed already) and this invocation's repeats."""
    search, recorded = _search_record()
    labels = {k: trial_label(t.arm, t.seed) for k, t in recorded.items()}
    assert search.planned(recorded) == {
        **labels,
        "proposal 1": "proposal 1",
        "proposal 2": "proposal 2",
    }
    assert search.planned(recorded, repeats=1) == {**labels, "proposal 1": "proposal 1"}
    assert search.planned(recorded, repeats=5) == labels


def test_a_plan_holds_one_campaign_of_its_space(tmp_path: Path) -> None:
    """The plan's space, base, specs and skipped cells are its campaign's."""
    from nas.sweep.plan import SweepOptions, plan

    grid = plan(SweepOptions("smoke", seeds=(0, 1), storage_path=str(tmp_path)))
    assert isinstance(grid.campaign, GridCampaign) and grid.campaign.total == 4
    assert grid.specs == list(grid.campaign.specs) and grid.space is grid.campaign.space
    search = plan(SweepOptions("tune_lr", trials=3, storage_path=str(tmp_path)))
    assert isinstance(search.campaign, SearchCampaign) and search.campaign.total == 3
    assert search.specs == [] and search.base is search.campaign.base


def test_each_campaign_describes_what_it_runs() -> None:
    """``nas spaces``' lines: a grid's trial count, skipped cells and partitions; a search's
    trials and sampler."""
    assert campaign_of(SEARCH, RunConfig()).describe() == ["5 trials, sampler tpe"]
    lines = campaign_of(BUILTIN["smoke"], RunConfig()).describe()
    assert lines[0] == "2 trials (2 configurations x 1 seeds); 0 skipped"
    assert lines[1:] == ["partition block_attnres: N = 2 AttnRes blocks of 2 sublayers"]


def test_a_search_s_summary_lists_every_recorded_trial_as_planned() -> None:
    """Through the summary, a search's plan keeps every recorded trial in it (a killed one
    keeps the sweep open) and each proposal not made is 'not started'."""
    from nas.sweep.summary import NOT_STARTED, UNSETTLED, outcomes

    search, recorded = _search_record()
    results = outcomes(search.planned(recorded), recorded)
    assert [(o.status, o.planned) for o in results] == [
        ("finished", True),
        ("diverged", True),
        ("killed", True),
        (NOT_STARTED, True),
        (NOT_STARTED, True),
    ]
    assert [o.label for o in results][3:] == ["proposal 1", "proposal 2"]
    assert sum(o.status in UNSETTLED for o in results) == 3
