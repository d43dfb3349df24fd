"""The spaces and records the campaign tests share, so that no test module imports another:
the campaign space texts (``BASE`` and its arms, the auto-seeds ``PILOT``, the tiny TPE
``TINY_SEARCH``), the searcher's small ``SEARCH`` space, and ``recorded``, a trial as the record
reads it back (``nas.store.tracking.RecordedTrial``) built from its spec."""

from __future__ import annotations

from typing import Any

from nas.store.tracking import RecordedTrial
from record.schema import Status
from search_spaces.distributions import Choice, FloatRange
from search_spaces.space import Objective, Space
from trainers.config import flatten

BASE = """\
description: a campaign on the smoke base
base: {model.d_model: 32, model.n_heads: 2, model.n_layers: 2, model.seq_len: 64,
       train.batch_size: 4, train.max_steps: 20, train.val_every: 10, train.val_batches: 2,
       train.warmup_steps: 2, train.diagnostics_batch: 2, data.max_bytes: 1000000,
       model.attnres_blocks: 2}
seeds: [0]
"""
ONE_ARM = BASE + "arms: {standard: {model.residual: standard}}\n"
ARMS = "arms: {standard: {model.residual: standard}, block: {model.residual: block_attnres}}\n"
TWO_ARMS = BASE + ARMS
EDITED = BASE + (
    "arms: {standard: {model.residual: standard, train.lr: 0.01}, "
    "block: {model.residual: block_attnres}}\n"
)
PILOT = BASE.replace("seeds: [0]", "seeds: [0, 1, 2]") + ARMS  # --seeds auto's pilot: 3 seeds

TINY_SEARCH = """\
description: a tiny TPE search
kind: search
base: {model.d_model: 32, model.n_heads: 2, model.n_layers: 2, model.seq_len: 64,
       train.batch_size: 4, train.max_steps: 20, train.val_every: 10, train.val_batches: 2,
       train.warmup_steps: 2, train.diagnostics_batch: 2, data.max_bytes: 1000000}
params:
  train.lr: {float: [0.0003, 0.01], log: true}
  model.residual: [standard, block_attnres]
  model.attnres_blocks: 2
trials: 3
"""

SEARCH = Space(
    name="s",
    description="",
    kind="search",
    params={"train.lr": FloatRange(1e-4, 1e-2, log=True), "model.d_model": Choice((32, 64))},
    trials=4,
    objectives=(Objective("val/loss"),),
)


def recorded(spec: Any, status: Status | None, metrics: dict[str, float]) -> RecordedTrial:
    """``spec``'s trial as the record reads it back: its run id its key, its resolved
    configuration as params, ``status`` and ``metrics``."""
    params = {k: str(v) for k, v in flatten(spec.config).items()}
    return RecordedTrial(
        spec.key, spec.key, spec.arm, spec.seed, status, "FINISHED", "", params, metrics
    )
