"""Every process's command line, watched while a test runs something: a background thread reads
``/proc/*/cmdline`` of all processes over and over, so that a worker that lives half a second
(Ray's ``setup_worker.py`` before it execs the worker) is seen too. Any user on the machine can
read these (``ps``), so a secret must never be in one."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from types import TracebackType

INTERVAL_S = 0.05  # Ray's setup_worker.py lives about a second: caught many times over


def command_lines() -> dict[int, bytes]:
    """Every process's command line now, its arguments NUL-separated; a process that exits
    while being read is left out."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                found[int(name)] = f.read()
        except OSError:  # exited meanwhile
            continue
    return found


class SecretWatch:
    """While inside, every process whose command line holds ``secret``: ``holding``, its
    arguments by process id (as first seen with it); ``polls`` counts the rounds over all
    processes, to show the watch ran."""

    def __init__(self, secret: str) -> None:
        self.secret = secret.encode()
        self.holding: dict[int, list[bytes]] = {}
        self.polls = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="secret-watch", daemon=True)

    def __enter__(self) -> SecretWatch:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        err: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def besides(self, typed: Sequence[str]) -> list[str]:
        """The command lines that held the secret, the secret shown as ***, other than
        ``typed``: the command the test itself started, password included, as a user may type
        it (what that command starts is what is checked)."""
        own = [arg.encode() for arg in typed]
        return [
            b" ".join(args).replace(self.secret, b"***").decode(errors="replace")
            for args in self.holding.values()
            if args != own
        ]

    def _watch(self) -> None:
        while True:
            self._poll()
            if self._stop.wait(INTERVAL_S):
                return

    def _poll(self) -> None:
        for pid, cmdline in command_lines().items():
            if self.secret in cmdline and pid not in self.holding:
                self.holding[pid] = cmdline.rstrip(b"\0").split(b"\0")
        self.polls += 1
