"""The report on a tuned grid (``reports.sections.lr_stage``, ``TrialView.stage``): the stage's
trials leave the comparison, the section says the arms were compared at their own best learning
rate and shows each arm's basin with its warnings; a grid without a stage says its arms shared
one learning rate."""

from __future__ import annotations

from typing import Any

from record.schema import Status
from reports.build import build_report
from reports.document import Figure, Paragraph, Table
from reports.sections import lr_section
from reports.sections.results import main_table
from tests.reports.frames import sweep, trial

VALUES = (0.001, 0.00316228, 0.01)
# standard's best is the middle value; block's the highest (not bracketed) and its basin flat
STAGE_LOSSES = {"standard": (3.6, 3.1, 3.4), "block": (3.205, 3.203, 3.2)}


def _stage_row(arm: str, value: float, loss: float) -> dict[str, Any]:
    row = trial(f"{arm}/lr={value!r}", 0, loss, train__lr=value)
    key = f"stage-{arm}-{value}"
    return {**row, "key": key, "run_id": key}


def _tuned() -> Any:
    """Two arms' three-value stages, then two seeds each at the chosen value."""
    rows, arms = [], {}
    for arm, losses in STAGE_LOSSES.items():
        keys = {}
        for value, loss in zip(VALUES, losses, strict=True):
            rows.append(_stage_row(arm, value, loss))
            keys[repr(value)] = [rows[-1]["key"]]
        arms[arm] = {"keys": keys}
    chosen = {"standard": VALUES[1], "block": VALUES[2]}
    for arm, value in chosen.items():
        rows += [trial(arm, s, 3.0 + s / 10, train__lr=value) for s in (0, 1)]
    state = {"param": "train.lr", "values": list(VALUES), "seeds": 1, "arms": arms}
    return sweep(rows, lr_stage=state)


def test_the_stage_s_trials_leave_the_comparison() -> None:
    """The comparable trials are the four final-stage ones; the stage holds six, each with the
    arm it tunes and its value; the results table has one row per arm, not per value."""
    data = _tuned()
    assert sorted(data.view.comparable["arm"]) == ["block", "block", "standard", "standard"]
    stage = data.view.stage
    assert len(stage) == 6
    assert set(zip(stage["stage_arm"], stage["stage_value"], strict=True)) == {
        (a, v) for a in STAGE_LOSSES for v in VALUES
    }
    _, rows = main_table(data, None)
    assert sorted(r.arm for r in rows) == ["block", "standard"]


def test_the_section_shows_each_arm_s_basin_choice_and_warnings() -> None:
    """The note says arms were compared at their own best; the table has each arm's choice and
    mean loss per value; block's best is the grid's highest (not bracketed) and its points span
    0.005 nats (flat: within 0.01); standard's bracketed, steep basin warns of nothing."""
    section = lr_section(_tuned())
    assert section is not None
    texts = [b.text for b in section.blocks if isinstance(b, Paragraph)]
    assert "compared at their own best learning rate" in texts[0]
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert table.columns == ("arm", "chosen", "0.001", "0.00316228", "0.01")
    by_arm = {r[0]: r for r in table.rows}
    assert by_arm["standard"][1:] == ("0.00316228", "3.6000", "3.1000", "3.4000")
    assert by_arm["block"][1] == "0.01"
    warnings = [b.text for b in section.blocks if isinstance(b, Paragraph) and b.kind == "warning"]
    assert any(w.startswith("block: best value 0.01 is the grid's highest") for w in warnings)
    assert any(w.startswith("block: flat basin") for w in warnings)
    assert not [w for w in warnings if w.startswith("standard")]
    assert [b.name for b in section.blocks if isinstance(b, Figure)] == ["lr_basin"]


def test_a_stage_value_that_diverged_is_never_chosen() -> None:
    """standard's middle value diverged (its loss no comparison may use): the lowest mean of
    the other two is chosen, and the diverged value's cell is empty."""
    data = _tuned()
    trials = data.trials.copy()
    middle = trials["key"] == f"stage-standard-{VALUES[1]}"
    trials.loc[middle, "status"] = Status.DIVERGED.value
    section = lr_section(sweep(trials.to_dict("records"), lr_stage=data.lr_stage))
    assert section is not None
    table = next(b for b in section.blocks if isinstance(b, Table))
    assert {r[0]: r for r in table.rows}["standard"][1:] == ("0.01", "3.6000", "—", "3.4000")


def test_a_grid_without_a_stage_says_its_arms_shared_one_learning_rate() -> None:
    """Two arms at one train.lr: a note says so and that the comparison is not at each arm's
    best; the report carries it. A search has no such section (it samples the rate)."""
    rows = [
        trial(arm, s, 3.0, model__residual=r)
        for arm, r in [("a", "standard"), ("b", "rezero")]
        for s in (0, 1)
    ]
    data = sweep(rows)
    section = lr_section(data)
    assert section is not None
    assert "one shared learning rate (train.lr = 0.001)" in section.blocks[0].text  # type: ignore[union-attr]
    assert "Learning rate" in [s.title for s in build_report(data).sections]
    assert lr_section(sweep(rows, space={"kind": "search"})) is None
    varied = [trial("a", 0, 3.0, train__lr=lr) for lr in (1e-3, 1e-2)]
    axis = lr_section(sweep([*varied, trial("b", 0, 3.0, model__residual="rezero")]))
    assert axis is not None and "an axis of the grid" in axis.blocks[0].text  # type: ignore[union-attr]


def test_arms_that_chose_different_rates_are_still_compared() -> None:
    """Block AttnRes chose another learning rate than standard: it is still compared with
    standard (the rate is each arm's own choice, not part of the context it is matched in), paired
    by seed, and the rate is no one-axis effect (it would be the arms' difference again)."""
    rows, arms = [], {}
    for arm, residual in (
        ("standard", {}),
        ("block_attnres", {"model__residual": "block_attnres"}),
    ):
        keys = {}
        for value in VALUES:
            row = {**_stage_row(arm, value, 3.3), **residual}
            rows.append(row)
            keys[repr(value)] = [row["key"]]
        arms[arm] = {"keys": keys}
    chosen = {
        "standard": (VALUES[1], 3.0, {}),
        "block_attnres": (VALUES[2], 2.9, {"model__residual": "block_attnres"}),
    }
    for arm, (value, loss, residual) in chosen.items():
        rows += [trial(arm, s, loss + s / 100, train__lr=value, **residual) for s in (0, 1, 2)]
    state = {"param": "train.lr", "values": list(VALUES), "seeds": 1, "arms": arms}
    data = sweep(rows, lr_stage=state)
    _, table = main_table(data, None)
    block = next(r for r in table if r.arm == "block_attnres")
    assert block.baseline == "standard"
    assert block.comparison is not None and block.comparison.test == "paired t"
    assert abs(block.comparison.diff - (-0.1)) < 1e-9
    text = "\n".join(s.title for s in build_report(data).sections)
    assert "train.lr" not in " ".join(
        str(b)
        for s in build_report(data).sections
        if s.title == "One-axis effects"
        for b in s.blocks
    ), text
