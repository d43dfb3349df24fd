"""The coord check a sweep records when it trains a parametrization other than ``sp``, so that
its report can show whether the parametrization kept each module class's update flat for the
wirings it compared (issue 25 §2).

For each distinct model the plan trains under such a parametrization (a grid's cells; a search's
base configuration): a reduced ``nas coordcheck`` along each axis the parametrization claims to
transfer (width; and depth for the depth parametrizations), at the command's three smallest
sizes (widths 32-128 at depth 2, depths 2-8 at width 32, from a base at the smallest; where the
wiring refuses depth 2, from the smallest depth it accepts), one seed, ``STEPS`` AdamW steps at
the base configuration's learning rate, the command's short context. The model keeps every other
field the sweep gave it (wiring, norm, attention, heads, vocabulary): the check tests the
parametrization's rules for that wiring over multipliers 1 to 4, where the command's band was
measured, not the sweep's own sizes (a one-seed check at other sizes would be judged by a band
not measured there). About a second per axis on one core.

Each check's table goes on the parent run as ``coordcheck/<name>.csv`` and the index
(``COORDCHECK_INDEX``) says what it checked; a model its configuration refuses at those sizes is
listed with the reason instead. A check the record already holds (an extended sweep) is not run
again. A sweep of ``sp`` models runs and records nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from nas.store.tracking import SweepRecord, log_sweep_text, sweep_text
from nas.sweep.plan import Plan
from record.schema import COORDCHECK_FOLDER, COORDCHECK_INDEX
from trainers.config import ModelConfig, TrainConfig
from trainers.identity import unread_fields
from trainers.measure.coordcheck_table import DEPTHS, WIDTHS
from trainers.model.parametrization import DEPTH_PARAMETRIZATIONS

# The sizes checked: the smallest times these, the command's three smallest sizes on each axis
# (widths 32-128, depths 2-8; its defaults span 8x and 16x). Over this 4x span, one seed's
# slopes of the correct parametrizations (-0.26 to +0.02) and of the known-bad sp (+0.48 and
# up) fall on either side of the band as over the full span (measured for standard and Block
# AttnRes under mup, depth_mup and completep).
SCALES = (1, 2, 4)
# The depths the check starts from, the command's smallest first; a later one where a wiring
# refuses the first (Block AttnRes with more blocks than 2 layers have sublayers).
DEPTH_STARTS = (DEPTHS[0], 4, 8, 16)
STEPS = 4
SEEDS = (0,)
BATCH_SIZE = 4
SEQ_LEN = 32  # the command's context (``nas.commands.coordcheck.DEFAULTS``)


def record_coordchecks(record: SweepRecord, p: Plan) -> None:
    """Run the checks the record lacks, log each table and the updated index; nothing for a
    sweep with no model under a parametrization other than sp."""
    wanted = planned(p)
    if not wanted:
        return
    index = _recorded(record)
    done = {entry["name"] for entry in index}
    new = [check for check in wanted if check.name not in done]
    if not new:
        return
    started = time.perf_counter()
    for check in new:
        index.append(_run(record, p.base.train, check))
    log_sweep_text(record, json.dumps(index, indent=1, sort_keys=True), COORDCHECK_INDEX)
    print(f"coord check: {len(new)} recorded in {time.perf_counter() - started:.1f} s")


@dataclass(frozen=True)
class Planned:
    """One check the plan asks for: its index entry (what it checks, without results) and the
    model at the check's smallest sizes, None where the configuration refuses them (the entry
    says why)."""

    entry: dict[str, Any]
    model: ModelConfig | None

    @property
    def name(self) -> str:
        return str(self.entry["name"])


def planned(p: Plan) -> list[Planned]:
    """The checks the plan asks for, each once, in a stable order."""
    models = [s.config.model for s in p.specs] or [p.base.model]
    found: dict[str, Planned] = {}
    for model in models:
        if model.parametrization == "sp":
            continue
        for check in _checks(model, p.base.train):
            found.setdefault(check.name, check)
    return list(found.values())


def axes(parametrization: str) -> tuple[str, ...]:
    """The axes a parametrization claims to transfer along: width, and depth for the depth
    parametrizations (muP scales width only)."""
    return ("width", "depth") if parametrization in DEPTH_PARAMETRIZATIONS else ("width",)


def _checks(model: ModelConfig, train: TrainConfig) -> list[Planned]:
    """One check per axis: the model at the check's sizes (or why it cannot be built there),
    the protocol, and a name that is a hash of all of it."""
    out = []
    for axis in axes(model.parametrization):
        entry: dict[str, Any] = {
            "axis": axis,
            "steps": STEPS,
            "seeds": list(SEEDS),
            "batch_size": BATCH_SIZE,
            "lr": train.lr,
        }
        small: ModelConfig | None = None
        try:
            small, sizes = _small(model, axis)
            entry |= {"sizes": list(sizes), "model": _model_dict(small)}
        except ValueError as err:
            entry |= {"model": _model_dict(model), "error": str(err)}
        digest = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:10]
        entry["name"] = f"{model.parametrization}-{axis}-{digest}"
        out.append(Planned(entry, small))
    return out


def _small(model: ModelConfig, axis: str) -> tuple[ModelConfig, tuple[int, ...]]:
    """The model at the check's smallest width and the smallest depth of ``DEPTH_STARTS`` it
    accepts (its base sizes there, where it reads them), and the sizes along ``axis``: each
    validated. ValueError with the last refusal where no start is accepted."""
    error = ValueError(f"no depth of {DEPTH_STARTS} is accepted")
    for depth in DEPTH_STARTS:
        start = WIDTHS[0] if axis == "width" else depth
        sizes = tuple(start * k for k in SCALES)
        try:
            return _at_sizes(model, depth, sizes, axis), sizes
        except ValueError as err:
            error = err
    raise error


def _at_sizes(model: ModelConfig, depth: int, sizes: tuple[int, ...], axis: str) -> ModelConfig:
    """The model at the check's smallest width and at ``depth``, its base sizes there (those it
    reads: muP reads no base depth), the command's context; validated at each of ``sizes``."""
    unread = set(unread_fields(model))
    bases = {"base_width": WIDTHS[0], "base_depth": depth}
    fields: dict[str, Any] = {k: v for k, v in bases.items() if k not in unread}
    fields |= {"d_model": WIDTHS[0], "n_layers": depth, "seq_len": min(model.seq_len, SEQ_LEN)}
    small = dataclasses.replace(model, **fields)
    for size in sizes:
        _at(small, axis, size)
    return small


def _at(model: ModelConfig, axis: str, size: int) -> ModelConfig:
    if axis == "width":
        return dataclasses.replace(model, d_model=size)
    return dataclasses.replace(model, n_layers=size)


def _model_dict(model: ModelConfig) -> dict[str, Any]:
    """The model as MLflow params name its fields (``model.<field>``)."""
    return {f"model.{k}": v for k, v in dataclasses.asdict(model).items()}


def _recorded(record: SweepRecord) -> list[dict[str, Any]]:
    """The index the parent run holds; empty where it has none (or one this version cannot
    read: its checks are then run again)."""
    text = sweep_text(record, COORDCHECK_INDEX)
    try:
        found = json.loads(text) if text else []
    except ValueError:
        return []
    return [e for e in found if isinstance(e, dict) and "name" in e]


def _run(record: SweepRecord, train: TrainConfig, planned: Planned) -> dict[str, Any]:
    """One check run and its table logged; its index entry with the file and the time."""
    entry = planned.entry
    if planned.model is None:
        print(f"coord check {planned.name}: not run ({entry['error']})")
        return entry
    from trainers.measure import coordcheck as cc
    from trainers.measure import coordcheck_table as table

    check = cc.CoordCheck(
        model=planned.model,
        train=train,
        axis=entry["axis"],
        sizes=tuple(entry["sizes"]),
        steps=entry["steps"],
        seeds=tuple(entry["seeds"]),
        batch_size=entry["batch_size"],
    )
    started = time.perf_counter()
    rows = _measured(check)
    seconds = time.perf_counter() - started
    path = f"{COORDCHECK_FOLDER}/{planned.name}.csv"
    log_sweep_text(record, table.to_csv(cc.table_rows(rows)), path)
    line = cc.verdict(rows, check.axis)[1]
    print(f"coord check {planned.name} ({check.axis} {entry['sizes']}): {line} ({seconds:.1f} s)")
    return {**entry, "file": path, "seconds": round(seconds, 2)}


def _measured(check: Any) -> list[Any]:
    """The check's rows on one thread (small matrices: faster than two), leaving the driver's
    thread count and random state as they were."""
    import torch

    from trainers.measure import coordcheck as cc

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.random.fork_rng(devices=[]):
            return cc.run(check)
    finally:
        torch.set_num_threads(threads)
