"""A sweep's progress as its MLflow record holds it (``nas status``): how many trials ended in
each status, how many run and how many the plan has not started; the rate trials end at and the
time the rest would take at it, an estimate; and when the record was last written, so that a
stalled sweep shows. Read from the record only, never from Ray: the record is what is left to
read once the driver's terminal is gone, and reading it writes nothing.

``read_progress`` reads the record (the latest invocation's parent run, its plan and its
trials); ``progress`` and ``render`` are pure functions of what it read.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nas.sweep.summary import NOT_STARTED, UNSETTLED
from record.read import artifact_text, live_sweep, upgraded
from record.schema import LR_STAGE_FILE, PLANS_FOLDER, SEEDS_FILE, SETTLED, Status, Tag
from trainers.measure.time_plan import duration

RUNNING = "running"  # a trial run with no outcome yet (or one a crash left open)
# What the trials line always shows, whatever the counts; the other statuses show when present.
ALWAYS = (Status.FINISHED.value, RUNNING, Status.FAILED.value)
ORDER = (*ALWAYS, *(s.value for s in Status if s.value not in ALWAYS))
# Trials with an outcome of their own: what the rate is measured over. A killed trial was
# interrupted, and resumes: its time so far is not a trial's time.
ENDED = frozenset(ORDER) - {RUNNING, Status.KILLED.value}
SETTLED_STATES = frozenset(s.value for s in SETTLED)
# What is left to run (the summary's unsettled outcomes), in the order the lines name them
LEFT = tuple(s for s in (*ORDER, NOT_STARTED) if s in UNSETTLED)
STAGES = {LR_STAGE_FILE: "learning-rate stage", SEEDS_FILE: "--seeds auto pilot"}


@dataclass(frozen=True)
class TrialState:
    """One trial run as the progress counts it; times in seconds since the epoch."""

    key: str  # its trial key
    state: str  # a Status value, or RUNNING
    start_s: float
    end_s: float | None  # None while it runs
    last_s: float  # the latest write: its start, its end or its latest metric


@dataclass(frozen=True)
class Planned:
    """What the record says the sweep plans (its latest invocation's plan file)."""

    keys: frozenset[str] | None = None  # a grid's trial keys; None: a search, or no plan
    requested: int | None = None  # a search's trials in all
    # Trials whose settling plans more (a tuned grid's stage, a --seeds auto pilot), and its
    # name: until they are settled the record does not say how many trials the sweep has.
    stage: frozenset[str] = frozenset()
    stage_name: str = ""


@dataclass(frozen=True)
class Progress:
    """How far a sweep has got: its trials by state, what is left, and what the rate and the
    latest write are measured from."""

    # state -> trials: ORDER's (ALWAYS's even at 0), a status this version does not know (a
    # newer harness's), then NOT_STARTED where the plan says
    counts: Mapping[str, int]
    planned: int | None  # trials planned so far; None: the record does not say
    outside: int  # recorded trials the latest plan does not name (an earlier plan's cells)
    more: str  # the stage that plans more trials once settled; "" when the plan is whole
    ended: int  # trials the rate is measured over
    busy_s: float  # the time they ran, overlapping trials counted once
    last_s: float | None  # the record's latest write

    @property
    def rate_per_s(self) -> float | None:
        """Trials ended per second of the sweep's trial time; None before one ended."""
        return self.ended / self.busy_s if self.ended and self.busy_s > 0 else None

    @property
    def to_run(self) -> int | None:
        """Trials left to run: running, killed (they resume) and not started."""
        if NOT_STARTED not in self.counts:
            return None
        return sum(self.counts.get(s, 0) for s in LEFT)

    @property
    def left_s(self) -> float | None:
        """The time ``to_run`` trials take at the measured rate, a running one counted whole."""
        rate, n = self.rate_per_s, self.to_run
        return None if rate is None or n is None else n / rate


def busy_seconds(spans: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` spans: time in which at least one ran. Trials
    running side by side count once, so the rate it gives includes the sweep's concurrency, and
    a pause between two invocations does not count."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def progress(
    trials: Sequence[TrialState], planned: Planned, parent_s: float | None = None
) -> Progress:
    """The counts, rate and latest write of ``trials`` against ``planned``; ``parent_s``, the
    parent run's latest write (the invocation opened or closed, before any trial wrote)."""
    found = Counter(t.state for t in trials)
    counts = {s: found[s] for s in ORDER if s in ALWAYS or found[s]}
    counts |= {s: found[s] for s in sorted(found) if s not in ORDER}
    keys = {t.key for t in trials}
    total, outside = None, 0
    if planned.requested is not None:
        total = planned.requested
        counts[NOT_STARTED] = max(0, total - len(trials))
    elif planned.keys is not None:
        total, outside = len(planned.keys), len(keys - planned.keys)
        counts[NOT_STARTED] = len(planned.keys - keys)
    settled = {t.key for t in trials if t.state in SETTLED_STATES}
    ended = [t for t in trials if t.state in ENDED and t.end_s is not None]
    writes = [t.last_s for t in trials] + ([] if parent_s is None else [parent_s])
    return Progress(
        counts=counts,
        planned=total,
        outside=outside,
        more=planned.stage_name if planned.stage - settled else "",
        ended=len(ended),
        busy_s=busy_seconds((t.start_s, t.end_s) for t in ended if t.end_s is not None),
        last_s=max(writes, default=None),
    )


def render(name: str, store: str, invocation: str, p: Progress, now: float) -> list[str]:
    """The status as plain lines, always in this order: the sweep, its trials, the rate, the
    time left, the latest write. ``store`` comes redacted; ``invocation`` is the latest parent
    run's MLflow status; ``now`` in seconds since the epoch."""
    state = "is running" if invocation == "running" else f"ended ({invocation})"
    return [
        f"sweep {name} in {store}: its latest invocation {state}",
        _trials_line(p),
        _rate_line(p),
        _left_line(p),
        _last_line(p.last_s, now),
    ]


def _trials_line(p: Progress) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in p.counts.items())
    if p.planned is None:
        return f"trials: {counts}; not started: unknown (the record holds no plan to count from)"
    of = f"of {p.planned} planned"
    if p.more:
        of += f" so far; its {p.more} plans more once settled, how many the record does not say"
    extra = f"; {p.outside} more recorded outside the latest plan" if p.outside else ""
    return f"trials: {counts} ({of}){extra}"


def _rate_line(p: Progress) -> str:
    rate = p.rate_per_s
    if rate is None:
        return "rate: unknown (no trial has ended yet)"
    per_h = rate * 3600
    shown = f"{per_h:,.0f}" if per_h >= 100 else f"{per_h:.3g}"
    return (
        f"rate: {shown} trials/h ({p.ended} ended trials in {duration(p.busy_s)} of trial time, "
        "trials side by side counted once)"
    )


def _left_line(p: Progress) -> str:
    n, left = p.to_run, p.left_s
    if n is None:
        return "time left: unknown (the record does not say how many trials are planned)"
    if n == 0:
        return "time left: none (every planned trial has an outcome)"
    if left is None:
        return f"time left: unknown for {n} trials (no trial has ended yet)"
    which = ", ".join(f"{p.counts[s]} {s}" for s in LEFT if p.counts.get(s))
    bound = "at least " if p.more else ""
    return (
        f"time left (estimate): {bound}{duration(left)} for {n} trials ({which}) at that rate, "
        "each running trial counted whole"
    )


def _last_line(last_s: float | None, now: float) -> str:
    if last_s is None:
        return "last written: never"
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(last_s))
    return f"last written: {when} ({duration(max(0.0, now - last_s))} ago)"


# --- reading the record --------------------------------------------------------------------


@dataclass(frozen=True)
class SweepProgress:
    """What ``read_progress`` found: the latest invocation's parent run status (lower case),
    its progress, and the trials of other live parent runs of the sweep (another
    ``--storage-path``: another Tune state), which it does not count."""

    invocation: str
    progress: Progress
    elsewhere: int


def read_progress(uri: str, name: str) -> SweepProgress:
    """Sweep ``name``'s progress from the store at ``uri``, read only; ValueError, one line,
    for a store that cannot be opened or holds no such sweep."""
    client, _, parents, trials = live_sweep(uri, name)
    if not parents:
        raise ValueError(f"sweep {name!r}: every parent run was archived by --restart")
    parent = max(parents, key=lambda r: r.info.start_time)
    mine = [r for r in trials if r.data.tags.get(Tag.PARENT) == parent.info.run_id]
    states = [trial_state(r) for r in mine]
    planned = _planned(client, parent.info.run_id)
    return SweepProgress(
        invocation=str(parent.info.status).lower(),
        progress=progress(states, planned, _last_write(parent)),
        elsewhere=len(trials) - len(mine),
    )


def trial_state(run: Any) -> TrialState:
    """An MLflow trial run as the progress counts it (its record brought to the current
    shape)."""
    tags = upgraded(run).data.tags
    status, end = tags.get(Tag.STATUS), run.info.end_time
    return TrialState(
        key=tags.get(Tag.TRIAL_KEY, run.info.run_id),
        state=status or RUNNING,
        start_s=run.info.start_time / 1000,
        end_s=None if end is None or not status else end / 1000,
        last_s=_last_write(run),
    )


def _last_write(run: Any) -> float:
    """A run's latest write the record dates: its start, its end, its latest metrics' times.
    (Tags carry no time.)"""
    # ``Run.data.metrics`` holds the latest values only; their protobuf form has their times
    stamps = [run.info.start_time, run.info.end_time or 0]
    stamps += [m.timestamp for m in run.data.to_proto().metrics]
    return max(stamps) / 1000


def _planned(client: Any, run_id: str) -> Planned:
    """What the parent run's latest plan file says, with the stage that plans more trials once
    settled; an empty ``Planned`` for a sweep recorded before plans were kept."""
    files = [f.path for f in client.list_artifacts(run_id, PLANS_FOLDER) if not f.is_dir]
    plan = _json(client, run_id, max(files)) if files else None
    if plan is None:
        return Planned()
    space = plan.get("space", {})
    if space.get("kind") == "search":
        trials = space.get("trials")
        return Planned(requested=trials) if isinstance(trials, int) else Planned()
    keys = frozenset(str(k) for k in plan.get("keys", []))
    for file, what in STAGES.items():
        stage = _stage(_json(client, run_id, file), file, keys)
        if stage:
            return Planned(keys, stage=stage, stage_name=what)
    return Planned(keys)


def _stage(state: Mapping[str, Any] | None, file: str, keys: frozenset[str]) -> frozenset[str]:
    """The trials whose settling plans more, from the campaign's state file: a tuned grid's
    stage trials (``lr_stage.json``, each arm's keys by value); a --seeds auto pilot's, the
    whole plan until the file holds the seeds it chose."""
    if not state:
        return frozenset()
    if file == SEEDS_FILE:
        return frozenset() if "seeds" in state else keys
    arms = state.get("arms", {}).values()
    return frozenset(k for arm in arms for same in arm.get("keys", {}).values() for k in same)


def _json(client: Any, run_id: str, path: str) -> dict[str, Any] | None:
    """A JSON object the run keeps as an artifact; None where it has none; ValueError, one
    line, for one that is no JSON object."""
    text = artifact_text(client, run_id, path)
    if text is None:
        return None
    try:
        found = json.loads(text)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise ValueError(f"run {run_id}: its {path} is not a JSON object")
    return found
