"""The live view of a running sweep, in place of Ray's console output: a table of trials (state,
step, current and best validation loss, elapsed) under an overall progress bar.

On a terminal the table is redrawn in place at most once a second. Elsewhere (a log file, CI)
each validation and each ended trial is one line, and the whole table is printed every minute
and at the end, so a log stays readable and grep-able.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from ray import tune

from nas.sweep.outcomes import ended_by_driver
from nas.trial.run import DEFERRED, SweepContext
from record.schema import Report, Status

REDRAW_S, LOG_TABLE_S, MAX_ROWS = 1.0, 60.0, 20
ENDED = (*(s.value for s in Status), DEFERRED)


@dataclass
class TrialRow:
    label: str
    state: str = "pending"  # pending, running, a Status value, or deferred
    step: int = 0
    loss: float = math.nan
    best: float = math.inf
    started: float = field(default_factory=time.monotonic)
    ended: float | None = None

    def elapsed(self, now: float) -> float:
        return (self.ended or now) - self.started


def label(config: dict, ctx: SweepContext) -> str:
    """A trial's readable name: its spec's label (arm and seed); a search proposal the
    configuration rejects is named by its values."""
    try:
        return ctx.spec_for(config).label
    except ValueError:
        return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in config.items())


def _clock(seconds: float) -> str:
    s = int(seconds)
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def _loss(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "-"


def progress_bar(ended: int, total: int, width: int = 30) -> str:
    filled = round(width * ended / total) if total else 0
    return "[" + "#" * filled + "." * (width - filled) + f"] {ended}/{total} trials"


def render_table(rows: dict[str, TrialRow], total: int, elapsed: float, earlier: int = 0) -> str:
    """The table and the bar as text. Running trials first, then the most recently ended: a
    long sweep shows what is happening now, and how many rows it left out."""
    now = time.monotonic()
    counts = {s: sum(r.state == s for r in rows.values()) for s in ("running", *ENDED)}
    ended = sum(counts[s] for s in ENDED) + earlier
    order = sorted(
        rows.items(), key=lambda kv: (kv[1].state != "running", -(kv[1].ended or kv[1].started))
    )
    width = max([len(r.label) for r in rows.values()] + [5])
    lines = [
        f"{'trial':<{width}}  {'state':<13} {'step':>6} {'val_loss':>9} {'best':>9} {'time':>7}"
    ]
    for _, r in order[:MAX_ROWS]:
        lines.append(
            f"{r.label:<{width}}  {r.state:<13} {r.step:>6} {_loss(r.loss):>9} "
            f"{_loss(r.best):>9} {_clock(r.elapsed(now)):>7}"
        )
    if len(order) > MAX_ROWS:
        lines.append(f"... and {len(order) - MAX_ROWS} more")
    tally = ", ".join(f"{n} {s}" for s, n in {**counts, "settled earlier": earlier}.items() if n)
    lines.append(
        f"{progress_bar(ended, max(total, len(rows)))}  {tally}  elapsed {_clock(elapsed)}"
    )
    return "\n".join(lines)


class LiveView(tune.Callback):
    """Keeps a row per trial from Tune's callbacks and shows it. ``earlier`` counts the planned
    trials an earlier invocation settled (they are not run again)."""

    def __init__(
        self, ctx: SweepContext, total: int, earlier: int = 0, out: TextIO | None = None
    ) -> None:
        self.ctx, self.total, self.earlier = ctx, total, earlier
        self.out = out or sys.stdout
        self.tty = self.out.isatty()
        self.start = time.monotonic()
        self.rows: dict[str, TrialRow] = {}
        self.repeats = 0  # search proposals of a point the record had settled
        self._drawn_lines = 0
        self._last_draw = self._last_table = 0.0

    def _row(self, trial: Any) -> TrialRow:
        if trial.trial_id not in self.rows:
            self.rows[trial.trial_id] = TrialRow(label(trial.config, self.ctx))
        return self.rows[trial.trial_id]

    def _log(self, text: str) -> None:
        if not self.tty:
            print(f"[{_clock(time.monotonic() - self.start):>7}] {text}", file=self.out, flush=True)

    def _end(self, trial: Any, state: str) -> None:
        row = self._row(trial)
        row.state, row.ended = state, time.monotonic()
        reason = (trial.last_result or {}).get(Report.REASON)
        why = f"  ({reason})" if reason else ""
        self._log(f"{state} {row.label}  best {_loss(row.best)}{why}")
        self.draw(force=True)

    def render(self, now: float) -> str:
        return render_table(self.rows, self.total, now - self.start, self.earlier)

    def draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.tty:
            if not force and now - self._last_draw < REDRAW_S:
                return
            text = self.render(now)
            up = f"\x1b[{self._drawn_lines}F\x1b[J" if self._drawn_lines else ""
            print(up + text, file=self.out, flush=True)
            self._drawn_lines, self._last_draw = text.count("\n") + 1, now
        elif now - self._last_table >= LOG_TABLE_S:
            self._last_table = now
            print(self.render(now), file=self.out, flush=True)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self._row(trial)
        row.state = "running"
        self.draw(force=True)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        row = self._row(trial)
        if Report.STATUS in result:  # the trial's last report: its outcome
            row.state = str(result[Report.STATUS])
            if result.get(Report.REPEAT):
                self.repeats += 1
                row.label += " (repeat: from the record)"
            row.step = int(result.get(Report.END_STEP, row.step))
            return
        loss = result.get(Report.VAL_LOSS)
        if loss is None:
            return
        row.state, row.step, row.loss = "running", int(result.get(Report.STEP, 0)), float(loss)
        row.best = min(row.best, row.loss)
        self._log(f"{row.label}  step {row.step}  val_loss {_loss(loss)}  best {_loss(row.best)}")
        self.draw()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        row = self._row(trial)
        said = row.state in ENDED  # the trial reported its own outcome
        self._end(trial, row.state if said else ended_by_driver(self.ctx.deadline).value)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._end(trial, Status.FAILED.value)

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        self.draw()

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        self._last_table = 0.0
        self.draw(force=True)
