"""A search space as data: what to vary (distributions keyed by dotted config field paths), the
named arms of an ablation, the seeds, and how to search; plus the one function that applies a
sampled point to a base configuration.

Two kinds: a **grid** runs every cell of arms x axes x seeds (what an ablation table needs); a
**search** samples ``params`` (Optuna's TPE by default) for ``trials`` trials, each over the seeds
listed. Invalid combinations are found here, by the configuration's own validation, before any
trial starts.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from record.schema import FINAL_OF, Metric
from search_spaces.distributions import Distribution, from_data
from search_spaces.lr_stage import LrStage
from trainers.budget import resolve_budget
from trainers.config import EXECUTION_FIELDS, ModelConfig, RunConfig, to_dict
from trainers.config_io import from_dict, nest
from trainers.corpus.manifest import pinned
from trainers.identity import unread_fields

Kind = Literal["grid", "search"]
Sampler = Literal["tpe", "random"]


# What a search can optimize: the metrics every trial reports to Tune at each validation.
OBJECTIVE_METRICS = tuple(FINAL_OF)  # what a search may optimize: a final value each
# Objectives no validation reports (trainers.measure.decode_cost runs once the fit has ended).
AFTER_TRAINING = ("decode/tokens_per_s",)


@dataclass(frozen=True)
class Objective:
    metric: str = Metric.VAL_LOSS
    mode: Literal["min", "max"] = "min"

    def __post_init__(self) -> None:
        if self.metric not in OBJECTIVE_METRICS:
            allowed = ", ".join(OBJECTIVE_METRICS)
            raise ValueError(f"objectives: unknown metric {self.metric!r}; allowed: {allowed}")

    @property
    def key(self) -> str:
        """The name Tune and Optuna see (Tune's result keys cannot hold '/')."""
        return self.metric.replace("/", "_")


@dataclass(frozen=True)
class Space:
    name: str
    description: str
    kind: Kind = "grid"
    base: Mapping[str, Any] = field(default_factory=dict)  # dotted key -> value, under every cell
    arms: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name -> dotted overrides
    params: Mapping[str, Distribution] = field(default_factory=dict)  # dotted key -> distribution
    seeds: tuple[int, ...] = (0,)
    trials: int = 0  # search only: how many points to sample
    sampler: Sampler = "tpe"
    objectives: tuple[Objective, ...] = (Objective(),)
    # grid only: a learning-rate stage each arm trains before its seeds (``search_spaces.lr_stage``)
    tune: LrStage | None = None

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("seeds: empty; give at least one seed")
        if self.kind == "search" and self.trials < 1:
            raise ValueError("trials: a search needs trials >= 1")
        if len({o.metric for o in self.objectives}) != len(self.objectives):
            raise ValueError("objectives: each metric may appear once")
        first = self.objectives[0].metric
        if first in AFTER_TRAINING:
            raise ValueError(
                f"objectives: {first!r} is measured once, after training, so it cannot come "
                "first (the objective a scheduler stops on at each validation); put val/loss "
                "or val/bpb first"
            )
        if self.kind == "grid":
            for key, dist in self.params.items():
                try:
                    dist.grid()
                except ValueError as err:
                    raise ValueError(f"params.{key}: {err}") from None
        if self.tune is not None:
            _check_tune(self, self.tune)
        _check_no_execution_axis(self)


def _check_no_execution_axis(space: Space) -> None:
    """How a trial runs (``trainers.config.EXECUTION_FIELDS``) is no axis of a comparison: two
    arms that differ only there train one model the same way."""
    varied = [(f"params.{k}", k) for k in space.params]
    varied += [(f"arms.{name}.{k}", k) for name, arm in space.arms.items() for k in arm]
    for where, key in varied:
        if key in EXECUTION_FIELDS:
            raise ValueError(
                f"{where}: how a trial runs, not what it trains (every value trains the same "
                "model the same way); set it in base or with nas sweep --set"
            )


def _check_tune(space: Space, stage: LrStage) -> None:
    """A learning-rate stage belongs to a grid, sets a numeric field of the configuration, and
    is the only thing that varies that field: the stage picks it per arm."""
    where = f"tune.{stage.param}"
    if space.kind != "grid":
        raise ValueError(
            f"tune: only a grid has a learning-rate stage ({space.name!r} is a search)"
        )
    section, _, name = stage.param.partition(".")
    default = getattr(getattr(RunConfig(), section, None), name, None)
    if isinstance(default, bool) or not isinstance(default, float):
        raise ValueError(
            f"{where}: not a numeric field of the configuration; a stage tunes one such as train.lr"
        )
    if stage.param in space.params:
        raise ValueError(f"{where}: params varies it too; give it in one of tune or params")
    for arm, overrides in space.arms.items():
        if stage.param in overrides:
            raise ValueError(f"{where}: arm {arm!r} sets it, but the stage picks it per arm")


@dataclass(frozen=True)
class Cell:
    """One grid cell: its arm label, the point applied (dotted keys), the seed, the config.

    ``stands_for`` holds, when a parameter its configuration does not read was dropped from the
    point, the (label, point) of each cell of arms x params it stands for, as they were written
    before such fields took their default (a recorded sweep may hold trials by them); empty
    when the cell stands for itself alone."""

    arm: str
    point: Mapping[str, Any]
    seed: int
    config: RunConfig
    stands_for: tuple[tuple[str, Mapping[str, Any]], ...] = ()


@dataclass(frozen=True)
class Skipped:
    arm: str
    point: Mapping[str, Any]
    reason: str


def _model_values(base: RunConfig, point: Mapping[str, Any]) -> dict[str, Any]:
    """The model section ``point`` gives over ``base``, not yet validated."""
    given = {k.removeprefix("model."): v for k, v in point.items() if k.startswith("model.")}
    return {**to_dict(base)["model"], **given}


def read_point(base: RunConfig, point: Mapping[str, Any], varied: Iterable[str]) -> dict[str, Any]:
    """``point`` without its ``varied`` keys that name a model field the configuration it makes
    over ``base`` does not read (``trainers.identity``), and without ``EXECUTION_FIELDS`` (which
    ``base`` carries): the point a trial key hashes and a label shows, so values of such a field
    make one model. Keys that are not varied stay: they are the
    same in every cell of an arm, and the keys of sweeps already recorded hash them."""
    unread = {f"model.{n}" for n in unread_fields(_model_values(base, point))}
    dropped = (unread & set(varied)) | EXECUTION_FIELDS  # how it runs: no part of what it is
    return {k: v for k, v in point.items() if k not in dropped}


def apply_point(base: RunConfig, point: Mapping[str, Any]) -> RunConfig:
    """The one way a sampled point becomes a configuration: ``base`` with the point's dotted
    keys replaced, every model field the result does not read at its default (as
    ``trainers.identity.normalized`` makes it: a value the configuration would refuse there is
    not its model's), validated (invalid combinations raise ValueError naming the field), its
    training length derived from its budget where it has one (``trainers.budget``), and a
    shards corpus's manifest hash filled in (``trainers.corpus.manifest.pinned``)."""
    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    unread = unread_fields(_model_values(base, point))
    normal = {**point, **{f"model.{n}": defaults[n] for n in unread}}
    return pinned(resolve_budget(from_dict(nest(normal), base)))


def arm_label(arm: str, point: Mapping[str, Any], space: Space) -> str:
    """The one readable label of a configuration without its seed: the arm's name plus the
    values of the space's varied parameters (a search trial, which has no arm, is named by its
    sampled values alone). Values are written in full (a float's shortest exact form): the
    report groups trials into arms by this label, so two sampled learning rates must never
    share one. Identity is ``nas.spec.TrialSpec.key``."""
    varied = [f"{k.split('.')[-1]}={v}" for k, v in point.items() if k in space.params]
    return "/".join([arm, *varied]) if arm else "/".join(varied) or "base"


def _arm_models(
    space: Space, base: RunConfig, arm: str, overrides: Mapping[str, Any]
) -> dict[str, tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]]:
    """One arm's cells of arms x params: label -> (its point, the (label, point) of each cell
    it stands for as written before unread fields took their default), in grid order."""
    keys = list(space.params)
    models: dict[str, tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]] = {}
    for values in itertools.product(*(space.params[k].grid() for k in keys)):
        raw = {**space.base, **overrides, **dict(zip(keys, values, strict=True))}
        point = read_point(base, raw, keys)
        label = arm_label(arm, point, space)
        models.setdefault(label, (point, []))[1].append((arm_label(arm, raw, space), raw))
    return models


def grid_cells(space: Space, base: RunConfig) -> tuple[list[Cell], list[Skipped]]:
    """Every valid cell of arms x params x seeds, and every invalid one with its reason. Cells
    that differ only in a parameter their configuration does not read are one cell (``collapsed``
    names them)."""
    cells: list[Cell] = []
    skipped: list[Skipped] = []
    for arm, overrides in (space.arms or {"": {}}).items():
        for label, (point, raws) in _arm_models(space, base, arm, overrides).items():
            try:
                config = apply_point(base, point)
            except ValueError as err:
                skipped.append(Skipped(label, point, str(err)))
                continue
            stands_for = () if raws == [(label, point)] else tuple(raws)
            for seed in space.seeds:
                cfg = apply_point(config, {"train.seed": seed})
                cells.append(Cell(label, point, seed, cfg, stands_for))
    return cells, skipped


def collapsed(cells: list[Cell]) -> list[str]:
    """One line per configuration that several cells of arms x params make, because they
    differ only in fields it does not read: ``standard × attnres_blocks 2, 4: one model, run
    once``."""
    lines: dict[str, str] = {}
    for cell in cells:
        if len(cell.stands_for) < 2 or cell.arm in lines:
            continue
        dropped = [k for k in cell.stands_for[0][1] if k not in cell.point]
        axes = (
            f"{k.split('.')[-1]} " + ", ".join(dict.fromkeys(str(p[k]) for _, p in cell.stands_for))
            for k in dropped
        )
        lines[cell.arm] = " × ".join([cell.arm, *axes]) + ": one model, run once"
    return list(lines.values())


def partitions(cells: list[Cell]) -> dict[str, tuple[int, ...]]:
    """Each AttnRes configuration's actual blocks (sublayers per block, in order), by arm label:
    what ``attnres_blocks`` = N means at that arm's depth."""
    out: dict[str, tuple[int, ...]] = {}
    for cell in cells:
        sizes = cell.config.model.attnres_block_sizes
        if sizes:
            out.setdefault(cell.arm, sizes)
    return out


def parse_params(data: Mapping[str, Any]) -> dict[str, Distribution]:
    out: dict[str, Distribution] = {}
    for key, value in data.items():
        try:
            out[key] = from_data(value)
        except ValueError as err:
            raise ValueError(f"params.{key}: {err}") from None
    return out
