"""Ending a run early, right after the step that calls for it, with a status and a reason: a
diverged training loss (``DivergenceGuard``) or a wall-time limit (``TimeLimit``).

Both stop the fit with no further validation: after divergence the model is broken, and a run out
of time has no time for one. What the run then reports is ``trainers.training.run``'s concern.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import lightning as L
from torch import Tensor

# The smoothed loss is an exponential moving average with this decay: it averages about the last
# 1 / (1 - 0.9) = 10 steps, which cuts one batch's noise to about a quarter (std of the average
# sqrt(0.1 / 1.9) of one loss's) while still following a loss curve that moves over tens of
# steps. A slower average (0.99) would trail far above a falling loss and let a real blow-up
# through.
EMA_DECAY = 0.9
# Losses the average must hold before its value counts as the "lowest smoothed loss": one time
# constant, so a single low batch cannot set the bar that the next ordinary batch then crosses.
SETTLE_STEPS = 10


@dataclass(frozen=True)
class EarlyStop:
    """Why and where a run ended before ``max_steps``; ``step`` counts the steps trained."""

    status: Literal["diverged", "timed_out"]
    reason: str
    step: int


@dataclass
class DivergenceRule:
    """The divergence test on a stream of (step, training loss), with no Lightning in it.

    ``step`` counts optimizer steps done (1 for the first), so step ``warmup_steps + 1`` is the
    first one at the peak learning rate. A loss is a divergence when it is NaN or infinite (at
    any step), or, after warm-up, above ``factor`` times the lowest smoothed loss so far
    (``factor`` 0 turns that comparison off). Warm-up is exempt from the comparison: the loss
    falls fast from ln(vocab) there and early spikes are ordinary. A loss judged a divergence
    does not join the average.
    """

    factor: float
    warmup_steps: int
    ema: float | None = None
    seen: int = 0  # finite losses averaged into ema
    best: float | None = None  # lowest ema after warm-up, once settled

    def check(self, step: int, loss: float) -> str | None:
        """The one-line reason ``loss`` at ``step`` is a divergence, or None (then it is
        averaged in)."""
        if not math.isfinite(loss):
            return f"loss {loss} at step {step}"
        if self._above_best(step, loss):
            return (
                f"loss {loss:.4g} > {self.factor:g} x best smoothed {self.best:.4g} at step {step}"
            )
        self._average(step, loss)
        return None

    def _above_best(self, step: int, loss: float) -> bool:
        if self.factor <= 0 or step <= self.warmup_steps or self.best is None:
            return False
        return loss > self.factor * self.best

    def _average(self, step: int, loss: float) -> None:
        self.ema = loss if self.ema is None else EMA_DECAY * self.ema + (1 - EMA_DECAY) * loss
        self.seen += 1
        if step > self.warmup_steps and self.seen >= SETTLE_STEPS:
            self.best = self.ema if self.best is None else min(self.best, self.ema)

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers (a resumed trial loads its checkpoint with weights_only)."""
        return {"ema": self.ema, "seen": self.seen, "best": self.best}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.ema, self.seen, self.best = state["ema"], state["seen"], state["best"]


def stop_after_this_step(trainer: L.Trainer) -> None:
    """End the fit once the current training step is done, skipping the validation that
    Lightning 2.6 runs after any step that sets ``should_stop`` (meant for early stopping on a
    metric; here it would measure a broken model, or spend time the run does not have)."""
    trainer.should_stop = True
    # The epoch loop's own "skip the next validation" flag (it sets it when resuming after a
    # checkpoint saved at a validation): the one switch for that validation. Private, so
    # tests/trainers/test_divergence.py checks that no validation runs at the stop step.
    trainer.fit_loop.epoch_loop._skip_next_val = True


def _loss_of(outputs: Any, trainer: L.Trainer) -> float | None:
    """The step's loss from ``on_train_batch_end``'s outputs (a dict under automatic
    optimization, or the bare tensor), averaged over data-parallel ranks so that every rank
    judges the same number and they stop together (on one device: the loss itself)."""
    loss = outputs.get("loss") if isinstance(outputs, Mapping) else outputs
    if not isinstance(loss, Tensor):
        return None
    # float() waits for the step to finish on a GPU: the price of stopping at the step itself.
    return float(trainer.strategy.reduce(loss.detach(), reduce_op="mean"))


class DivergenceGuard(L.Callback):
    """Applies ``DivergenceRule`` to every training step's loss (not only the logged ones) and
    stops the run at the first divergence; ``stop`` then says where and why. The rule's state
    travels in Lightning checkpoints, so a resumed run judges against the same best."""

    def __init__(self, factor: float, warmup_steps: int) -> None:
        self.rule = DivergenceRule(factor=factor, warmup_steps=warmup_steps)
        self.stop: EarlyStop | None = None

    def on_train_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, *args: Any
    ) -> None:
        if self.stop is not None:
            return
        loss = _loss_of(outputs, trainer)
        if loss is None:
            return
        reason = self.rule.check(trainer.global_step, loss)
        if reason is not None:
            self.stop = EarlyStop("diverged", reason, trainer.global_step)
            stop_after_this_step(trainer)

    def state_dict(self) -> dict[str, Any]:
        return self.rule.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.rule.load_state_dict(state_dict)


class TimeLimit(L.Callback):
    """Stops the run after the first step that ends ``limit_s`` seconds or more after this fit
    started (a resumed run's clock starts again). A step that reaches ``max_steps`` is left to
    finish normally: the run has trained in full."""

    def __init__(self, limit_s: float) -> None:
        if not limit_s >= 0:
            raise ValueError(f"time_limit_s: {limit_s!r} must be >= 0")
        self.limit_s = limit_s
        self.stop: EarlyStop | None = None
        self._start = time.monotonic()

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.monotonic()

    def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
        if trainer.should_stop or trainer.global_step >= (trainer.max_steps or 0) > 0:
            return  # already stopping (diverged), or the last step: nothing left to cut
        over = time.monotonic() - self._start >= self.limit_s
        # every data-parallel rank stops at the same step, when any one's clock has run out
        if not trainer.strategy.reduce_boolean_decision(over, all=False):
            return
        step = trainer.global_step
        self.stop = EarlyStop(
            "timed_out", f"ran past the {_duration(self.limit_s)} limit at step {step}", step
        )
        stop_after_this_step(trainer)


def _duration(seconds: float) -> str:
    """'0.5-minute' from 60 s up, '30-second' below."""
    return f"{seconds / 60:g}-minute" if seconds >= 60 else f"{seconds:g}-second"
