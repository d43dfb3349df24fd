"""The MLflow UI as a researcher sees it: a real ``smoke`` sweep, ``nas ui`` on it, and the pages
rendered by a real headless Chromium (MLflow's UI is a single-page app: what it shows exists
only after its scripts ran).

Skipped, with the command that installs one, where there is no Chromium (failed under
``CI=true``). Screenshots go under ``$NAS_TEST_ARTIFACTS/ui`` when it is set.
"""

from __future__ import annotations

import html
import json
import os
import re
import signal
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from record.schema import PROFILE_FOLDER, ROLE_TRIAL, Metric, Tag
from tests.reports.browser import dump_dom
from tests.ui import START_TIMEOUT_S, free_port, get, start_ui

SWEEP = "smoke"


@dataclass(frozen=True)
class Served:
    base: str
    runs_url: str  # the URL nas ui printed for the sweep
    experiment_id: str
    trials: list[Any]  # the child runs, as MLflow's client reads them


@pytest.fixture(scope="module")
def served(swept: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The session's finished ``smoke`` sweep (``swept``) and ``nas ui`` serving its store."""
    from mlflow.tracking import MlflowClient

    _, uri = swept
    root = tmp_path_factory.mktemp("ui")
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(SWEEP)
    trials = client.search_runs([exp.experiment_id], f"tags.`{Tag.ROLE}` = '{ROLE_TRIAL}'")
    port = free_port()
    ui = start_ui(root, uri, port, root / "ui.log")
    try:
        assert ui.stdout is not None
        ui.stdout.readline()
        name, _, url = ui.stdout.readline().strip().partition(": ")
        assert name == SWEEP
        base = f"http://127.0.0.1:{port}"
        get(f"{base}/health", time.monotonic() + START_TIMEOUT_S)
        yield Served(base, url, exp.experiment_id, trials)
    finally:
        os.kill(ui.pid, signal.SIGTERM)
        ui.wait(timeout=60)


def _page(url: str, chromium: str, shot: str) -> str:
    """The rendered DOM at ``url`` (a screenshot too when artifacts are kept)."""
    root = os.environ.get("NAS_TEST_ARTIFACTS")
    screenshot = Path(root) / "ui" / f"{shot}.png" if root else None
    dom = dump_dom(url, chromium, screenshot)
    if screenshot is not None:
        print(f"screenshot: {screenshot}")
    return html.unescape(dom)


def _texts(dom: str) -> set[str]:
    """The text of every element that holds only text."""
    return {t.strip() for t in re.findall(r">([^<>]+)<", dom)}


def test_runs_table_lists_the_sweep_and_its_trials(served: Served, chromium: str) -> None:
    """The URL ``nas ui`` printed opens the runs table on the Model training side with the
    sweep's view: the parent run and each child run by name (arm and seed), each trial's
    status, its wiring, and the final validation loss column, without a click; the trials are
    grouped by arm, each group's row showing its seeds' mean final validation loss."""
    texts = _texts(_page(served.runs_url, chromium, "runs-table"))
    names = {t.data.tags[Tag.ARM] + " seed " + t.data.tags[Tag.SEED] for t in served.trials}
    assert len(names) == len(served.trials) == 4 and {SWEEP, *names} <= texts, texts
    assert {"final/val_loss", "model.residual", Tag.STATUS, "finished"} <= texts
    shown = [float(t) for t in texts if re.fullmatch(r"\d+\.\d+", t)]
    for arm in {t.data.tags[Tag.ARM] for t in served.trials}:
        assert f"Group: {arm}" in texts, texts
        seeds = [
            t.data.metrics[Metric.FINAL_VAL_LOSS]
            for t in served.trials
            if t.data.tags[Tag.ARM] == arm
        ]
        mean = sum(seeds) / len(seeds)
        assert any(abs(v - mean) < 1e-9 for v in shown), (arm, mean, shown)


def test_trial_page_shows_its_description_and_dilution_figure(
    served: Served, chromium: str
) -> None:
    """A child run's page shows its one-line description (arm, seed, status, final val loss),
    and its artifact view shows the dilution profile as an image: an ``<img>`` of the PNG,
    whose bytes the server hands out are a PNG."""
    trial = served.trials[0]
    run_id, tags = trial.info.run_id, trial.data.tags
    run_page = f"{served.base}/#/experiments/{served.experiment_id}/runs/{run_id}"
    texts = _texts(_page(f"{run_page}?workflowType=machine_learning", chromium, "trial-run"))
    note = f"{tags[Tag.ARM]} seed {tags[Tag.SEED]}: finished, final val loss "
    assert any(t.startswith(note) for t in texts), note
    (png,) = [p for p in _artifacts(served, run_id) if p.endswith(".png")]
    figure = f"{run_page}/artifactPath/{png}?workflowType=machine_learning"
    dom = _page(figure, chromium, "trial-dilution-figure")
    assert re.search(rf'<img alt="{re.escape(png)}" src="blob:', dom), "no <img> of the figure"
    query = urllib.parse.urlencode({"path": png, "run_uuid": run_id})
    body = get(f"{served.base}/get-artifact?{query}", time.monotonic() + 30)
    assert body.startswith(b"\x89PNG")


def _artifacts(served: Served, run_id: str) -> list[str]:
    """The paths of a run's dilution files, as the server lists them."""
    query = urllib.parse.urlencode({"run_id": run_id, "path": PROFILE_FOLDER})
    listing = get(f"{served.base}/api/2.0/mlflow/artifacts/list?{query}", time.monotonic() + 30)
    return [f["path"] for f in json.loads(listing).get("files", [])]
