"""A run as any version of the harness recorded it, brought to the current shape in one step at
load: ``upgrade`` applies the chain of small pure steps from the run's record version (the
``nas.schema_version`` tag; none: version 1) to ``RECORD_VERSION``, so that every reader (the
report's loader, the read primitives, the sweep's resume) sees one shape and no reader branches
on a version.

Record versions:

- **1** (no version tag: written before the tag existed). A trial may lack ``nas.status``: an
  infeasible one carries the legacy ``nas.infeasible`` tag, holding its reason, instead (an
  empty one said nothing); and ``nas.seed``: its ``train.seed`` param is the seed it ran.
- **2**: every settled trial carries its status, seed and reason. A trial that has not ended
  yet carries no status, whatever its version (the MLflow run status says how it stands: that
  is the reader's rule for a current record, not an old shape).

What no step can supply stays missing, as a current reader reads a current record without it:
a measurement the run never made (its cost, its decode speed, its FLOP count, its routing
statistics), and the value of a configuration field newer than the run (``reports.normalize``
reads it as the field's default: the report's tables keep the columns the run recorded).

A step takes a current-or-older run and returns the next version's, touching nothing else;
``upgrade`` of a current run returns it unchanged, and ``upgrade`` is idempotent. A version
newer than this code knows is read as it is (a newer harness may add what this one ignores).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from record.schema import RECORD_VERSION, ROLE_TRIAL, Status, Tag

FIRST_VERSION = 1  # a run without Tag.SCHEMA_VERSION
# Version 1's tag on an infeasible trial (before nas.status): the reason its point was refused.
LEGACY_INFEASIBLE = "nas.infeasible"
# Version 1's place for a trial's seed where it carries no nas.seed tag: its configuration's.
SEED_PARAM = "train.seed"


@dataclass(frozen=True)
class RunRecord:
    """What a run recorded: params (MLflow's strings), tags and latest metrics."""

    params: Mapping[str, str] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)


def record_version(tags: Mapping[str, str]) -> int:
    """The schema version a run was recorded with (``FIRST_VERSION`` where it carries none);
    ValueError, one line naming the tag, for a tag that is no version number."""
    text = tags.get(Tag.SCHEMA_VERSION)
    if text is None:
        return FIRST_VERSION
    try:
        version = int(text)
    except ValueError:
        version = 0
    if version < FIRST_VERSION:
        raise ValueError(f"{Tag.SCHEMA_VERSION} {text!r}: not a version number")
    return version


def _v1_to_v2(run: RunRecord) -> RunRecord:
    """A version-1 trial's status, reason and seed where version 2 keeps them: the legacy
    infeasible tag becomes ``nas.status`` infeasible with its text as ``nas.reason`` (where the
    trial recorded no status of its own; an empty one said nothing), and the ``train.seed``
    param of a trial run becomes its ``nas.seed`` tag where it has none. The legacy tag is gone
    either way: version 2 writes none, and a status recorded beside it wins, as it always
    did."""
    tags = dict(run.tags)
    legacy = tags.pop(LEGACY_INFEASIBLE, None)
    if legacy and Tag.STATUS not in tags:
        tags[Tag.STATUS] = Status.INFEASIBLE.value
        tags[Tag.REASON] = legacy
    is_trial = tags.get(Tag.ROLE) == ROLE_TRIAL  # a sweep's parent run carries no seed
    if is_trial and Tag.SEED not in tags and SEED_PARAM in run.params:
        tags[Tag.SEED] = run.params[SEED_PARAM]
    return replace(run, tags=tags)


# version N -> the step from N to N + 1; one entry per version below RECORD_VERSION
STEPS: dict[int, Callable[[RunRecord], RunRecord]] = {1: _v1_to_v2}


def upgrade(run: RunRecord) -> RunRecord:
    """``run`` in the current shape (``RECORD_VERSION``), tagged with it; a current or newer
    run unchanged. ValueError (one line) for a version tag that is no number."""
    version = record_version(run.tags)
    if version >= RECORD_VERSION:
        return run
    while version < RECORD_VERSION:
        run = STEPS[version](run)
        version += 1
    return replace(run, tags={**run.tags, Tag.SCHEMA_VERSION: str(RECORD_VERSION)})
