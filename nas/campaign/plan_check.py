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
from nas.store.tracking import RecordedTrial, StoredSweep
from trainers.config import flatten_read

MAX_SHOWN = 4


def differences(old: Mapping[str, str], new: Mapping[str, Any]) -> list[str]:
    """``key: old -> new`` for every key both sides hold with another value (the record holds
    strings, so values compare as MLflow wrote them)."""
    return [
        f"{k}: {old[k]} -> {new[k]}"
        for k in sorted(old.keys() & new.keys())
        if old[k] != str(new[k])
    ]


def _trial_differences(recorded: RecordedTrial, spec: TrialSpec) -> list[str]:
    """How a recorded trial's configuration differs from the planned one, both normalized: a
    model field the planned configuration does not read is no difference (a trial recorded
    before such fields took their default holds the value its sweep gave it, never read). A
    recorded configuration that reads it differs in what decides that, which is compared."""
    return differences(recorded.params, flatten_read(spec.config))


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
            merged = _merged(stored, spec)
            if merged:
                return merged
            continue
        changed = _trial_differences(recorded, spec)
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


def _merged(stored: StoredSweep, spec: TrialSpec) -> str:
    """Why the record's trials of the cells one planned trial now stands for (cells that
    differed only in a field their model does not read) block it, or "": running it would
    train their model once more under a new key and arm."""
    recorded = [stored.trials[k].arm for k in spec.aliases if k in stored.trials]
    if not recorded:
        return ""
    return (
        f"the recorded trials {', '.join(map(repr, recorded))} of seed {spec.seed} build one "
        f"model, which this version runs once as {spec.label!r} (a field a configuration does "
        f"not read takes its default)"
    )


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
