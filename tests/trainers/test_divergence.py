"""Ending a run early: the divergence rule on constructed loss sequences, and real Lightning runs
that diverge, run out of time, finish, or resume with the guard's state."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from tests.trainers.callbacks import SaveAtStep
from trainers.config import RunConfig
from trainers.config_io import from_dict
from trainers.flops import flops_per_token
from trainers.training.divergence import SETTLE_STEPS, DivergenceGuard, DivergenceRule
from trainers.training.run import TrainResult, train


def _feed(rule: DivergenceRule, losses: list[float]) -> tuple[int, str] | None:
    """(step, reason) of the first divergence in ``losses`` (step 1 first), or None."""
    for step, loss in enumerate(losses, start=1):
        reason = rule.check(step, loss)
        if reason is not None:
            return step, reason
    return None


def test_nan_or_inf_stops_at_its_step_even_in_warm_up() -> None:
    """A non-finite loss is a divergence at the step it appears, warm-up or not."""
    assert _feed(DivergenceRule(factor=4, warmup_steps=50), [3.0] * 6 + [math.nan]) == (
        7,
        "loss nan at step 7",
    )
    assert _feed(DivergenceRule(factor=4, warmup_steps=0), [3.0] * 20 + [math.inf]) == (
        21,
        "loss inf at step 21",
    )


def test_spike_above_factor_times_best_smoothed_loss_stops() -> None:
    """After warm-up, one loss above factor x the lowest smoothed loss ends the run there; a
    loss just under the bar does not."""
    rule = DivergenceRule(factor=4, warmup_steps=5)
    assert _feed(rule, [2.0] * 30 + [7.9]) is None
    assert _feed(DivergenceRule(factor=4, warmup_steps=5), [2.0] * 30 + [8.1]) == (
        31,
        "loss 8.1 > 4 x best smoothed 2 at step 31",
    )


def test_best_is_the_lowest_smoothed_loss_so_far() -> None:
    """The bar follows the smoothed loss down, never up: after falling from 4 to 1 and rising
    back to 3, a loss of 4.6 is above 4 x the best (about 1), though not 4 x the current 3."""
    found = _feed(
        DivergenceRule(factor=4, warmup_steps=0), [4.0] * 20 + [1.0] * 60 + [3.0] * 30 + [4.6]
    )
    assert found is not None and found[0] == 111
    assert found[1].startswith("loss 4.6 > 4 x best smoothed 1.0")


def test_the_same_spike_during_warm_up_or_before_the_average_settles_does_not_stop() -> None:
    """The comparison waits for warm-up's end and for the average to hold SETTLE_STEPS losses."""
    assert _feed(DivergenceRule(factor=4, warmup_steps=50), [2.0] * 30 + [100.0]) is None
    early = [2.0] * (SETTLE_STEPS - 2) + [100.0]
    assert _feed(DivergenceRule(factor=4, warmup_steps=0), early) is None


def test_factor_zero_turns_the_comparison_off_but_not_the_nan_check() -> None:
    """divergence_factor 0: no spike ends the run; a NaN still does."""
    assert _feed(DivergenceRule(factor=0, warmup_steps=0), [2.0] * 30 + [1e9]) is None
    assert _feed(DivergenceRule(factor=0, warmup_steps=0), [2.0] * 30 + [math.nan]) == (
        31,
        "loss nan at step 31",
    )


def test_rule_state_round_trips() -> None:
    """A rule restored from state_dict judges the rest of a sequence as the original does."""
    first = DivergenceRule(factor=4, warmup_steps=5)
    assert _feed(first, [3.0] * 10 + [1.5] * 20) is None
    restored = DivergenceRule(factor=4, warmup_steps=5)
    restored.load_state_dict(first.state_dict())
    assert restored.state_dict() == first.state_dict()
    assert restored.check(31, 7.0) == first.check(31, 7.0) is not None


def _run(cache: Path, **train_overrides: object) -> RunConfig:
    train_section: dict[str, object] = {
        "batch_size": 8,
        "max_steps": 40,
        "val_every": 5,
        "val_batches": 2,
        "warmup_steps": 5,
        "accelerator": "cpu",
        "seed": 0,
        **train_overrides,
    }
    return from_dict(
        {
            "model": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 32},
            "train": train_section,
            "data": {"max_bytes": 1_000_000, "cache_dir": str(cache)},
        }
    )


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One corpus cache for the module's runs."""
    return tmp_path_factory.mktemp("cache")


def _rows(folder: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((folder / "metrics.csv").open()))


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_huge_learning_rate_diverges_at_the_guards_step_without_raising(
    tmp_path: Path, cache: Path
) -> None:
    """lr 1000 makes this tiny model's loss NaN within a few steps (step 8 with seed 0): the run
    ends there, well before max_steps, with no validation at that step; the result keeps the
    last finite validation (the one at step 7 measured the already-NaN weights) and the last
    dilution profile, and serializes as strict JSON."""
    result, _ = train(_run(cache, lr=1000.0, val_every=1), tmp_path / "run", progress=False)
    assert result.status == "diverged"
    assert result.stop_step == result.steps and 1 < result.steps < 40
    assert result.reason == f"loss nan at step {result.steps}"
    rows = _rows(tmp_path / "run")
    val = {int(r["step"]) + 1: float(r["val/loss"]) for r in rows if r["val/loss"]}
    assert sorted(val) == list(range(1, result.steps))  # every step but the last validated
    finite = [v for _, v in sorted(val.items()) if math.isfinite(v)]
    assert not math.isfinite(val[result.steps - 1])  # the model was NaN a step before the loss
    assert result.val_loss == finite[-1] and result.val_bpb is not None
    assert set(result.dilution) and all(math.isnan(v) for v in result.dilution.values())
    saved = _strict_json(result.to_json())
    assert saved["status"] == "diverged" and saved["dilution"]["dilution/stream_growth"] is None


def test_normal_run_finishes_with_the_default_status(tmp_path: Path, cache: Path) -> None:
    """A stable tiny run trains to max_steps: status 'finished', no reason, no stop step."""
    cfg = _run(cache, max_steps=10, val_every=10, lr=3e-3)
    result, _ = train(cfg, tmp_path / "run", progress=False)
    assert (result.status, result.reason, result.stop_step, result.steps) == (
        "finished",
        "",
        None,
        10,
    )
    assert math.isfinite(result.val_loss)
    assert TrainResult(0.0, None, 0, 0, 0.0, 0.0).status == "finished"


def test_tiny_time_limit_times_out_after_the_first_step(tmp_path: Path, cache: Path) -> None:
    """time_limit_s 1e-9: the run ends after step 1 as timed_out, with no validation run; its
    training FLOPs are those of the one step it trained."""
    cfg = _run(cache, val_every=1, diagnostics_every=0)
    result, _ = train(cfg, tmp_path / "run", progress=False, time_limit_s=1e-9)
    assert (result.status, result.steps, result.stop_step) == ("timed_out", 1, 1)
    per_token = flops_per_token(cfg.model).total
    assert (result.flops_per_token, result.train_flops) == (
        per_token,
        per_token * cfg.train.batch_size * cfg.model.seq_len,
    )
    assert result.reason == "ran past the 1e-09-second limit at step 1"
    assert math.isnan(result.val_loss) and result.val_bpb is None
    assert not [r for r in _rows(tmp_path / "run") if r.get("val/loss")]


class _GuardState(L.Callback):
    """Records the divergence guard's state when training (re)starts."""

    state: dict[str, Any] | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        guard = next(c for c in trainer.callbacks if isinstance(c, DivergenceGuard))
        self.state = guard.state_dict()


def test_guard_state_survives_a_checkpoint_resume(tmp_path: Path, cache: Path) -> None:
    """A run resumed from a checkpoint taken at step 10 starts with the guard's smoothed and
    best loss as they were at step 10, not from scratch."""
    cfg = _run(cache, max_steps=15, val_every=10, diagnostics_every=0)
    ckpt = tmp_path / "last.ckpt"
    train(cfg, tmp_path / "a", callbacks=[SaveAtStep(10, ckpt)], progress=False)
    saved = torch.load(ckpt, weights_only=True)["callbacks"]["DivergenceGuard"]
    assert saved["seen"] == 10 and saved["best"] is not None
    probe = _GuardState()
    result, _ = train(cfg, tmp_path / "b", callbacks=[probe], progress=False, ckpt_path=ckpt)
    assert probe.state == saved
    assert (result.status, result.steps) == ("finished", 15)
