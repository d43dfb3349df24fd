"""The cheapest setting that fits a device (``trainers.measure.memory_fit``): a smaller micro-batch
first, then checkpointing, then sharding, and None when nothing fits."""

from __future__ import annotations

import dataclasses

import pytest

from trainers.config import ModelConfig, RunConfig, TrainConfig, micro_steps
from trainers.measure.memory_fit import (
    CPU_HEADROOM,
    GPU_HEADROOM,
    Headroom,
    applied,
    cheapest_fit,
    fit_auto,
    resolve_auto,
)
from trainers.measure.memory_plan import memory_plan

CFG = RunConfig(
    model=ModelConfig(d_model=64, n_heads=2, n_layers=4, seq_len=128, vocab_size=256),
    train=TrainConfig(batch_size=12, precision="32-true"),
)


def _with(**train: object) -> RunConfig:
    return dataclasses.replace(CFG, train=dataclasses.replace(CFG.train, **train))  # type: ignore[arg-type]


def _total(cfg: RunConfig, workers: int = 1, sharded: bool = False) -> int:
    return memory_plan(cfg, workers, sharded).total


def test_a_plan_that_fits_needs_nothing() -> None:
    """At its own estimate a configuration fits as it is."""
    fit = cheapest_fit(CFG, _total(CFG))
    assert fit is not None and fit.settings == () and not fit.shard
    assert fit.advice() == "nothing: it fits"


def test_the_largest_dividing_micro_batch_that_fits_comes_first() -> None:
    """Just below the whole batch's estimate: micro-batch 6, the largest divisor of 12 below it
    (not 11, which does not divide), with no checkpointing."""
    fit = cheapest_fit(CFG, _total(CFG) - 1)
    assert fit is not None and fit.settings == (("train.micro_batch", 6),)
    assert fit.advice() == "--set train.micro_batch=6"
    assert fit.plan.total <= _total(CFG) - 1


def test_checkpointing_comes_when_one_sequence_is_still_too_much() -> None:
    """Below even one sequence's estimate: checkpointing every sublayer, with the largest
    micro-batch that then fits."""
    device = _total(_with(micro_batch=1)) - 1
    fit = cheapest_fit(CFG, device)
    assert fit is not None and fit.settings[0] == ("train.checkpointing", "sublayer")
    micro = int(dict(fit.settings).get("train.micro_batch", 12))  # type: ignore[call-overload]
    larger = min(m for m in (1, 2, 3, 4, 6, 12) if m > micro)
    assert fit.plan.total <= device < _total(_with(checkpointing="sublayer", micro_batch=larger))


def test_sharding_comes_last_and_none_fits_below_everything() -> None:
    """Over 4 workers, below what checkpointing with one sequence needs: sharding; below what a
    sharded one-sequence step needs: nothing fits."""
    small = _with(checkpointing="sublayer", micro_batch=1)
    device = _total(small, workers=4) - 1
    fit = cheapest_fit(CFG, device, workers=4)
    assert fit is not None and fit.shard
    assert "--strategy fsdp (the parameters sharded over the 4 workers)" in fit.advice()
    assert cheapest_fit(CFG, _total(small, 4, sharded=True) - 1, workers=4) is None
    assert cheapest_fit(CFG, device, workers=1) is None


# ---- train.micro_batch=auto -----------------------------------------------------------------


def test_headroom_keeps_back_the_context_then_a_share_of_the_rest() -> None:
    """By hand: 80 GiB less 1 GiB of context is 79 GiB, of which 90% is 71.1 GiB."""
    room = Headroom(context=2**30, reserve=0.1)
    assert room.usable(80 * 2**30) == int(79 * 2**30 * 0.9)
    assert room.describe(80 * 2**30) == (
        "71.1 GiB usable of 80 GiB (1 GiB context, 10% allocator reserve, stated)"
    )
    assert room.usable(2**29) == 0  # a device smaller than its context lends nothing
    assert GPU_HEADROOM.context > 0 and CPU_HEADROOM.context == 0


def test_auto_takes_the_largest_dividing_micro_batch_at_its_boundary() -> None:
    """A budget of exactly micro-batch 4's estimate gives 4; one byte less gives 3 (the next
    divisor of 12 down), never 5 (no divisor); above the whole batch's it gives 12, the number
    written out. Checkpointing stays as configured."""
    auto = _with(micro_batch="auto")
    at_four = _total(_with(micro_batch=4))
    fit = fit_auto(auto, at_four)
    assert fit is not None and fit.settings == (("train.micro_batch", 4),)
    assert dict(fit_auto(auto, at_four - 1).settings)["train.micro_batch"] == 3  # type: ignore[union-attr]
    assert dict(fit_auto(auto, _total(CFG)).settings)["train.micro_batch"] == 12  # type: ignore[union-attr]


def test_auto_checkpoints_only_where_one_sequence_does_not_fit() -> None:
    """Between one checkpointed sequence's estimate and one plain sequence's: checkpointing
    every sublayer, with the largest micro-batch that then fits; below it: nothing."""
    auto = _with(micro_batch="auto")
    budget = _total(_with(micro_batch=1)) - 1
    fit = fit_auto(auto, budget)
    assert fit is not None and dict(fit.settings)["train.checkpointing"] == "sublayer"
    cfg = applied(auto, fit)
    assert cfg.train.checkpointing == "sublayer" and isinstance(cfg.train.micro_batch, int)
    assert _total(cfg) <= budget
    assert fit_auto(auto, _total(_with(micro_batch=1, checkpointing="sublayer")) - 1) is None


def test_resolving_auto_says_in_one_line_what_no_device_lends() -> None:
    """A number passes through unchanged; 'auto' that nothing fits is one line naming the
    need, the usable memory and what to change."""
    room = Headroom(context=0, reserve=0.1)
    assert resolve_auto(_with(micro_batch=4), 1, room) == _with(micro_batch=4)
    with pytest.raises(ValueError) as err:
        resolve_auto(_with(micro_batch="auto"), 2**20, room, gpu=False)
    text = str(err.value)
    assert "\n" not in text and text.startswith("train.micro_batch=auto: one sequence")
    assert "usable of 1 MiB" in text and "smaller model" in text
    with pytest.raises(ValueError, match="--strategy fsdp"):
        resolve_auto(_with(micro_batch="auto"), 2**20, room, workers=2, gpu=False)


def test_an_unresolved_auto_is_never_planned_as_a_number() -> None:
    """The plan and the step split refuse 'auto' until it is resolved, instead of reading it
    as some micro-batch."""
    with pytest.raises(ValueError, match="'auto' is not resolved"):
        micro_steps(_with(micro_batch="auto").train)
    with pytest.raises(ValueError, match="'auto' is not resolved"):
        memory_plan(_with(micro_batch="auto"))
