"""Training length from a budget: ``train.target_flops`` (a FLOP count) or
``train.tokens_per_param`` (a data-to-parameter ratio) sets ``max_steps`` from the configuration's
own FLOPs or parameters, and the schedule scales with it.

Exactly one of ``max_steps``, ``target_flops`` and ``tokens_per_param`` says how long a run is.
``max_steps`` keeps its default of 600 so that configurations and records made before budgets
existed mean what they meant; a budget replaces that default. With a budget, ``max_steps`` may
therefore hold only its default (not yet resolved) or the budget's own step count (resolved); any
other value was set as well, and ``resolve_budget`` refuses it. A ``max_steps`` of exactly 600
given together with a budget cannot be told from the default and reads as unset (``nas sweep``
refuses both on one command line, ``check_one_length``).

``warmup_steps`` and ``val_every`` are read as parts of the default 600-step schedule and keep
their fraction of the derived length: a 60-step warm-up is 10% of any budgeted run, and a run
validates about 600 / ``val_every`` times whatever its length.

``resolve_budget`` is applied once where a trial's configuration is built
(``search_spaces.space.apply_point``, ``nas train``), so every record holds the derived
``max_steps`` beside the budget; applied to a resolved configuration it changes nothing.
Torch-free, like ``trainers.config``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from trainers.config import ModelConfig, RunConfig, TrainConfig
from trainers.flops import flops_per_token

# max_steps's default: the schedule warmup_steps and val_every are given for, and what a budget
# replaces.
REFERENCE_STEPS = TrainConfig().max_steps
BUDGET_FIELDS = ("target_flops", "tokens_per_param")
LENGTH_FIELDS = ("max_steps", *BUDGET_FIELDS)
# The same as recorded params (dotted), and what a budget derives: the one list of each, which
# the sweep's plan and the report both read.
BUDGET_KEYS = tuple(f"train.{n}" for n in BUDGET_FIELDS)
DERIVED_KEYS = ("train.max_steps", "train.warmup_steps", "train.val_every")


def budgeted(base: TrainConfig, searched: Iterable[str] = ()) -> bool:
    """Whether trials take their length from a budget: ``base`` sets one, or a searched
    parameter (a dotted key in ``searched``) is one; each trial then trains its own steps."""
    return any(getattr(base, n) > 0 for n in BUDGET_FIELDS) or bool(set(BUDGET_KEYS) & {*searched})


def budget_params(cfg: ModelConfig) -> int:
    """The N of ``tokens_per_param``: the sublayers' weight matrices, n_layers (4 d^2 + 2 d h)
    (Kaplan et al. 2020's non-embedding count, biases left out). Norms, gains and the wiring's
    own parameters are left out too, so every wiring of one shape trains on the same tokens."""
    d = cfg.d_model
    return cfg.n_layers * (4 * d * d + 2 * d * cfg.mlp_hidden)


def budget_steps(cfg: RunConfig) -> int | None:
    """The optimizer steps the budget buys, at least one; None without a budget.
    target_flops: ceil(target_flops / (FLOPs per token x batch_size x seq_len)), FLOPs per token
    as ``trainers.flops`` counts them (the wiring's own products included), so a run trains
    on at least its budget and less than one step more. tokens_per_param: ceil(ratio x N /
    (batch_size x seq_len)), N = ``budget_params``."""
    t, m = cfg.train, cfg.model
    tokens_per_step = t.batch_size * m.seq_len
    if t.target_flops > 0:
        return max(1, math.ceil(t.target_flops / (flops_per_token(m).total * tokens_per_step)))
    if t.tokens_per_param > 0:
        return max(1, math.ceil(t.tokens_per_param * budget_params(m) / tokens_per_step))
    return None


def resolve_budget(cfg: RunConfig) -> RunConfig:
    """``cfg`` with ``max_steps`` derived from its budget and warm-up and validation scaled to
    it; unchanged without a budget or when already resolved. ValueError when ``max_steps`` was
    set besides a budget."""
    steps = budget_steps(cfg)
    t = cfg.train
    if steps is None or t.max_steps == steps:
        return cfg
    if t.max_steps != REFERENCE_STEPS:
        budget = next(f"train.{n}={getattr(t, n)!r}" for n in BUDGET_FIELDS if getattr(t, n) > 0)
        raise ValueError(
            f"train.max_steps: {t.max_steps} is set together with {budget}; set exactly one of "
            f"train.max_steps, train.target_flops, train.tokens_per_param (the budget gives "
            f"{steps} steps here; leave max_steps at its default {REFERENCE_STEPS})"
        )
    scale = steps / REFERENCE_STEPS
    warmup = min(steps, max(1 if t.warmup_steps else 0, round(t.warmup_steps * scale)))
    val_every = min(steps, max(1, round(t.val_every * scale)))
    train = replace(t, max_steps=steps, warmup_steps=warmup, val_every=val_every)
    return replace(cfg, train=train)


def check_one_length(overrides: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a command line that sets two of max_steps, target_flops and tokens_per_param
    (where an explicit max_steps of 600 can still be told from the default)."""
    given = [f"train.{n}" for n in LENGTH_FIELDS if overrides.get("train", {}).get(n)]
    if len(given) > 1:
        raise ValueError(
            f"{' and '.join(given)}: set exactly one of train.max_steps, train.target_flops, "
            "train.tokens_per_param (a budget derives max_steps)"
        )


def under_length(base: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """A flat base configuration (dotted keys, a space's base) under a run length given on the
    command line (``--max-steps``, or a ``--set`` of train.max_steps, train.target_flops or
    train.tokens_per_param): the given length replaces the base's own, so the two never meet in
    one configuration. When a budget replaces the base's max_steps, the base's warm-up and
    validation interval are rescaled to the 600-step schedule a budget scales from, so they keep
    their fraction of the run."""
    keys = [f"train.{n}" for n in LENGTH_FIELDS]
    given = [k for k in keys if flat.get(k)]
    if not given:
        return dict(base)
    # A given length the base holds stays there, to be replaced: a trial's key hashes its
    # point, which holds the space's base, so --max-steps keeps the keys it always made.
    out = {k: v for k, v in base.items() if k not in keys or k in given}
    steps = base.get("train.max_steps")
    if steps and not flat.get("train.max_steps"):
        for key in ("train.warmup_steps", "train.val_every"):
            if key in out:
                out[key] = max(1 if out[key] else 0, round(out[key] * REFERENCE_STEPS / steps))
    return out
