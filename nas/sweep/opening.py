"""Opening a sweep's record for one invocation: compare the plan with what the record holds
(refuse a changed meaning before anything is written), archive it on --restart, open or find
the parent run, log this invocation's plan; and the context every trial of it gets."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from nas import package_version
from nas.campaign.kinds import Campaign
from nas.campaign.plan_check import conflicts, refusal
from nas.store.tracking import (
    RecordedTrial,
    StoredSweep,
    SweepRecord,
    find_sweep,
    log_plan,
    log_sweep_text,
    open_sweep,
    shareable,
    supersede,
    sweep_text,
    tag_sweep,
)
from nas.sweep.plan import Plan, SweepOptions, stated_memory
from nas.trial.checkpoints import latest_checkpoints
from nas.trial.run import SweepContext
from record.client import unopenable
from record.redact import redact
from record.schema import SKIPPED_FILE, SPACE_FILE, Tag
from trainers.config import flatten, without_execution


def begin(
    uri: str, p: Plan, opts: SweepOptions
) -> tuple[Plan, SweepRecord, dict[str, RecordedTrial]]:
    """Refuse a changed plan, else archive (--restart) or continue the stored sweep, open the
    record and log this invocation's plan. Nothing is written before the refusal. The plan
    comes back as the record leaves it: a staged campaign plans the stages an earlier
    invocation settled the way for."""
    stored = _stored(uri, p)
    if stored is not None and not opts.restart:
        p = replace(p, campaign=p.campaign.given(stored.trials))
        reason = p.campaign.refuses(_stored_state(stored, p.campaign.state_file)) or conflicts(
            stored, without_execution(flatten(p.base)), p.specs
        )
        if reason:
            raise ValueError(refusal(p.name, reason))
    if stored is not None and opts.restart:
        _archive(p.folder)
        supersede(stored)
        print(f"--restart: the earlier run of sweep {p.name!r} is archived (tag {Tag.SUPERSEDED})")
    record = _open_record(uri, p)
    from search_spaces.loader import space_to_data

    space = space_to_data(p.space)
    log_sweep_text(record, yaml.safe_dump(space, sort_keys=False), SPACE_FILE)
    skipped = [{"arm": s.arm, "reason": s.reason} for s in p.skipped]
    log_sweep_text(record, yaml.safe_dump(skipped, sort_keys=False), SKIPPED_FILE)
    log_plan(record, _plan_data(p))
    log_state(record, p.campaign)
    for s in p.skipped:
        print(f"skipped {s.arm}: {s.reason}")
    # what find_sweep read is this parent's trials (a restart starts a parent with none)
    return p, record, stored.trials if stored is not None and not opts.restart else {}


def _plan_data(p: Plan) -> dict[str, Any]:
    """This invocation's plan as the parent run keeps it: command, space, trial keys."""
    from search_spaces.loader import space_to_data

    return {
        "command": _command(),
        "space": space_to_data(p.space),
        "keys": [s.key for s in p.specs],
    }


def log_state(record: SweepRecord, campaign: Campaign) -> None:
    """What the campaign decided so far (a tuned grid's stage and choices), on the parent run;
    nothing for a campaign that decides nothing."""
    state = campaign.state()
    if state:
        log_sweep_text(record, json.dumps(state, indent=1, sort_keys=True), campaign.state_file)
        tag_sweep(record, campaign.state_tags())


def log_progress(record: SweepRecord, p: Plan) -> None:
    """The campaign planned more trials as the invocation ran (a tuned grid's seeds at their
    chosen learning rates): what it decided, its lines printed, and the invocation's plan file
    rewritten with every key it now names (``nas report --plan latest`` reads it)."""
    log_state(record, p.campaign)
    log_plan(record, _plan_data(p), again=True)
    for line in p.campaign.decisions():
        print(line)


def _stored_state(stored: StoredSweep, name: str) -> dict[str, Any]:
    """The campaign state the stored sweep's parent run keeps in ``name``; empty where it has
    none."""
    text = sweep_text(stored.record, name)
    try:
        return dict(json.loads(text)) if text else {}
    except ValueError:
        raise ValueError(f"the stored {name} is not JSON; use --restart") from None


def _archive(folder: Path) -> None:
    """Move the stored Tune state aside (``<name>.archived-<UTC time>``), keeping it."""
    if folder.exists():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        target = folder.with_name(f"{folder.name}.archived-{stamp}")
        folder.rename(target)
        print(f"--restart: the stored Tune state is now in {target}")


def _stored(uri: str, p: Plan) -> StoredSweep | None:
    """What the store already holds of this sweep (read only; none in a store the sweep's first
    write creates); a store that cannot be read is bad input, not a crash."""
    if not p.store_exists:
        return None
    try:
        return find_sweep(uri, p.name, str(p.folder))
    except Exception as err:  # MLflow raises its own exception types, sqlalchemy's, OSError
        raise ValueError(unopenable(uri, err)) from None


def _open_record(uri: str, p: Plan) -> SweepRecord:
    """Open the MLflow record: the sweep's parent run, created with the base configuration as
    its params, or found again."""
    try:
        return open_sweep(
            uri,
            p.name,
            key=str(p.folder),
            tags={
                Tag.COMMAND: _command(),
                Tag.SPACE: p.space.name,
                Tag.VERSIONS: json.dumps(_versions()),
            },
            base=flatten(p.base),
        )
    except Exception as err:
        raise ValueError(unopenable(uri, err)) from None


def _command() -> str:
    """The command line as typed (``nas ...``, whether run as the script or as ``python -m
    nas.cli``), redacted: a --tracking-uri may carry a password."""
    return redact(" ".join(["nas", *sys.argv[1:]]))


def _versions() -> dict[str, str]:
    """Versions of Python and the stack, read from package metadata (importing would cost
    seconds before the first trial)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version(), "nas": package_version()}
    for package in ("torch", "lightning", "ray", "optuna", "mlflow"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "missing"
    return found


def _git_commit() -> str:
    """The commit of the code running the sweep, when it runs from a git checkout."""
    import subprocess

    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except OSError:
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def context(opts: SweepOptions, p: Plan, record: SweepRecord) -> SweepContext:
    """What every trial of this invocation gets: the campaign (its spec from its Tune config),
    the earlier checkpoints of each key, the limits."""
    tags = {
        Tag.SPACE: p.space.name,
        Tag.VERSION: package_version(),
        Tag.GIT_COMMIT: _git_commit(),
    }
    checkpoints = latest_checkpoints(p.folder)
    return SweepContext(
        record=shareable(record),  # Tune pickles it to disk: no password
        campaign=p.campaign,
        tags=tags,
        worst=p.campaign.worst(),
        resume_from={k: tuple(str(c) for c in v) for k, v in checkpoints.items()},
        trial_timeout_s=None if opts.trial_timeout_min is None else opts.trial_timeout_min * 60,
        deadline=None if opts.time_budget_h is None else time.time() + opts.time_budget_h * 3600,
        folder=str(p.folder),
        peak_flops=opts.peak_flops,
        device_bytes=stated_memory(opts),
    )
