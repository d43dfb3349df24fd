"""Writer processes for the store-race test: each writes the same rows of one run as the others,
in lock-step rounds, through the harness's own client (``nas.store.tracking._client``), as a trial's
retried attempt, its outbox and the driver do when a tracking server comes back."""

from __future__ import annotations

import os
import time
import traceback
from pathlib import Path
from typing import Any

ROUNDS = 40
JOURNAL_STEPS = 60


def journal_entries() -> list[tuple[str, float, int, int]]:
    """What every writer replays: one journal, fixed values and times (as a real journal)."""
    return [("train/loss", 1.0 / (s + 1), 1_700_000_000_000 + s, s) for s in range(JOURNAL_STEPS)]


def write(
    uri: str, run_id: str, journal: str, wid: int, barrier: Any, progress: Any, errors: Any
) -> None:
    """``ROUNDS`` rounds, each started with every other writer (``barrier``): replay the
    journal, set a tag key none has set yet, log a metric and a tag of its own."""
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
    from mlflow.entities import Metric, RunTag

    from nas.store.tracking import _client, fill_in

    client = _client(uri)
    try:
        for r in range(ROUNDS):
            barrier.wait(timeout=600)
            fill_in(client, run_id, Path(journal))
            client.set_tag(run_id, f"round.{r}", "done")
            mine = [Metric(f"writer.{wid}", float(r), int(time.time() * 1000), r)]
            client.log_batch(run_id, metrics=mine, tags=[RunTag("nas.status", "running")])
            with progress.get_lock():
                progress.value += 1
    except Exception as err:
        errors.put(f"writer {wid}: {type(err).__name__}: {str(err).splitlines()[0][:300]}")
        errors.put(traceback.format_exc()[-1500:])
        barrier.abort()  # the others stop waiting for this one
