"""Identical models share one trial key: a field a configuration does not read takes its default
before the key and label are computed (grids, search proposals), a collapsed grid says so, an
explicit setting of such a field is refused, and sweeps recorded before this rule still extend
(built-in keys unchanged, old records accepted) or are refused as before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from nas.campaign.plan_check import conflicts
from nas.spec import grid_specs, proposal_identity, search_spec
from nas.store.tracking import RecordedTrial, StoredSweep, SweepRecord
from nas.sweep.plan import SweepOptions, plan
from record.schema import Status
from search_spaces import grid_cells
from search_spaces.distributions import Choice
from search_spaces.space import Space, collapsed
from tests.cli import run_nas
from tests.nas.builtin_keys import (
    DATA,
    OLD_RECORDS,
    RECORDED_SPACES,
    builtin_keys,
    changed_keys,
    recorded_params,
)
from trainers.config import RunConfig, flatten, without_execution

BLOCKS = Space(
    name="blocks",
    description="standard and Block AttnRes over N: standard does not read N",
    base={"model.n_layers": 2, "model.d_model": 16, "model.n_heads": 2},
    arms={
        "standard": {"model.residual": "standard"},
        "block_attnres": {"model.residual": "block_attnres"},
    },
    params={"model.attnres_blocks": Choice((2, 4))},
    seeds=(0, 1),
)
# BLOCKS' cells as the code before this rule keyed them (computed on commit c297def): seed 0's
# standard cells, two arms for one model, and Block AttnRes's cells, which keep their keys.
OLD_STANDARD_KEYS = {
    "fc370476aad2a3b6": "standard/attnres_blocks=2",
    "e940d3c651f30452": "standard/attnres_blocks=4",
}
OLD_BLOCK_KEYS = {"dfe8a6b65f9663e4", "9c796984b731ff5b", "de545012a6dc64e8", "de63b3bbc8790ec6"}


def test_no_pinned_builtin_key_changed() -> None:
    """Every trial key pinned for a built-in space (computed before unread fields took their
    default, stored as test data) is still planned, under the same label: no recorded built-in
    sweep is remapped. A new space, arm, value or seed adds keys, which is no remapping, so
    only the pinned ones are held."""
    assert changed_keys(json.loads(DATA.read_text()), builtin_keys()) == {}


def test_the_pinned_check_names_a_moved_or_dropped_key_and_allows_new_ones() -> None:
    """A pinned key planned under another label, or not planned at all (here a whole space
    gone), is named; keys added beside the pinned ones and new spaces are not."""
    pinned = {
        "demo": {"keys": {"k1": "standard seed 0", "k2": "block_attnres seed 0"}},
        "gone": {"keys": {"k9": "standard seed 0"}},
    }
    now = {
        "demo": {"keys": {"k1": "standard seed 0", "k2": "block_attnres seed 1", "k3": "new"}},
        "added": {"keys": {"k4": "standard seed 0"}},
    }
    assert changed_keys(pinned, now) == {
        "demo": {"k2": "block_attnres seed 0"},
        "gone": {"k9": "standard seed 0"},
    }


def test_a_grid_with_an_unread_field_collapses_to_one_trial_per_seed() -> None:
    """``standard`` does not read attnres_blocks: its two cells are one trial per seed, labelled
    without the field, at the field's default; Block AttnRes keeps both; the plan names the
    collapse; the merged trial knows the keys its cells had."""
    specs = grid_specs(grid_cells(BLOCKS, RunConfig())[0])
    labels = sorted(s.label for s in specs)
    assert labels == sorted(
        f"{arm} seed {seed}"
        for arm in ("standard", "block_attnres/attnres_blocks=2", "block_attnres/attnres_blocks=4")
        for seed in (0, 1)
    )
    standard = [s for s in specs if s.arm == "standard"]
    assert {s.config.model.attnres_blocks for s in standard} == {8}
    assert all("model.attnres_blocks" not in s.point for s in standard)
    assert len({s.key for s in specs}) == len(specs)
    assert set(next(s for s in standard if s.seed == 0).aliases) == set(OLD_STANDARD_KEYS)
    assert all(not s.aliases for s in specs if s.arm != "standard")
    assert {s.key for s in specs if s.arm != "standard"} == OLD_BLOCK_KEYS
    assert collapsed(grid_cells(BLOCKS, RunConfig())[0]) == [
        "standard × attnres_blocks 2, 4: one model, run once"
    ]


def _space_file(tmp_path: Path) -> Path:
    from search_spaces.loader import space_to_data

    path = tmp_path / "blocks.yaml"
    import yaml

    path.write_text(yaml.safe_dump(space_to_data(BLOCKS), sort_keys=False))
    return path


def test_the_plan_prints_the_collapse_and_plans_each_model_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``nas sweep`` on a space file whose cells collapse plans 6 trials, not 8, and says why."""
    p = plan(SweepOptions(space=str(_space_file(tmp_path)), storage_path=str(tmp_path / "ray")))
    assert len(p.specs) == 6 and not p.skipped
    assert "standard × attnres_blocks 2, 4: one model, run once" in capsys.readouterr().out


def test_search_proposals_that_build_one_model_share_a_key() -> None:
    """A search over the residual and hc_streams: standard proposals differing only in
    hc_streams are one trial (key, label, configuration); hyper proposals are two."""
    space = Space(
        name="s",
        description="",
        kind="search",
        params={
            "model.residual": Choice(("standard", "hyper")),
            "model.hc_streams": Choice((2, 3)),
        },
        trials=4,
    )
    base = RunConfig()
    std = [
        search_spec(base, space, {"model.residual": "standard", "model.hc_streams": n}, 0)
        for n in (2, 3)
    ]
    hyper = [
        search_spec(base, space, {"model.residual": "hyper", "model.hc_streams": n}, 0)
        for n in (2, 3)
    ]
    assert std[0] == std[1] and std[0].arm == "residual=standard"
    assert std[0].config.model.hc_streams == 4
    assert hyper[0].key != hyper[1].key and hyper[1].config.model.hc_streams == 3
    # the key the searcher's warm start gives a study's trial (no base at hand) is the same
    assert proposal_identity(space, {"model.residual": "standard", "model.hc_streams": 3}, 0) == (
        std[0].key,
        std[0].arm,
    )
    # Sampled hc_streams alone, the base's residual leaving it unread: the configuration takes
    # the default, the key keeps the value (decided from the point, as proposal_identity is)
    only = replace(space, params={"model.hc_streams": Choice((2, 3))})
    two = [search_spec(base, only, {"model.hc_streams": n}, 0) for n in (2, 3)]
    assert two[0].key != two[1].key and {s.config.model.hc_streams for s in two} == {4}


def _old_record(name: str) -> StoredSweep:
    """A record of built-in space ``name`` as the code before this rule wrote it."""
    data = json.loads(OLD_RECORDS.read_text())[name]
    trials = {
        key: RecordedTrial(
            key,
            key,
            t["arm"],
            t["seed"],
            Status.FINISHED,
            "FINISHED",
            "",
            recorded_params(data, key),
            {},
        )
        for key, t in data["trials"].items()
    }
    return StoredSweep(SweepRecord("sqlite:///nowhere", "1", "p", name), data["base"], trials)


# Arms a built-in space gained after its old record was written: the record's sweep, run again,
# adds their trials and re-runs none of its own.
ARMS_ADDED_SINCE = {
    "attnres_ablation": (
        "attnres/sources=deltas",
        "block_attnres/sources=deltas",
        "attnres/query=static_input",
        "attnres/query=input_d",
        "attnres/query=input_sqrt_d",
        "attnres/query=low_rank",
        "attnres/query=gated",
        "attnres/query=input,query_lr=1/64",
    ),
}


@pytest.mark.parametrize("name", RECORDED_SPACES)
def test_an_old_record_of_a_builtin_sweep_is_the_same_plan(name: str, tmp_path: Path) -> None:
    """A record written before unread fields took their default continues: every planned key
    but those of arms added since is recorded (nothing runs twice) and the recorded configurations, normalized as the plan's
    are, do not differ, although a standard trial there holds the space's attnres_blocks."""
    stored = _old_record(name)
    p = plan(SweepOptions(space=name, storage_path=str(tmp_path)))
    added = {s.key for s in p.specs if s.arm in ARMS_ADDED_SINCE.get(name, ())}
    assert {s.key for s in p.specs} - added == set(stored.trials)
    assert conflicts(stored, without_execution(flatten(p.base)), p.specs) == ""
    standard = next(s for s in p.specs if s.config.model.residual == "standard")
    assert stored.trials[standard.key].params["model.attnres_blocks"] != "8"
    assert standard.config.model.attnres_blocks == 8


def test_an_old_record_is_refused_where_it_was_refused_before(tmp_path: Path) -> None:
    """The old record of ``quick`` is still refused for a changed base or a changed cell; an
    old record holding both cells of a collapsed model refuses the plan that would train that
    model once more, naming its recorded trials."""
    stored = _old_record("quick")
    lr = plan(SweepOptions(space="quick", storage_path=str(tmp_path), overrides=("train.lr=0.01",)))
    assert "train.lr: 0.003 -> 0.01" in conflicts(
        stored, without_execution(flatten(lr.base)), lr.specs
    )
    p = plan(SweepOptions(space="quick", storage_path=str(tmp_path)))
    key = p.specs[0].key
    edited = replace(
        stored.trials[key], params={**stored.trials[key].params, "model.d_model": "32"}
    )
    changed = replace(stored, trials={**stored.trials, key: edited})
    assert "model.d_model: 32 -> 64" in conflicts(
        changed, without_execution(flatten(p.base)), p.specs
    )
    specs = grid_specs(grid_cells(BLOCKS, RunConfig())[0])
    old = {
        key: RecordedTrial(key, key, arm, 0, Status.FINISHED, "FINISHED", "", {}, {})
        for key, arm in OLD_STANDARD_KEYS.items()
    }
    merged = StoredSweep(SweepRecord("sqlite:///nowhere", "1", "p", "blocks"), {}, old)
    reason = conflicts(merged, {}, specs)
    assert "'standard/attnres_blocks=2', 'standard/attnres_blocks=4'" in reason
    assert "runs once as 'standard seed 0'" in reason


def test_sweep_set_of_a_field_no_configuration_reads_is_refused(tmp_path: Path) -> None:
    """``--set model.hc_streams=2`` on smoke (standard and Block AttnRes) is refused with one
    line naming its readers, before anything is recorded; a field one arm reads is accepted and
    the other arm runs at its default."""
    with pytest.raises(ValueError) as err:
        plan(
            SweepOptions(
                space="smoke", storage_path=str(tmp_path), overrides=("model.hc_streams=2",)
            )
        )
    assert str(err.value) == (
        "model.hc_streams: 2 applies to residual 'hyper', 'mhc' or 'mhc_lite' only; no "
        "configuration of space 'smoke' reads it (leave it at 4)"
    )
    p = plan(
        SweepOptions(
            space="smoke", storage_path=str(tmp_path), overrides=("model.attnres_blocks=1",)
        )
    )
    blocks = {s.config.model.residual: s.config.model.attnres_blocks for s in p.specs}
    assert blocks == {"standard": 8, "block_attnres": 1}
    search = plan(
        SweepOptions(
            space="pareto_size", storage_path=str(tmp_path), overrides=("model.attnres_blocks=2",)
        )
    )
    assert search.base.model.attnres_blocks == 2  # block_attnres is among its residuals
    with pytest.raises(ValueError, match=r"model\.rope_base: 50\.0 applies to pos 'rope' only"):
        plan(
            SweepOptions(
                space="tune_lr",
                storage_path=str(tmp_path),
                overrides=("model.pos=learned", "model.rope_base=50"),
            )
        )


def test_train_set_of_an_unread_field_exits_2_with_one_line(tmp_path: Path) -> None:
    """``nas train --set model.hc_streams=2`` on a standard model is refused before training:
    exit status 2, one line naming what reads it; the same wording as a ModelConfig's own
    refusal (laurel_rank); a --config file's unread value is dropped instead (a saved
    configuration holds every field)."""
    out = run_nas(tmp_path, "train", "--set", "model.hc_streams=2")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == (
        "nas: error: model.hc_streams: 2 applies to residual 'hyper', 'mhc' or 'mhc_lite' only; "
        "this configuration (residual 'standard') does not read it (leave it at 4)\n"
    )
    out = run_nas(tmp_path, "train", "--set", "model.laurel_rank=8")
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert (
        "applies to residual 'laurel_lr' only; this configuration (residual 'standard')"
        in out.stderr
    )
    assert not list(tmp_path.iterdir())


def test_train_configuration_drops_what_a_file_gives_an_unread_field(tmp_path: Path) -> None:
    """A --config file (nas train's own saved configuration, written before this rule) holding
    an unread value loads, at the field's default; a --set on top that the model reads is kept."""
    import argparse

    from nas.commands.train import configuration

    path = tmp_path / "config.yaml"
    path.write_text("model:\n  residual: standard\n  hc_streams: 2\n  rope_base: 500.0\n")
    args = argparse.Namespace(
        config=str(path), overrides=["model.pos=rope"], from_run=None, tracking_uri=None
    )
    cfg = configuration(args)
    assert (cfg.model.hc_streams, cfg.model.rope_base) == (4, 500.0)
