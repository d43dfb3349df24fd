"""The learning-rate stage as data (``search_spaces.lr_stage``): its grid, its YAML block and the
refusals of a bad one, and the rule that picks an arm's best value with its two warnings."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from search_spaces import BUILTIN, grid_cells
from search_spaces.loader import load_space, space_from_data, space_to_data
from search_spaces.lr_stage import FLAT_NATS, LrStage, choose, stage_from_data
from trainers.config import RunConfig, TrainConfig

ARMS = {"standard": {"model.residual": "standard"}}


def test_a_log_grid_spans_its_bounds_geometrically() -> None:
    """Seven log-spaced points from 1e-4 to 3e-2: the ends are the bounds and every ratio of
    neighbours is (3e-2 / 1e-4) ** (1/6), to the 6 significant digits the values keep."""
    values = LrStage("train.lr", 1e-4, 3e-2, log=True, points=7).values()
    assert len(values) == 7 and values[0] == 1e-4 and values[-1] == 3e-2
    ratio = (3e-2 / 1e-4) ** (1 / 6)
    for low, high in itertools.pairwise(values):
        assert high / low == pytest.approx(ratio, rel=1e-5)
    assert LrStage("train.lr", 1.0, 3.0, log=False, points=3).values() == (1.0, 2.0, 3.0)


def test_the_yaml_block_round_trips_through_the_space() -> None:
    """The issue's shape (``1e-4`` read by YAML 1.1 as text is a number too) becomes a stage,
    and the space's data holds it as it came."""
    data = {
        "arms": ARMS,
        "tune": {"train.lr": {"float": ["1e-4", 3e-2], "log": True}, "points": 7, "seeds": 2},
    }
    space = space_from_data(data, "tuned")
    assert space.tune == LrStage("train.lr", 1e-4, 3e-2, True, 7, 2)
    again = space_from_data(space_to_data(space), "tuned")
    assert again == space
    assert "tune" not in space_to_data(space_from_data({"arms": ARMS}, "plain"))


@pytest.mark.parametrize(
    ("tune", "match"),
    [
        ({"train.lr": {"float": [1e-3, 1e-2]}, "points": 2}, "at least 3 points"),
        ({"train.lr": {"float": [0, 1e-2]}, "points": 3}, "bounds must be positive"),
        ({"train.lr": {"float": [-1e-3, 1e-2]}}, "bounds must be positive"),
        ({"train.lr": {"float": [1e-2, 1e-3]}}, "must be below high"),
        ({"train.lr": {"float": [1e-3, 1e-2]}, "pionts": 5}, "'pionts': unknown key"),
        ({"train.lr": {"float": [1e-3, 1e-2]}, "train.wd": {"float": [1, 2]}}, "exactly one"),
        ({"train.lr": [1e-3, 1e-2]}, "expected {float"),
        ({"train.lr": {"float": [1e-3, 1e-2]}, "seeds": 0}, "tune.seeds"),
        ({"model.residual": {"float": [1e-3, 1e-2]}}, "not a numeric field"),
        ({"train.no_such": {"float": [1e-3, 1e-2]}}, "not a numeric field"),
    ],
)
def test_a_bad_tune_block_is_refused_in_one_line(tune: object, match: str) -> None:
    """Fewer than 3 points, a non-positive or inverted bound, an unknown key, a second field,
    a field that is not a number of the configuration: one message naming the key."""
    with pytest.raises(ValueError, match=match) as err:
        space_from_data({"arms": ARMS, "tune": tune}, "bad")
    assert "\n" not in str(err.value)


def test_a_stage_belongs_to_a_grid_and_is_the_only_thing_setting_its_field() -> None:
    """A search samples the learning rate itself; params or an arm setting the tuned field
    would contradict the stage's per-arm choice."""
    tune = {"train.lr": {"float": [1e-3, 1e-2]}}
    search = {"kind": "search", "trials": 3, "params": {"train.lr": [1e-3]}, "tune": tune}
    with pytest.raises(ValueError, match="only a grid"):
        space_from_data(search, "s")
    with pytest.raises(ValueError, match="params varies it too"):
        space_from_data({"params": {"train.lr": [1e-3, 1e-2]}, "tune": tune}, "p")
    with pytest.raises(ValueError, match="arm 'a' sets it"):
        space_from_data({"arms": {"a": {"train.lr": 1e-3}}, "tune": tune}, "a")


def test_a_file_s_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("arms: {a: {model.residual: standard}}\ntune: {train.lr: {float: [0, 1]}}\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: tune\.train\.lr: bounds must be positive"):
        load_space(path)


def test_the_best_value_is_the_lowest_mean_final_loss() -> None:
    """Means over seeds decide: 2e-3's mean (3.0) beats 1e-3's (3.1) although 1e-3 holds the
    single lowest loss; a bracketed, steep basin warns of nothing."""
    choice = choose({1e-3: [2.9, 3.3], 2e-3: [3.0, 3.0], 4e-3: [3.6, 3.6]})
    assert choice is not None
    assert choice.best == 2e-3
    assert choice.curve == {1e-3: pytest.approx(3.1), 2e-3: 3.0, 4e-3: 3.6}
    # the seed noise at 1e-3 is stdev(2.9, 3.3) = 0.283 < the spread 0.6: not flat
    assert choice.warnings == ()


def test_a_best_value_on_the_grid_s_edge_is_not_bracketed() -> None:
    low = choose({1e-3: [3.0], 2e-3: [3.5], 4e-3: [4.0]})
    high = choose({1e-3: [4.0], 2e-3: [3.5], 4e-3: [3.0]})
    assert low is not None and high is not None
    assert (low.best, high.best) == (1e-3, 4e-3)
    assert "grid's lowest: not bracketed" in low.warnings[0]
    assert "grid's highest: not bracketed" in high.warnings[0]


def test_a_basin_within_the_threshold_or_the_seed_noise_is_flat() -> None:
    """A spread of half the threshold is flat; one of twice the threshold is not, unless the
    seeds at one value differ by more than it (the noise then bounds what the grid can tell)."""
    half, twice = FLAT_NATS / 2, FLAT_NATS * 2
    flat = choose({1e-3: [3.0 + half], 2e-3: [3.0], 4e-3: [3.0 + half]})
    steep = choose({1e-3: [3.0 + twice], 2e-3: [3.0], 4e-3: [3.0 + twice]})
    noisy = choose({1e-3: [3.0 + twice] * 2, 2e-3: [2.9, 3.1], 4e-3: [3.0 + twice] * 2})
    assert flat is not None and steep is not None and noisy is not None
    assert [w for w in flat.warnings if "flat basin" in w]
    assert steep.warnings == ()
    # stdev(2.9, 3.1) = 0.141 > the spread 0.02: within the seed noise
    assert any("within the seed noise" in w for w in noisy.warnings)


def test_a_diverged_value_is_never_best_and_all_diverged_is_no_choice() -> None:
    """A value with a diverged seed counts as infinitely bad (its mean is inf); when every
    value diverged, there is no choice at all."""
    choice = choose({1e-3: [3.5], 2e-3: [3.2], 4e-3: [3.0, math.inf]})
    assert choice is not None and choice.best == 2e-3
    assert choice.curve[4e-3] == math.inf
    assert choose({1e-3: [math.inf], 2e-3: [math.inf], 4e-3: [math.inf]}) is None


def test_stage_from_data_refuses_a_non_mapping() -> None:
    with pytest.raises(ValueError, match="tune: expected"):
        stage_from_data([1e-3, 1e-2])


def test_lr_transfer_tunes_every_depth_of_each_wiring_and_parametrization() -> None:
    """lr_transfer: standard and Block AttnRes under sp and CompleteP at four depths, every
    cell valid (the catalogue allows each pair); CompleteP's base is the smallest depth at the
    model's own width (only depth scales, and the shallowest model is sp's); a log grid of at
    least 5 points spanning a factor of 30 or more, so each depth's optimum can be bracketed."""
    space = BUILTIN["lr_transfer"]
    cells, skipped = grid_cells(space, RunConfig())
    assert not skipped
    models = {(c.config.model.residual, c.config.model.parametrization) for c in cells}
    assert models == {(w, p) for w in ("standard", "block_attnres") for p in ("sp", "completep")}
    depths = sorted({c.config.model.n_layers for c in cells})
    assert len(depths) >= 3 and depths[-1] / depths[0] >= 4
    for c in cells:
        m = c.config.model
        if m.parametrization == "completep":
            assert (m.base_depth, m.base_width, m.depth_alpha) == (depths[0], m.d_model, 1.0)
    stage = space.tune
    assert stage is not None and stage.param == "train.lr" and stage.log
    assert stage.points >= 5 and stage.high / stage.low >= 30
    assert "minutes" in space.description


@pytest.mark.parametrize("name", ["demo", "quick", "attnres_ablation"])
def test_a_demo_s_tuned_variant_is_the_demo_plus_a_stage(name: str) -> None:
    """``<name>_tuned`` has the demo's base, arms, axes and seeds, and a log-spaced stage of
    train.lr whose grid holds the demo's shared learning rate inside it (not on its edge)."""
    plain, tuned = BUILTIN[name], BUILTIN[f"{name}_tuned"]
    assert plain.tune is None and tuned.tune is not None
    same = ("kind", "base", "arms", "params", "seeds")
    assert all(getattr(tuned, f) == getattr(plain, f) for f in same)
    assert tuned.tune.param == "train.lr" and tuned.tune.log
    assert tuned.tune.low < TrainConfig().lr < tuned.tune.high
    assert name in tuned.description
