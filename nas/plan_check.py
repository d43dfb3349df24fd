"""Re-running a sweep with a changed plan: extend it, or refuse before anything runs.

More seeds, arms or parameter values (or more search trials) add trial keys and leave the
recorded ones as they are: that extends the sweep. A change to what recorded trials mean (the base
configuration, or the resolved configuration of a cell the record holds) would mix two
experiments under one name, or resume trials from checkpoints made under another configuration:
it is refused, naming the keys that differ.

Keys only one side has are not differences: a configuration field added by a newer version of
the harness is absent from older records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nas.spec import TrialSpec
from nas.tracking import RecordedTrial, StoredSweep
from trainers.config import flatten

MAX_SHOWN = 4


def differences(old: Mapping[str, str], new: Mapping[str, Any]) -> list[str]:
    """``key: old -> new`` for every key both sides hold with another value (the record holds
    strings, so values compare as MLflow wrote them)."""
    return [
        f"{k}: {old[k]} -> {new[k]}"
        for k in sorted(old.keys() & new.keys())
        if old[k] != str(new[k])
    ]


def _same_cell(spec: TrialSpec, by_cell: Mapping[tuple[str, int], RecordedTrial]) -> Any:
    return by_cell.get((spec.arm, spec.seed))


def conflicts(stored: StoredSweep, base: Mapping[str, Any], specs: Iterable[TrialSpec]) -> str:
    """Why this plan cannot continue the stored sweep, or "" when it can."""
    changed = differences(stored.base, base)
    if changed:
        return "the base configuration differs (" + _shown(changed) + ")"
    by_cell = {(t.arm, t.seed): t for t in stored.trials.values()}
    for spec in specs:
        recorded = stored.trials.get(spec.key) or _same_cell(spec, by_cell)
        if recorded is None:
            continue
        changed = differences(recorded.params, flatten(spec.config))
        if changed:
            return f"the recorded trial {spec.label!r} differs ({_shown(changed)})"
        if recorded.key != spec.key:
            # Same cell, same configuration, another key: recorded by an older version (or
            # its point was written differently). Continuing would run it a second time.
            return (
                f"the recorded trial {spec.label!r} has another trial key ({recorded.key} -> "
                f"{spec.key}: recorded by an older version, or its point was rewritten)"
            )
    return ""


def _shown(lines: list[str]) -> str:
    more = f"; and {len(lines) - MAX_SHOWN} more" if len(lines) > MAX_SHOWN else ""
    return "; ".join(lines[:MAX_SHOWN]) + more


def refusal(name: str, reason: str) -> str:
    """The one line a refused invocation prints."""
    return (
        f"sweep {name!r} already holds trials of another plan: {reason}; nothing was run. "
        f"Give a new --name to keep both, or --restart to archive the stored state and start "
        f"the sweep again (nothing recorded is deleted)"
    )
