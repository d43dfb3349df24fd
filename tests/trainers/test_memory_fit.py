"""The cheapest setting that fits a device (``trainers.measure.memory_fit``): a smaller micro-batch
first, then checkpointing, then sharding, and None when nothing fits."""

from __future__ import annotations

import dataclasses

from trainers.config import ModelConfig, RunConfig, TrainConfig
from trainers.measure.memory_fit import cheapest_fit
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
