"""Which arm each arm is compared with: ``--baseline`` naming an arm, naming a wiring (that
wiring's arm in each context), or naming neither (bad input listing both kinds of name)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from reports.ablation import baselines, wiring_names
from tests.reports.frames import trial

WIRINGS = ("standard", "block_attnres")


def _depth_sweep(depths: tuple[int, ...] = (4, 8), **extra: Any) -> pd.DataFrame:
    """The demo's shape: each wiring at each depth, arms labelled ``wiring/n_layers=L``
    (Block AttnRes with N = 2, which every trial records)."""
    extra.setdefault("model__attnres_blocks", 2)
    rows = [
        trial(f"{w}/n_layers={n}", seed, 3.0, model__residual=w, model__n_layers=n, **extra)
        for w in WIRINGS
        for n in depths
        for seed in (0, 1)
    ]
    return pd.DataFrame(rows)


def test_a_wiring_name_picks_that_wiring_at_each_depth() -> None:
    """``standard`` is not an arm of a depth sweep; each arm gets the standard arm at its own
    depth, as the default matching does."""
    trials = _depth_sweep()
    chosen = baselines(trials, "standard")
    assert chosen == baselines(trials)
    for arm, base in chosen.items():
        assert base == "standard/n_layers=" + arm.rsplit("=", 1)[1]


def test_the_wiring_label_and_another_wiring_name_a_baseline_too() -> None:
    """The report's own wiring label (``standard/pre``) names the same arms; any wiring can be
    the baseline, here Block AttnRes at each depth."""
    trials = _depth_sweep()
    assert baselines(trials, "standard/pre") == baselines(trials, "standard")
    chosen = baselines(trials, "block_attnres")
    assert chosen["standard/n_layers=8"] == "block_attnres/n_layers=8"
    assert chosen["block_attnres/n_layers=4"] == "block_attnres/n_layers=4"


def test_a_full_arm_name_is_every_arms_baseline() -> None:
    """An arm's full label keeps its meaning: that one arm, across contexts."""
    chosen = baselines(_depth_sweep(), "standard/n_layers=4")
    assert set(chosen.values()) == {"standard/n_layers=4"}


def test_a_context_without_that_wiring_has_no_baseline() -> None:
    """Where the named wiring did not run at a depth, the arms there have no baseline (not one
    from another depth)."""
    trials = _depth_sweep()
    trials = trials[trials["arm"] != "standard/n_layers=8"]
    chosen = baselines(trials, "standard")
    assert chosen["block_attnres/n_layers=8"] is None
    assert chosen["block_attnres/n_layers=4"] == "standard/n_layers=4"


def test_an_unknown_name_lists_the_arms_and_the_wirings() -> None:
    """One line naming what is allowed: every arm and every wiring name."""
    with pytest.raises(ValueError) as err:
        baselines(_depth_sweep(), "attnres")
    message = str(err.value)
    assert "\n" not in message and "no such arm or wiring" in message
    arms, wirings = message.split("; arms: ")[1].split("; wirings: ")
    assert arms.split(", ") == sorted(f"{w}/n_layers={n}" for w in WIRINGS for n in (4, 8))
    assert set(wirings.split(", ")) == {
        "standard",
        "standard/pre",
        "block_attnres",
        "block_attnres/pre/N=2",
    }


def test_a_wiring_name_matching_several_arms_in_one_context_is_refused() -> None:
    """Two standard/pre arms that differ only in the norm (not part of the wiring label):
    ``standard/pre`` is ambiguous there, and the report says so rather than picking one; the
    arms' own names still tell them apart."""
    rows = [
        trial(f"standard/{norm}", 0, 3.0, model__residual="standard", model__norm=norm)
        for norm in ("rmsnorm", "layernorm")
    ]
    with pytest.raises(ValueError, match="names 2 arms in one context"):
        baselines(pd.DataFrame(rows), "standard/pre")
    chosen = baselines(pd.DataFrame(rows), "standard/layernorm")
    assert chosen["standard/rmsnorm"] == "standard/layernorm"


def test_wiring_names_drop_only_the_context_segments() -> None:
    """Segments an arm's own name carries (a design switch) stay part of its wiring name."""
    row = pd.Series({"model.residual": "attnres", "model.placement": "pre"})
    names = wiring_names("attnres/window=4/n_layers=8", row, ["model.n_layers"])
    assert "attnres/window=4" in names and "attnres" not in names


def test_trials_on_different_data_are_never_paired() -> None:
    """Trials on two prepared corpora (``data.manifest``) are different arms, each compared with
    the baseline on its own data; records from before the field read as no manifest."""
    from reports.normalize import varied_axes, with_arms

    rows = [
        trial(w, seed, 3.0, model__residual=w, model__attnres_blocks=2, data__manifest=m)
        for w in WIRINGS
        for m in ("aaaa", "bbbb")
        for seed in (0, 1)
    ]
    trials = with_arms(pd.DataFrame(rows))
    assert sorted(set(trials["arm"])) == [
        "block_attnres/manifest=aaaa",
        "block_attnres/manifest=bbbb",
        "standard/manifest=aaaa",
        "standard/manifest=bbbb",
    ]
    for arm, base in baselines(trials).items():
        assert base is not None and base.endswith(arm[-4:])  # the same corpus
    assert baselines(trials, "standard")["block_attnres/manifest=bbbb"] == "standard/manifest=bbbb"
    old = pd.DataFrame([trial("standard", 0, 3.0), trial("standard", 1, 3.0, data__manifest="")])
    assert "data.manifest" not in varied_axes(old)
