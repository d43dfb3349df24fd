"""``reports.diff`` on constructed runs (only the differing keys, deltas, missing values kept
missing), and ``nas diff``'s identifiers on a real MLflow store written here run by run (no
Ray sweep): the live trial of a restarted sweep, an ambiguous or unknown ``sweep:arm:seed``, a
parent run, an unknown run id and a missing store, each one line and exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nas.cli import main
from record.read import RecordedRun, live_trial_id
from record.schema import Status, Tag
from reports.diff import TrialRef, config_changes, diff_runs, parse_ident, render
from tests.reports.store import Store, new

A_ID, B_ID = "a" * 32, "b" * 32


def _run(run_id: str, params: dict[str, str], metrics: dict[str, float]) -> RecordedRun:
    return RecordedRun(run_id, params, {Tag.ARM: "arm", Tag.SEED: "0"}, metrics)


def test_only_differing_keys_are_listed_with_both_values() -> None:
    """Equal keys are left out; a key one run lacks counts as differing, shown as None."""
    a = {"model.residual": "standard", "model.n_layers": "4", "train.lr": "0.001"}
    b = {"model.residual": "attnres", "model.n_layers": "4", "model.attnres_blocks": "2"}
    changes = {c.key: (c.a, c.b) for c in config_changes(a, b)}
    assert changes == {
        "model.residual": ("standard", "attnres"),
        "train.lr": ("0.001", None),
        "model.attnres_blocks": (None, "2"),
    }


def test_metric_deltas_are_b_minus_a_and_relative_to_a() -> None:
    """Each final and dilution row recomputes from its two values; one run's metric stays
    missing (no delta), and a zero A has no relative change."""
    a = _run(A_ID, {}, {"final/val_loss": 4.0, "final/mfu": 0.0, "dilution/stream_growth": 2.0})
    b = _run(B_ID, {}, {"final/val_loss": 3.0, "final/mfu": 0.5, "dilution/depth_entropy": 0.9})
    diff = diff_runs(a, b)
    for row in diff.finals:
        assert row.a is not None and row.b is not None
        assert row.delta == row.b - row.a
    loss = {r.name: r for r in diff.finals}["final/val_loss"]
    assert loss.relative == pytest.approx(-0.25)
    assert {r.name: r for r in diff.finals}["final/mfu"].relative is None
    dilution = {r.name: r for r in diff.dilution}
    assert set(dilution) == {"dilution/stream_growth", "dilution/depth_entropy"}
    assert dilution["dilution/depth_entropy"].a is None
    assert dilution["dilution/depth_entropy"].delta is None
    line = next(x for x in render(diff).splitlines() if "dilution/depth_entropy" in x)
    assert "missing" in line and " 0 " not in line


def test_same_run_renders_no_changes_and_zero_deltas() -> None:
    a = _run(A_ID, {"model.residual": "standard"}, {"final/val_loss": 4.0})
    diff = diff_runs(a, a)
    assert diff.changes == [] and all(r.delta == 0 for r in diff.finals)
    assert "none: the two runs share every configuration key" in render(diff)


@pytest.mark.parametrize(
    "text,expected",
    [
        (A_ID, A_ID),
        ("smoke:standard:0", TrialRef("smoke", "standard", 0)),
        ("s:block:attnres:12", TrialRef("s", "block:attnres", 12)),  # the arm keeps its colons
    ],
)
def test_identifiers_parse(text: str, expected: object) -> None:
    assert parse_ident(text, "RUN_A") == expected


@pytest.mark.parametrize("text", ["abc", "smoke:standard", "smoke:standard:x", ":arm:0", "A" * 32])
def test_bad_identifiers_are_refused_naming_the_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"RUN_B .*run id \(32 hex digits\) or sweep:arm:seed"):
        parse_ident(text, "RUN_B")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, dict[str, str]]:
    """Sweep ``again``: a parent archived by ``--restart`` and a live one, each with a trial
    of arm ``arm`` seed 0, and two live trials of arm ``searched`` seed 0 (ambiguous).
    Returns the store and the run ids by name."""
    s = Store(f"sqlite:///{tmp_path_factory.mktemp('diff') / 'mlflow.db'}")
    archived = s.parent("again", 1000, **{Tag.SUPERSEDED: "true"})
    live = s.parent("again", 2000)
    ids = {
        "parent": live,
        "archived": s.trial(archived, "k-old", "FINISHED", **new(Status.FINISHED)),
        "live": s.trial(live, "k1", "FINISHED", **new(Status.FINISHED)),
    }
    for key in ("p1", "p2"):
        s.trial(live, key, "FINISHED", **new(Status.FINISHED), **{Tag.ARM: "searched"})
    return s, ids


def test_sweep_arm_seed_takes_the_live_trial(store: tuple[Store, dict[str, str]]) -> None:
    s, ids = store
    assert live_trial_id(s.uri, "again", "arm", 0) == ids["live"]


@pytest.mark.parametrize(
    "ident,match",
    [
        (
            "again:searched:0",
            r"holds 2 live trials; name one by run id: \w{32}, \w{32}$",
        ),
        ("again:nope:0", "sweep 'again' has no arm 'nope'; arms: arm, searched"),
        ("again:arm:7", "arm 'arm' has no seed 7; seeds: 0"),
        ("gone:arm:0", "no sweep named 'gone' in .*; sweeps there: again"),
        ("0" * 32, "RUN_A 0{32}: no such run"),
        ("parent", "a sweep's parent run"),
    ],
)
def test_bad_ids_exit_2_with_one_line_and_write_nothing(
    store: tuple[Store, dict[str, str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    ident: str,
    match: str,
) -> None:
    s, ids = store
    out = tmp_path / "out"
    argv = ["diff", ids.get(ident, ident), ids["live"], "--tracking-uri", s.uri, "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("nas: error: ")
    assert re.search(match, err), err
    assert not out.exists()


def test_missing_store_is_refused_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert main(["diff", A_ID, B_ID, "--tracking-uri", uri]) == 2
    assert "no MLflow store there" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_field_one_configuration_does_not_read_is_no_difference() -> None:
    """Block AttnRes's block count beside a standard run (which normalizes it to its default)
    builds no other model: not listed; between two Block AttnRes runs it is."""
    a = {"model.residual": "standard", "model.attnres_blocks": "8"}
    b = {"model.residual": "block_attnres", "model.attnres_blocks": "2"}
    assert [c.key for c in config_changes(a, b)] == ["model.residual"]
    c = {**b, "model.attnres_blocks": "4"}
    assert [ch.key for ch in config_changes(b, c)] == ["model.attnres_blocks"]
