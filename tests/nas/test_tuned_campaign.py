"""The tuned grid (``nas.campaign.kinds.TunedGridCampaign``) without Ray: its learning-rate stage as
ordinary specs with keys of their own, what it counts as left while a choice is pending, the seeds
it plans from a settled stage, what it records of its choices, and the refusal of a changed
grid."""

from __future__ import annotations

import pickle
from dataclasses import replace

import pytest

from nas.campaign.kinds import TunedGridCampaign, campaign_of
from nas.spec import trial_key
from record.schema import GRID_PARAM, STAGE_POINT_KEY, Status, Tag
from search_spaces import BUILTIN
from search_spaces.lr_stage import LrStage
from tests.nas.spaces import recorded as as_recorded
from trainers.config import RunConfig

STAGE = LrStage("train.lr", 1e-3, 1e-2, log=True, points=3, seeds=1)
VALUES = STAGE.values()  # 0.001, 0.00316228, 0.01


def _tuned(seeds: tuple[int, ...] = (0, 1), stage: LrStage = STAGE) -> TunedGridCampaign:
    """smoke (two arms) with a three-value stage of one seed, then ``seeds``."""
    space = replace(BUILTIN["smoke"], seeds=seeds, tune=stage)
    campaign = campaign_of(space, RunConfig())
    assert isinstance(campaign, TunedGridCampaign)
    return campaign


def _settle(campaign: TunedGridCampaign, losses: dict[float, float]) -> dict:  # type: ignore[type-arg]
    """Every stage trial finished, its final loss by its value."""
    return {
        s.key: as_recorded(s, Status.FINISHED, {"final/val_loss": losses[s.config.train.lr]})
        for s in campaign.stage_specs
    }


def test_the_stage_is_known_before_anything_runs_and_keys_its_trials_apart() -> None:
    """Two arms x three values x one seed: six stage specs, each at its value with the stage
    marker in its point; their keys differ from the final-stage trial of the same arm, value
    and seed (no marker). The seeds' four trials are left but not yet specs."""
    tuned = _tuned()
    assert len(tuned.specs) == len(tuned.stage_specs) == 6
    assert (tuned.total, tuned.left({})) == (10, 10)
    spec = tuned.stage_specs[0]
    assert spec.point[STAGE_POINT_KEY] == "lr" and spec.config.train.lr == VALUES[0]
    assert spec.arm == f"{tuned.cells[0].arm}/lr={VALUES[0]!r}"
    final_point = {k: v for k, v in spec.point.items() if k != STAGE_POINT_KEY}
    assert spec.key != trial_key(tuned.cells[0].arm, final_point, spec.seed)
    trials = tuned.tune_trials({}, None, "s").param_space[GRID_PARAM]
    assert trials == {"grid_search": [s.key for s in tuned.stage_specs]}
    # the pending seeds are in the summary's plan under placeholder keys
    planned = tuned.planned({})
    assert len(planned) == 10 and f"({tuned.cells[0].arm} seed 0)" in planned
    assert tuned.describe()[0].startswith(
        "10 trials: a learning-rate stage of 6 trials (train.lr at 0.001, 0.00316228, 0.01 x "
        "1 seed per arm), then 4 at each arm's best value (2 seeds per arm)"
    )


def test_a_settled_stage_plans_each_arm_s_seeds_at_its_best_value() -> None:
    """The middle value has the lowest loss: both arms' seeds are planned at it, keyed by arm,
    point (with the value) and seed, and the pickled campaign finds them by key."""
    tuned = _tuned()
    recorded = _settle(tuned, {VALUES[0]: 4.0, VALUES[1]: 3.0, VALUES[2]: 3.5})
    assert tuned.given({}) is tuned  # nothing settled: nothing new
    chosen = tuned.given(recorded)
    assert isinstance(chosen, TunedGridCampaign) and chosen is not tuned
    finals = chosen.specs[len(chosen.stage_specs) :]
    assert {(s.arm, s.seed) for s in finals} == {(c.arm, c.seed) for c in tuned.cells}
    assert {s.config.train.lr for s in finals} == {VALUES[1]}
    for s in finals:
        assert s.key == trial_key(s.arm, s.point, s.seed)
        assert s.config.train.seed == s.seed
    assert (chosen.left(recorded), chosen.settled(recorded)) == (4, 6)
    assert chosen.given(recorded) is chosen  # planned once
    again = pickle.loads(pickle.dumps(chosen))
    assert again.spec_for({GRID_PARAM: finals[0].key}) == finals[0]


def test_an_arm_waits_while_its_stage_has_a_trial_unsettled() -> None:
    """One killed stage trial of one arm: only the other arm gets its seeds."""
    tuned = _tuned()
    recorded = _settle(tuned, {VALUES[0]: 4.0, VALUES[1]: 3.0, VALUES[2]: 3.5})
    killed = tuned.stage_specs[0]
    recorded[killed.key] = as_recorded(killed, Status.KILLED, {})
    chosen = tuned.given(recorded)
    assert isinstance(chosen, TunedGridCampaign)
    assert set(chosen.choices) == {tuned.stage_specs[-1].arm.rpartition("/")[0]}
    # the killed trial, the waiting arm's two seeds, the chosen arm's two to run
    assert chosen.left(recorded) == 1 + 2 + 2


def test_the_choices_are_recorded_as_state_and_tags() -> None:
    """The state names the field, its grid and seeds, and per arm its stage keys by value, its
    curve, its choice and warnings (the highest value best: not bracketed); a tag per arm."""
    tuned = _tuned()
    recorded = _settle(tuned, {VALUES[0]: 4.0, VALUES[1]: 3.5, VALUES[2]: 3.0})
    chosen = tuned.given(recorded)
    state = chosen.state()
    assert (state["param"], state["values"], state["seeds"]) == ("train.lr", list(VALUES), 1)
    arm = tuned.cells[0].arm
    entry = state["arms"][arm]
    assert entry["chosen"] == VALUES[2]
    assert entry["curve"] == {repr(VALUES[0]): 4.0, repr(VALUES[1]): 3.5, repr(VALUES[2]): 3.0}
    assert len(entry["keys"][repr(VALUES[0])]) == 1
    assert "not bracketed" in entry["warnings"][0]
    assert chosen.state_tags()[Tag.CHOSEN_PREFIX + arm] == repr(VALUES[2])
    assert tuned.state()["arms"][arm]["chosen"] is None  # before the stage settled


def test_a_changed_grid_is_refused_and_the_same_one_continues() -> None:
    """A stored state of the same grid continues (also with more seeds: the stage is the
    same); another point count or stage seed count is refused naming both grids."""
    state = _tuned().state()
    assert _tuned(seeds=(0, 1, 2)).refuses(state) == ""
    assert _tuned().refuses({}) == ""  # a sweep recorded before it had a stage
    more = _tuned(stage=replace(STAGE, points=4)).refuses(state)
    assert "learning-rate stage differs" in more and "[0.001, 0.00316228, 0.01]" in more
    assert _tuned(stage=replace(STAGE, seeds=2)).refuses(state)
    assert campaign_of(BUILTIN["smoke"], RunConfig()).refuses(state) == ""


def test_a_stage_on_a_model_field_an_arm_does_not_read_is_refused() -> None:
    """``model.mix_ln_alpha`` is read by Mix-LN placement only: a stage over it in smoke (standard and
    block_attnres) is refused naming the arm."""
    stage = LrStage("model.mix_ln_alpha", 1e-3, 1e-1)
    space = replace(BUILTIN["smoke"], tune=stage)
    with pytest.raises(ValueError, match=r"tune\.model\.mix_ln_alpha: the configuration of arm"):
        campaign_of(space, RunConfig())


@pytest.mark.parametrize("name", ["demo", "quick", "attnres_ablation"])
def test_a_demo_s_tuned_variant_plans_its_stage_then_the_same_cells(name: str) -> None:
    """``<name>_tuned`` is the demo's grid with a stage: the same final cells (arms, depths,
    seeds, configurations but the learning rate), a stage of every arm x point before them,
    and, once the stage settles, the demo's seeds at each arm's own best value."""
    plain = campaign_of(BUILTIN[name], RunConfig())
    tuned = campaign_of(BUILTIN[f"{name}_tuned"], RunConfig())
    assert isinstance(tuned, TunedGridCampaign)
    assert [(c.arm, c.seed, c.config) for c in tuned.cells] == [
        (s.arm, s.seed, s.config) for s in plain.specs
    ]
    arms = {c.arm for c in tuned.cells}
    assert len(tuned.stage_specs) == len(arms) * tuned.stage.points
    losses = dict(zip(tuned.stage.values(), (4.0, 3.2, 3.0, 3.1, 3.6), strict=True))
    chosen = tuned.given(_settle(tuned, losses))
    finals = chosen.specs[len(chosen.stage_specs) :]
    assert len(finals) == len(plain.specs)
    assert {s.config.train.lr for s in finals} == {tuned.stage.values()[2]}
