"""nas/campaign/seeds.py and ``nas sweep --seeds auto``'s bad input, without Ray: the pilot's
cells, the choice made from a constructed record, the extra seeds it plans, and the refusals."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest

from nas.campaign.seeds import AutoSeedsCampaign
from nas.cli import main
from nas.store.tracking import RecordedTrial
from record.schema import Metric, Status, Tag
from search_spaces import get_space
from search_spaces.seed_choice import SeedRule, choose
from tests.nas.spaces import PILOT
from trainers.settings import under_settings

NOISE = {0: 0.01, 1: -0.02, 2: 0.015}  # block minus standard, per seed: sd 0.0189


def _campaign(tmp: Path, rule: SeedRule, text: str = PILOT) -> AutoSeedsCampaign:
    (tmp / "pilot.yaml").write_text(text)
    space = get_space(str(tmp / "pilot.yaml"))
    space_base, base, _ = under_settings(space.base, ())
    return AutoSeedsCampaign.sized(replace(space, base=space_base), base, rule)


def _record(c: AutoSeedsCampaign, shift: float) -> dict[str, RecordedTrial]:
    """Every pilot trial finished: standard at 2.0, block at 2.0 + shift + that seed's noise."""
    out = {}
    for s in c.pilot:
        loss = 2.0 + (shift + NOISE[s.seed] if s.arm == "block" else 0.0)
        metrics = {Metric.FINAL_VAL_LOSS: loss}
        out[s.key] = RecordedTrial(
            "r", s.key, s.arm, s.seed, Status.FINISHED, "FINISHED", "", {}, metrics
        )
    return out


def test_the_pilot_runs_first_then_exactly_the_seeds_its_noise_asks_for(tmp_path: Path) -> None:
    """The campaign plans the pilot alone; with it settled, the choice is ``choose``'s on the
    paired differences, and the plan grows by exactly the new seeds (pilot keys kept); a second
    ``given`` changes nothing, and a pilot half settled plans nothing yet."""
    rule = SeedRule(effect=0.05, cap=12)
    c = _campaign(tmp_path, rule)
    assert [(s.arm, s.seed) for s in c.specs] == [
        (a, n) for a in ("standard", "block") for n in (0, 1, 2)
    ]
    record = _record(c, 0.0)
    assert c.given(dict(list(record.items())[:4])) is c
    done = c.given(record)
    diffs = [(2.0 + NOISE[s]) - 2.0 for s in (0, 1, 2)]  # as the record's losses give them
    expected = choose({"block": ("standard", diffs)}, rule, 3)
    assert done.choice == expected and 3 < expected.seeds < 12
    assert {s.key for s in c.pilot} <= {s.key for s in done.specs}
    seeds = sorted({s.seed for s in done.specs})
    assert seeds == list(range(expected.seeds)) and len(done.specs) == 2 * expected.seeds
    assert done.given(record) is done and done.left(record) == 2 * (expected.seeds - 3)
    state = json.loads(json.dumps(done.state()))
    assert state["comparisons"]["block"]["baseline"] == "standard"
    assert state["seeds"] == expected.seeds and state["pilot_seeds"] == [0, 1, 2]
    assert done.state_tags() == {Tag.SEEDS_AUTO: str(expected.seeds)}
    assert any("pilot sd 0.0189" in line for line in done.decisions())


def test_the_pilots_delta_does_not_change_the_seeds(tmp_path: Path) -> None:
    """Two pilots with the same noise and Δs of 0 and 0.5 plan the same trials."""
    c = _campaign(tmp_path, SeedRule(effect=0.05))
    plain, shifted = c.given(_record(c, 0.0)), c.given(_record(c, 0.5))
    assert plain.choice is not None and shifted.choice is not None
    assert plain.choice.seeds == shifted.choice.seeds
    assert [s.key for s in plain.specs] == [s.key for s in shifted.specs]


def test_a_stored_choice_from_other_inputs_is_refused(tmp_path: Path) -> None:
    """Another effect than the stored sweep was sized for: refused, naming both."""
    c = _campaign(tmp_path, SeedRule(effect=0.05))
    stored: Mapping[str, object] = c.state()
    assert c.refuses(stored) == "" and c.refuses({}) == ""
    other = _campaign(tmp_path, SeedRule(effect=0.02))
    assert "0.05" in other.refuses(stored) and "0.02" in other.refuses(stored)


BAD = [
    (["--effect", "0"], "--effect 0"),
    (["--effect", "-0.1"], "--effect -0.1"),
    (["--effect", "lots"], "--effect 'lots'"),
    (["--effect", "nan"], "--effect nan"),
    (["--max-seeds", "2"], "--max-seeds 2"),
]


@pytest.mark.parametrize("extra,match", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(
    extra: list[str],
    match: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bad --effect or --max-seeds: exit 2, one line naming it, nothing written."""
    (tmp_path / "pilot.yaml").write_text(PILOT)
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "pilot.yaml", "--seeds", "auto", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["pilot.yaml"]


@pytest.mark.parametrize(
    ("space", "extra", "match"),
    [
        ("tune_lr", [], "'tune_lr' is a search"),
        ("smoke", [], "needs at least 3 seeds"),
        ("pilot.yaml", ["--max-seeds", "3"], "below the pilot's 4 seeds"),
    ],
)
def test_a_space_the_pilot_cannot_size_is_refused(
    space: str,
    extra: list[str],
    match: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--seeds auto with a search, a pilot under 3 seeds, a cap below the pilot: one line, exit
    2, nothing written."""
    (tmp_path / "pilot.yaml").write_text(PILOT.replace("[0, 1, 2]", "[0, 1, 2, 3]"))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", space, "--seeds", "auto", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err, err
    assert [p.name for p in tmp_path.iterdir()] == ["pilot.yaml"]


def test_effect_without_seeds_auto_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--effect sizes --seeds auto; given alone it is refused rather than ignored."""
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "smoke", "--effect", "0.02"]) == 2
    assert "give --seeds auto" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
