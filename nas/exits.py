"""The exit statuses of ``nas sweep``, with what each means to whoever runs it: one table, which
the sweep returns from and ``nas sweep --help`` prints. Light: the parser imports it."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    DONE = 0
    TRIAL_FAILED = 1
    USAGE = 2  # bad input: one line, nothing written
    STORE_DOWN = 69  # EX_UNAVAILABLE: the tracking store stopped answering the driver
    TIME_BUDGET = 75  # EX_TEMPFAIL: --time-budget ran out, the same command continues
    INTERRUPTED = 130  # Ctrl-C: the same command resumes
    TERMINATED = 143  # SIGTERM (a cluster scheduler's preemption): the same command resumes


MEANING: dict[Exit, str] = {
    Exit.DONE: "done",
    Exit.TRIAL_FAILED: "a trial failed",
    Exit.USAGE: "bad input",
    Exit.STORE_DOWN: "the tracking store stopped answering (the same command resumes)",
    Exit.TIME_BUDGET: "time budget spent",
    Exit.INTERRUPTED: "interrupted",
    Exit.TERMINATED: "terminated (SIGTERM)",
}


def exit_statuses() -> str:
    """``0 done, 1 a trial failed, ...``: the help's list."""
    return ", ".join(f"{int(code)} {MEANING[code]}" for code in Exit)
