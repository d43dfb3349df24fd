"""Two recorded trials side by side (``nas diff``): the configuration keys whose values differ,
the final metrics with their change, and the dilution summaries. Pure functions over
``RecordedRun``s (``reports.load`` reads them), plus the text they print as.

A value one run did not record stays missing, never 0: a metric logged by one version and not
the other (``final/mfu``, a GPU's power) is not a change to zero.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from record.read import RecordedRun
from record.schema import FINAL_METRICS, Metric, Tag
from trainers.identity import unread_fields

RUN_ID = re.compile(r"[0-9a-f]{32}")
FINAL_PREFIX = "final/"
MISSING = "missing"
IDENT_FORMS = "a run id (32 hex digits) or sweep:arm:seed"


@dataclass(frozen=True)
class TrialRef:
    """A trial named by where it sits in a sweep: the experiment name, the ``nas.arm`` tag and
    the seed."""

    sweep: str
    arm: str
    seed: int


def parse_ident(text: str, flag: str) -> str | TrialRef:
    """A run id as given, or the ``TrialRef`` that ``sweep:arm:seed`` names (the arm may hold
    colons: the sweep ends at the first, the seed starts after the last). ValueError naming
    ``flag`` for anything else."""
    if RUN_ID.fullmatch(text):
        return text
    sweep, _, rest = text.partition(":")
    arm, _, seed = rest.rpartition(":")
    if not (sweep and arm and seed.isdigit()):
        raise ValueError(f"{flag} {text!r}: not {IDENT_FORMS} (seed a whole number)")
    return TrialRef(sweep, arm, int(seed))


@dataclass(frozen=True)
class Change:
    """One configuration key whose value differs; None where a run has no such param."""

    key: str
    a: str | None
    b: str | None


@dataclass(frozen=True)
class Compared:
    """One metric in both runs; None where a run did not record it."""

    name: str
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        """B - A; None unless both recorded it."""
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def relative(self) -> float | None:
        """(B - A) / |A|; None where A is 0 (no scale to measure the change by)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a)


@dataclass(frozen=True)
class RunDiff:
    """Run A against run B: what ``nas diff`` prints."""

    a: RecordedRun
    b: RecordedRun
    changes: list[Change]
    finals: list[Compared]
    dilution: list[Compared]


def config_changes(a: Mapping[str, str], b: Mapping[str, str]) -> list[Change]:
    """The params (the flattened configuration) whose values differ, a key only one run has
    among them; keys in sorted order. Values compare as recorded (MLflow keeps text). A model
    field both runs record and either one's configuration does not read (``trainers.identity``:
    Block AttnRes's block count beside a standard run) is no difference between the models
    they built."""
    unread = (_unread(a) | _unread(b)) & set(a) & set(b)
    keys = sorted((set(a) | set(b)) - unread)
    return [Change(k, a.get(k), b.get(k)) for k in keys if a.get(k) != b.get(k)]


def _unread(params: Mapping[str, str]) -> set[str]:
    model = {k.removeprefix("model."): v for k, v in params.items() if k.startswith("model.")}
    return {f"model.{name}" for name in unread_fields(model)}


def compare(a: Mapping[str, float], b: Mapping[str, float], names: list[str]) -> list[Compared]:
    """``names`` in both runs' metrics, skipping those neither recorded."""
    return [Compared(n, a.get(n), b.get(n)) for n in names if n in a or n in b]


def final_names(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    """The ``final/*`` metrics either run recorded: the schema's in its order (loss first),
    then any others by name."""
    recorded = {n for n in (*a, *b) if n.startswith(FINAL_PREFIX)}
    known = [n for n in FINAL_METRICS if n in recorded]
    return known + sorted(recorded - set(known))


def dilution_names(a: Mapping[str, float], b: Mapping[str, float]) -> list[str]:
    """The ``dilution/*`` summaries either run recorded, by name."""
    return sorted({n for n in (*a, *b) if n.startswith(Metric.DILUTION_PREFIX)})


def diff_runs(a: RecordedRun, b: RecordedRun) -> RunDiff:
    return RunDiff(
        a=a,
        b=b,
        changes=config_changes(a.params, b.params),
        finals=compare(a.metrics, b.metrics, final_names(a.metrics, b.metrics)),
        dilution=compare(a.metrics, b.metrics, dilution_names(a.metrics, b.metrics)),
    )


def describe(run: RecordedRun) -> str:
    """Where a trial sits and how it ended: ``sweep:arm:seed (status)`` where recorded."""
    tags = run.tags
    where = ":".join(tags.get(t, "?") for t in (Tag.SWEEP, Tag.ARM, Tag.SEED))
    return f"{where} ({tags.get(Tag.STATUS, 'status not recorded')})"


def render(diff: RunDiff) -> str:
    """The diff as Markdown whose tables are padded into columns, so that it reads the same
    printed to a terminal as written to ``diff.md``."""
    parts = [
        "# nas diff",
        "",
        _table(
            ["", "run id", "trial"],
            [[s, r.run_id, describe(r)] for s, r in (("A", diff.a), ("B", diff.b))],
        ),
        "",
        "## Configuration keys that differ",
        "",
        _changes(diff.changes),
        "",
        "## Final metrics",
        "",
        _compared(diff.finals, "no final/* metrics recorded"),
        "",
        "## Dilution summaries (last profile)",
        "",
        _compared(diff.dilution, "no dilution/* summaries recorded"),
    ]
    return "\n".join(parts) + "\n"


def _changes(changes: list[Change]) -> str:
    if not changes:
        return "none: the two runs share every configuration key and value"
    rows = [[c.key, _text(c.a), _text(c.b)] for c in changes]
    return _table(["key", "A", "B"], rows)


def _compared(rows: list[Compared], empty: str) -> str:
    if not rows:
        return empty
    body = [
        [c.name, _number(c.a), _number(c.b), _number(c.delta, "+"), _percent(c.relative)]
        for c in rows
    ]
    return _table(["metric", "A", "B", "B - A", "relative"], body)


def _text(value: str | None) -> str:
    return MISSING if value is None else value


def _number(value: float | None, sign: str = "") -> str:
    if value is None:
        return MISSING if not sign else "-"
    return f"{value:{sign}.6g}"


def _percent(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "-"
    return f"{value:+.2%}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A pipe table with every column padded to its widest cell."""
    cells = [header, *rows]
    widths = [max(len(_escape(r[i])) for r in cells) for i in range(len(header))]
    lines = [_line([_escape(c) for c in r], widths) for r in cells]
    lines.insert(1, _line(["-" * w for w in widths], widths))
    return "\n".join(lines)


def _line(cells: list[str], widths: list[int]) -> str:
    return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")
