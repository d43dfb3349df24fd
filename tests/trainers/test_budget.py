"""Budgets instead of step counts (trainers.budget): the steps a FLOP budget or a
data-to-parameter ratio buys, the schedule that scales with them, and exactly one length."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from nas.campaign.plan_check import differences
from nas.sweep.plan import SweepOptions, plan
from trainers.budget import (
    REFERENCE_STEPS,
    budget_params,
    budget_steps,
    check_one_length,
    resolve_budget,
)
from trainers.config import ModelConfig, RunConfig, TrainConfig, flatten
from trainers.config_io import parse_overrides
from trainers.flops import flops_per_token, train_flops

MODEL = ModelConfig(
    d_model=32, n_heads=2, n_layers=3, seq_len=64, residual="block_attnres", attnres_blocks=3
)


def _cfg(**train: object) -> RunConfig:
    return RunConfig(model=MODEL, train=TrainConfig(batch_size=8, **train))  # type: ignore[arg-type]


@pytest.mark.parametrize("budget", [1e9, 3.3e10, 1e11])
def test_target_flops_buys_the_fewest_steps_that_reach_it(budget: float) -> None:
    """max_steps = ceil(budget / (FLOPs per token x batch x seq_len)): the run's FLOPs reach the
    budget, one step fewer would not."""
    cfg = resolve_budget(_cfg(target_flops=budget))
    steps = cfg.train.max_steps
    per_step = flops_per_token(MODEL).total * 8 * MODEL.seq_len
    assert steps == math.ceil(budget / per_step)
    assert train_flops(MODEL, steps - 1, 8) < budget <= train_flops(MODEL, steps, 8)


def test_tokens_per_param_trains_ratio_times_the_sublayer_weights() -> None:
    """tokens_per_param: ceil(ratio x n_layers (4 d^2 + 2 d h) / (batch x seq_len)) steps."""
    assert budget_params(MODEL) == 3 * (4 * 32 * 32 + 2 * 32 * 128)
    cfg = resolve_budget(_cfg(tokens_per_param=20.0))
    assert cfg.train.max_steps == math.ceil(20 * budget_params(MODEL) / (8 * 64)) == 1440


def test_the_schedule_keeps_its_fractions_of_the_600_step_one() -> None:
    """Warm-up and the validation interval scale by derived / 600 (rounded, warm-up >= 1 when
    set, both <= the run); the other fields are untouched."""
    base = _cfg(target_flops=1e11, warmup_steps=60, val_every=200, lr=1e-3)
    cfg = resolve_budget(base)
    steps = cfg.train.max_steps
    assert steps == 622
    assert cfg.train.warmup_steps == round(60 * steps / REFERENCE_STEPS) == 62
    assert cfg.train.val_every == round(200 * steps / REFERENCE_STEPS) == 207
    assert replace(cfg.train, max_steps=600, warmup_steps=60, val_every=200) == base.train
    tiny = resolve_budget(_cfg(target_flops=1e6, warmup_steps=60, val_every=200))
    assert (tiny.train.max_steps, tiny.train.warmup_steps, tiny.train.val_every) == (1, 1, 1)
    none = resolve_budget(_cfg(target_flops=1e11, warmup_steps=0))
    assert none.train.warmup_steps == 0


def test_resolving_twice_changes_nothing_and_no_budget_is_untouched() -> None:
    """Applied to a resolved configuration, or to one without a budget (every configuration
    before budgets), resolve_budget returns it as it is."""
    cfg = resolve_budget(_cfg(target_flops=1e11))
    assert resolve_budget(cfg) is cfg
    plain = RunConfig()
    assert resolve_budget(plain) is plain and budget_steps(plain) is None


@pytest.mark.parametrize(
    ("train", "match"),
    [
        (
            {"max_steps": 100, "target_flops": 1e11},
            "train.max_steps: 100 is set together with "
            "train.target_flops=100000000000.0; set exactly one",
        ),
        ({"max_steps": 100, "tokens_per_param": 20.0}, "set exactly one of train.max_steps"),
    ],
)
def test_max_steps_beside_a_budget_is_refused(train: dict[str, object], match: str) -> None:
    """A max_steps that is neither the default nor the budget's own count was set as well."""
    with pytest.raises(ValueError, match=match):
        resolve_budget(_cfg(**train))


@pytest.mark.parametrize(
    ("train", "match"),
    [
        ({"target_flops": 1e11, "tokens_per_param": 20.0}, "both set; set exactly one"),
        ({"target_flops": -1.0}, "train.target_flops: -1.0 is out of range"),
        ({"target_flops": math.nan}, "train.target_flops: nan is out of range"),
        ({"tokens_per_param": math.inf}, "train.tokens_per_param: inf is out of range"),
    ],
)
def test_bad_budgets_fail_validation(train: dict[str, object], match: str) -> None:
    """Two budgets, or a negative or non-finite one, are rejected at construction."""
    with pytest.raises(ValueError, match=match):
        TrainConfig(**train)  # type: ignore[arg-type]


def test_a_command_line_sets_one_length() -> None:
    """On one command line even max_steps=600 is told from the default: two lengths refused."""
    check_one_length(parse_overrides(["train.target_flops=1e11", "train.lr=0.01"]))
    with pytest.raises(ValueError, match="train.max_steps and train.target_flops: set exactly"):
        check_one_length(parse_overrides(["train.max_steps=600", "train.target_flops=1e11"]))


def test_train_refuses_an_unresolved_budget(tmp_path: object) -> None:
    """train() never runs a budget for max_steps' default: it refuses before anything runs."""
    from trainers.training.run import train

    with pytest.raises(ValueError, match="budget is not resolved"):
        train(_cfg(target_flops=1e11), tmp_path)  # type: ignore[arg-type]


def test_a_record_from_before_budgets_is_not_a_changed_plan() -> None:
    """A default configuration recorded before the budget fields (as MLflow strings, without
    them) shows no difference from today's: its max_steps is still 600 and the new keys, which
    only one side holds, are not differences."""
    today = flatten(RunConfig())
    old = {
        k: str(v)
        for k, v in today.items()
        if k not in ("train.target_flops", "train.tokens_per_param")
    }
    assert today["train.max_steps"] == 600 and today["train.target_flops"] == 0.0
    assert differences(old, today) == []


def _plan(tmp_path: object, space: str, *overrides: str, **opts: object) -> object:
    return plan(
        SweepOptions(space, overrides=overrides, storage_path=str(tmp_path), **opts)  # type: ignore[arg-type]
    )


def test_a_budget_on_the_command_line_replaces_the_space_s_steps(tmp_path: object) -> None:
    """--set train.target_flops on a space with max_steps (quick: 150 steps, 15 warm-up, 50
    between validations) replaces its steps; warm-up and validation keep their fractions."""
    p = _plan(tmp_path, "quick", "train.target_flops=1e11")
    for spec in p.specs:  # type: ignore[attr-defined]
        t = spec.config.train
        assert t.max_steps == budget_steps(spec.config)
        assert t.warmup_steps == round(60 * t.max_steps / 600)
        assert t.val_every == round(200 * t.max_steps / 600)


def test_two_lengths_on_a_sweep_command_line_are_refused(tmp_path: object) -> None:
    """--max-steps with a --set budget is two lengths; --max-steps on a space whose cells carry
    a budget leaves it no valid cell, and the error says why."""
    with pytest.raises(ValueError, match="set exactly one"):
        _plan(tmp_path, "smoke", "train.target_flops=1e9", max_steps=30)
    with pytest.raises(ValueError, match="is set together with train.target_flops"):
        _plan(tmp_path, "compute_frontier", max_steps=30)


def test_max_steps_on_the_command_line_keeps_the_trial_keys(tmp_path: object) -> None:
    """--max-steps on a space whose base sets max_steps replaces it in every cell's point, as
    before budgets existed: the points, and so the trial keys of recorded sweeps, are unchanged."""
    from nas.spec import trial_key

    p = _plan(tmp_path, "smoke", "train.lr=0.01", max_steps=30)
    for spec in p.specs:  # type: ignore[attr-defined]
        assert spec.point["train.max_steps"] == 30 and spec.config.train.max_steps == 30
        assert spec.key == trial_key(spec.arm, spec.point, spec.seed)
    first = p.specs[0]  # type: ignore[attr-defined]
    assert (first.arm, first.key) == ("standard", "38b1951334e2c719")  # as recorded before budgets


def test_asha_never_compares_budgeted_trials_at_equal_steps(tmp_path: object) -> None:
    """A search whose trials train to a FLOP budget trains different step counts per trial:
    `auto` then schedules no ASHA (it would stop trials at equal steps, not equal compute), and
    an explicit `--scheduler asha` is refused; the same search without a budget gets ASHA."""
    from ray.tune.schedulers import ASHAScheduler

    from nas.sweep.tune_run import _scheduler

    plain = _plan(tmp_path, "tune_lr")
    assert isinstance(_scheduler(SweepOptions("tune_lr"), plain), ASHAScheduler)  # type: ignore[arg-type]
    budget = _plan(tmp_path, "tune_lr", "train.target_flops=1e11")
    assert _scheduler(SweepOptions("tune_lr"), budget) is None  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="--scheduler asha: .* use --scheduler none"):
        _plan(tmp_path, "tune_lr", "train.target_flops=1e11", scheduler="asha")
