"""What a report is made from: one sweep (or several merged) as read from the store, and, derived
from it once at construction, the normalized view every section reads (``reports.normalize``).

The module stays light (pandas only for type checking, the view's step imported when a sweep
is built), so that the ``nas report`` parser can read ``PLAN_CHOICES`` for its ``--help``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from reports.normalize import TrialView

# Which invocations' trials a report covers (``reports.plans``): every plan, or the latest only.
PlanChoice = Literal["all", "latest"]
PLAN_CHOICES: tuple[str, ...] = get_args(PlanChoice)

TRIAL_COLUMNS = (
    "run_id",
    "status",
    "reason",
    "status_step",
    "run_status",
    "key",
    "arm",
    "seed",
    "node",
    "hardware",
    "git_commit",
    "version",
    "start",
    "end",
    "device_unit",
    "peak_flops_source",
)


@dataclass(frozen=True)
class RecordedCoordCheck:
    """One coord check a sweep recorded (``nas.sweep.coordcheck``): what it checked, as its
    index entry holds it (axis, sizes, steps, seeds, lr, the model's ``model.*`` fields, and
    ``error`` where the model's base sizes were refused), and its table
    (``trainers.measure.coordcheck_table``), None where it was not run or its file cannot be
    read."""

    entry: Mapping[str, Any]
    table: tuple[Mapping[str, float], ...] | None

    @property
    def name(self) -> str:
        return str(self.entry.get("name", ""))


# The per-run arrays of each trial's last profile that SweepData keeps, each run_id -> array: a
# selection of trials (a plan, a merge) keeps the same runs' entries of every one.
SITE_ARRAYS = (
    "depth_weights",
    "routing_top1",
    "routing_entropy",
    "routing_spread",
    "routing_margin",
    "routing_collapsed",
    "source_importance",
)


@dataclass(frozen=True)
class SweepData:
    """One sweep as read from the store, without the trials of parent runs that ``nas sweep
    --restart`` archived (tag ``nas.superseded``).

    - ``parents``: one row per live parent run (run_id, run_status, start, end, command, space,
      versions, plans: how many plan files it holds, and its ``sweep/*`` metrics)
    - ``trials``: one row per trial run (``TRIAL_COLUMNS``), as recorded: run_id, status (a
      ``Status`` value), reason, status_step, run_status (MLflow's), key, arm (the name the
      run carries), seed, node, hardware, git_commit, version, start, end, device_unit,
      peak_flops_source (reason, status_step, node, hardware, git_commit, version and the last
      two missing where the run did not record them, as is seed on an old infeasible record;
      never an empty string); then every param under its dotted name (numbers parsed), every
      latest metric under its name, and best_val_loss
    - ``curves``: run_id, metric, step, value for the validation metrics
    - ``profiles``: run_id, block, output_norm, stream_norm, grad_norm of each trial's last
      dilution profile; ``depth_weights``: run_id -> (site x source) softmax weights;
      ``routing_top1``, ``routing_entropy``, ``routing_spread``, ``routing_margin`` and
      ``routing_collapsed``: run_id -> per-site top-1 mass, normalized entropy, logit spread,
      runner-up margin and collapsed share, per token then averaged (``stats.routing``),
      where the profile recorded them (the margin and share since issue 50); ``source_importance``: run_id
      -> (site x source) loss change when that source is left out of that site
      (``train.diagnostics_importance``)
    - ``plans``: each invocation's plan as recorded ({"command", "space", "keys"}), oldest
      first; empty for a sweep recorded before plans were kept
    - ``plan``: which plans' trials ``trials`` holds: "all", or "latest" (``reports.plans``)
    - ``superseded``: how many parent runs ``--restart`` archived (their trials left out)
    - ``sweeps``: a report over several sweeps (``reports.merge``): each sweep's label, and
      ``trials`` and ``parents`` then have a ``sweep`` column; empty for one sweep
    - ``lr_stage``: a tuned grid's learning-rate stage as the sweep recorded it (its field,
      grid, seeds, and per arm the stage's keys by value and the choice); None for other sweeps
    - ``coordchecks``: the coord checks a sweep under a parametrization other than sp recorded
      for the models it trains (``RecordedCoordCheck``); empty for any other sweep
    - ``view`` (derived, not given): the trials as the sections read them, every arm labelled
      and the trials each section counts selected once (``reports.normalize.TrialView``).
      Built with the object, so a ``dataclasses.replace`` of ``trials`` (a plan selected, a
      merge) can never leave it stale.
    """

    name: str
    uri: str
    parents: pd.DataFrame
    space: dict[str, Any] | None
    trials: pd.DataFrame
    curves: pd.DataFrame
    profiles: pd.DataFrame
    depth_weights: dict[str, np.ndarray] = field(default_factory=dict)
    routing_top1: dict[str, np.ndarray] = field(default_factory=dict)
    routing_entropy: dict[str, np.ndarray] = field(default_factory=dict)
    routing_spread: dict[str, np.ndarray] = field(default_factory=dict)
    routing_margin: dict[str, np.ndarray] = field(default_factory=dict)
    routing_collapsed: dict[str, np.ndarray] = field(default_factory=dict)
    source_importance: dict[str, np.ndarray] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)  # grid cells never launched
    plans: list[dict[str, Any]] = field(default_factory=list)
    plan: PlanChoice = "all"
    superseded: int = 0
    sweeps: tuple[str, ...] = ()
    # a tuned grid's learning-rate stage as recorded (``LR_STAGE_FILE``); None for other sweeps
    lr_stage: dict[str, Any] | None = None
    # a --seeds auto sweep's choice and its inputs as recorded (``SEEDS_FILE``); None for others
    seeds_auto: dict[str, Any] | None = None
    coordchecks: tuple[RecordedCoordCheck, ...] = ()
    view: TrialView = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from reports.normalize import normalize, stage_keys, tuned_keys  # pandas: not for --help

        stage = self.lr_stage or {}
        param = str(stage["param"]) if "param" in stage else None
        view = normalize(self.trials, stage_keys(stage), tuned_keys(self.space), param)
        object.__setattr__(self, "view", view)


def site_arrays(datas: Sequence[SweepData], kept: set[str]) -> dict[str, Any]:
    """Every ``SITE_ARRAYS`` field of ``datas`` together, for the runs in ``kept`` only: what a
    plan's selection or a merge passes on (as keyword arguments of ``SweepData``)."""
    return {
        name: {k: v for d in datas for k, v in getattr(d, name).items() if k in kept}
        for name in SITE_ARRAYS
    }
