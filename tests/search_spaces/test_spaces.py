"""Search spaces: distributions as validated data, grids that skip what the config rejects, the
built-in spaces, and user YAML files whose errors name the file and the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from search_spaces import BUILTIN, Space, apply_point, get_space, grid_cells, partitions
from search_spaces.distributions import Choice, FloatRange, IntRange, from_data
from trainers.config import VALID_PLACEMENTS, RunConfig
from trainers.config_io import from_dict


@pytest.mark.parametrize(
    "dist",
    [
        Choice(("a", 1, 2.5)),
        IntRange(1, 64, log=True),
        FloatRange(1e-4, 1e-2, log=True),
        FloatRange(-1.0, 1.0),
    ],
)
def test_distributions_round_trip_through_data(dist: object) -> None:
    """Every distribution survives to_data -> from_data unchanged (space files and logs)."""
    assert from_data(dist.to_data()) == dist  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "data,match",
    [
        ({"choice": []}, "empty"),
        ({"int": [8, 4]}, "low 8 > high 4"),
        ({"float": [0.0, 1.0], "log": True}, "above zero"),
        ({"float": [-1.0, 1.0], "log": True}, "above zero"),
        ({"int": [1.5, 3]}, "integers"),
        ({"float": [1, 2], "choice": [1]}, "expected one of"),
        ({"uniform": [0, 1]}, "expected one of"),
    ],
)
def test_bad_distributions(data: object, match: str) -> None:
    """Empty choices, inverted ranges, log ranges touching zero and unknown forms are refused."""
    with pytest.raises(ValueError, match=match):
        from_data(data)


def test_apply_point_is_the_config_with_the_keys_replaced() -> None:
    """A point is applied through the configuration's own validation, over the base."""
    base = from_dict({"model": {"d_model": 64}})
    cfg = apply_point(base, {"model.residual": "attnres", "train.lr": 1e-3})
    assert cfg.model.residual == "attnres" and cfg.train.lr == 1e-3 and cfg.model.d_model == 64
    with pytest.raises(ValueError, match="model.placement"):
        apply_point(base, {"model.residual": "attnres", "model.placement": "post"})


def test_grid_is_the_full_cross_product_and_skips_invalid_cells_with_reasons() -> None:
    """arms x params x seeds; a cell the config rejects is skipped (all its seeds) and named."""
    space = Space(
        name="t",
        description="",
        arms={"std": {"model.residual": "standard"}, "attn": {"model.residual": "attnres"}},
        params={"model.placement": Choice(("pre", "post")), "model.n_layers": Choice((2, 4))},
        seeds=(0, 1, 2),
    )
    cells, skipped = grid_cells(space, RunConfig())
    assert len(cells) == (4 + 2) * 3  # attnres/post is undefined: 2 of 8 configurations
    assert len(skipped) == 2 and all("model.placement" in s.reason for s in skipped)
    assert {c.seed for c in cells} == {0, 1, 2}
    assert all(c.config.train.seed == c.seed for c in cells)
    assert len({(c.arm, c.seed) for c in cells}) == len(cells)  # labels tell configurations apart


def test_builtin_spaces_are_valid() -> None:
    """Every built-in grid expands to valid cells only; the search has a budget."""
    for name, space in BUILTIN.items():
        assert space.description, name
        if space.kind == "grid":
            cells, skipped = grid_cells(space, RunConfig())
            assert cells and not skipped, name
        else:
            assert space.trials > 0 and space.params


def test_residual_ablation_covers_the_validity_matrix() -> None:
    """residual_ablation runs every valid residual x placement at two depths over 3 seeds."""
    cells, _ = grid_cells(BUILTIN["residual_ablation"], RunConfig())
    wirings = {(c.config.model.residual, c.config.model.placement) for c in cells}
    assert wirings == {(r, p) for r, ps in VALID_PLACEMENTS.items() for p in ps}
    assert len(cells) == len(wirings) * 2 * 3


def test_deepnorm_arms_use_the_paper_s_layernorm() -> None:
    """DeepNet defines x <- LN(alpha*x + f(x)): every built-in DeepNorm arm runs with LayerNorm
    (not the model's default RMSNorm) and its name says so."""
    for space in BUILTIN.values():
        for name, overrides in space.arms.items():
            if overrides.get("model.residual") == "deepnorm":
                assert overrides.get("model.norm") == "layernorm", (space.name, name)
                assert name.endswith("/layernorm"), (space.name, name)


def test_attnres_ablation_has_one_arm_per_table4_row() -> None:
    """Each Table 4 row of the paper has exactly one arm of attnres_ablation (the report's
    overlay finds it); the arms without a row are the Sinkhorn mHC, kept beside mHC-lite,
    which is what the paper's mHC row ran (its number is Table 2's mHC-lite column), the
    Delta AttnRes successors (arXiv 2605.18855), which came after the table, and the
    input-dependent query's forms other than the one the row uses (its ablations)."""
    from reports.published import TABLE4, published_for
    from trainers.config import flatten

    cells, skipped = grid_cells(BUILTIN["attnres_ablation"], RunConfig())
    assert not skipped
    rows = {c.arm: published_for(flatten(c.config)) for c in cells}
    unmatched = [arm for arm, row in rows.items() if row is None]
    forms = ["input", "input_d", "input_sqrt_d", "low_rank", "gated", "input,query_lr=1/64"]
    assert unmatched == [
        "mhc",
        *(f"attnres/query={f}" for f in forms),
        "attnres/sources=deltas",
        "block_attnres/sources=deltas",
    ]
    assert rows["attnres/query=static_input"].label == "Full + input-dependent query"  # type: ignore[union-attr]
    assert sorted(r.label for r in rows.values() if r) == sorted(r.label for r in TABLE4)
    assert rows["mhc_lite"].label == "mHC"  # type: ignore[union-attr]
    assert {c.config.model.n_layers for c in cells} == {8} and len(cells) == 21 * 3


def test_published_rows_match_one_switch_and_old_records() -> None:
    """The overlay matches a row on residual type and the one switch it sets: a second switch
    matches nothing, and records from before the switches (no such columns) match the plain
    rows. The report counts each switch as part of the wiring."""
    import pandas as pd

    from reports.ablation import WIRING_KEYS, wiring_label
    from reports.published import ATTNRES_DEFAULTS, published_for
    from trainers.config import flatten

    assert set(ATTNRES_DEFAULTS) <= set(WIRING_KEYS)
    full = {"model.residual": "attnres"}
    assert published_for(full).label == "AttnRes Full"  # type: ignore[union-attr]
    sigmoid = {**full, "model.attnres_gate": "sigmoid"}
    assert published_for(sigmoid).label == "Full + sigmoid"  # type: ignore[union-attr]
    assert published_for({**sigmoid, "model.attnres_heads": 2}) is None
    assert published_for({**full, "model.attnres_heads": 16}) is None  # a Block row only
    row = pd.Series(flatten(apply_point(RunConfig(), {**sigmoid, "model.attnres_window": 3})))
    assert wiring_label(row) == "attnres/pre/gate=sigmoid/window=3"


def test_attnres_blocks_matches_the_paper_sweep() -> None:
    """N in 1, 2, 4, 8, 16 plus Full AttnRes, at 16 blocks."""
    cells, _ = grid_cells(BUILTIN["attnres_blocks"], RunConfig())
    arms = {
        (
            c.config.model.residual,
            c.config.model.attnres_blocks if c.config.model.residual == "block_attnres" else None,
        )
        for c in cells
    }
    assert arms == {("block_attnres", n) for n in (1, 2, 4, 8, 16)} | {("attnres", None)}
    assert {c.config.model.n_layers for c in cells} == {16}


def test_partitions_show_each_attnres_arm_s_actual_blocks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each AttnRes configuration's blocks at its own depth, balanced where N does not divide the
    sublayers; `nas spaces` prints them, other wirings have none."""
    from nas.cli import main

    space = Space(
        name="p",
        description="",
        arms={"b": {"model.residual": "block_attnres"}, "s": {"model.residual": "standard"}},
        params={"model.n_layers": Choice((6, 8))},
    )
    cells, _ = grid_cells(space, RunConfig())
    assert partitions(cells) == {
        "b/n_layers=6": (2, 2, 2, 2, 1, 1, 1, 1),
        "b/n_layers=8": (2,) * 8,
    }
    assert main(["spaces", "attnres_blocks"]) == 0
    out = capsys.readouterr().out
    assert "partition block_attnres/N=8: N = 8 AttnRes blocks of 4 sublayers" in out
    assert "partition attnres: N = 32 AttnRes blocks of 1 sublayer\n" in out


def test_user_space_file(tmp_path: Path) -> None:
    """A YAML file with the built-in schema loads into the same Space; sections or dotted keys."""
    path = tmp_path / "mine.yaml"
    path.write_text(
        "description: mine\n"
        "base: {model: {d_model: 32, n_heads: 2}}\n"
        "arms:\n  a: {model.residual: standard}\n"
        "  b: {model.residual: block_attnres, model.attnres_blocks: 2}\n"
        "params:\n  model.n_layers: [2, 4]\n  train.lr: {choice: [0.001, 0.003]}\n"
        "seeds: [0, 1]\n"
    )
    space = get_space(str(path))
    assert space.name == "mine" and space.base == {"model.d_model": 32, "model.n_heads": 2}
    cells, skipped = grid_cells(space, RunConfig())
    assert len(cells) == 2 * 2 * 2 * 2 and not skipped


@pytest.mark.parametrize(
    "text,match",
    [
        ("arms: {a: {model.depth: 3}}\n", "arms.a: 'model.depth': unknown field"),
        ("params: {model.n_layers: {int: [8, 2]}}\n", "params.model.n_layers: range: low 8"),
        ("params: {train.lr: {float: [0, 0.1], log: true}}\n", "log range must stay above zero"),
        ("params: {model.norm: {choice: []}}\n", "choice: empty"),
        ("params: {model.n_layers: {int: [2, 8]}}\n", "a grid needs listed values"),
        ("kind: bayes\n", "kind: 'bayes' is not allowed; choose one of: grid, search"),
        ("kind: search\nparams: {train.lr: [0.1]}\n", "trials: a search needs trials >= 1"),
        ("seeds: [a]\n", "seeds: expected an integer"),
        ("colour: red\n", "'colour': unknown key; allowed: name, description"),
        ("- 1\n", "expected a mapping"),
        ("params: [1\n", "not valid YAML"),
        ("objectives: [{metric: accuracy}]\n", "unknown metric 'accuracy'; allowed: val/loss"),
        ("objectives: [{metric: params}, {metric: params}]\n", "each metric may appear once"),
        ("params: {train.micro_batch: [2, 4]}\n", "params.train.micro_batch: how a trial runs"),
        ("arms: {a: {train.checkpointing: sublayer}}\n", "arms.a.train.checkpointing: how a"),
    ],
)
def test_bad_space_files_name_the_file_and_key(tmp_path: Path, text: str, match: str) -> None:
    """Each mistake in a space file is one message naming the file, the key and what is allowed."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        get_space(str(path))
    assert str(path) in str(err.value)


def test_unknown_space_name_lists_the_builtins() -> None:
    """An unknown name that is not a file lists every built-in space."""
    with pytest.raises(ValueError, match="smoke, demo, demo_tuned, quick"):
        get_space("nonesuch")


def test_search_spaces_import_no_torch() -> None:
    """Spaces stay cheap to load: importing them pulls in neither torch nor Lightning."""
    code = (
        "import sys, search_spaces; sys.exit('torch' in sys.modules or 'lightning' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def _dominated(p: list[float], q: list[float]) -> bool:
    """q dominates p (minimizing every coordinate)."""
    return all(b <= a for a, b in zip(p, q, strict=True)) and q != p


def test_pareto_front_is_exactly_the_non_dominated_points() -> None:
    """On seeded random points: no front point is dominated by any point, every other point is
    dominated by a front point, and maximizing an objective is minimizing its negation."""
    import random

    from search_spaces.pareto import pareto_front

    rng = random.Random(0)
    points = [[rng.randint(0, 9), rng.randint(0, 9)] for _ in range(60)]
    front = pareto_front(points, ["min", "min"])
    assert front
    for i, p in enumerate(points):
        if i in front:
            assert not any(_dominated(p, q) for q in points)
        else:
            assert any(_dominated(p, points[j]) for j in front)
    negated = [[x, -y] for x, y in points]
    assert pareto_front(negated, ["min", "max"]) == front


def test_pareto_size_space_is_multi_objective() -> None:
    space = get_space("pareto_size")
    assert [o.metric for o in space.objectives] == ["val/loss", "params"]
    assert space.kind == "search"


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_builtin_space_round_trips_through_data(name: str) -> None:
    """What a sweep records about its space reads back as the same space (and as YAML)."""
    import yaml

    from search_spaces.loader import space_from_data, space_to_data

    space = BUILTIN[name]
    text = yaml.safe_dump(space_to_data(space), sort_keys=False)
    assert space_from_data(yaml.safe_load(text), "x") == space


def test_an_objective_measured_after_training_cannot_come_first() -> None:
    """decode/tokens_per_s is measured once the fit has ended, so no validation reports it: as
    the first objective (what ASHA stops on) it is refused; second, beside val/loss, it is
    pareto_decode's."""
    from search_spaces.space import Objective, Space

    with pytest.raises(ValueError, match="measured once, after training"):
        Space(name="x", description="x", kind="search", trials=2,
              objectives=(Objective("decode/tokens_per_s", "max"), Objective("val/loss")))  # fmt: skip
    modes = {o.metric: o.mode for o in BUILTIN["pareto_decode"].objectives}
    assert modes == {"val/loss": "min", "decode/tokens_per_s": "max"}
