"""What the MLflow UI shows of a sweep, as values ``nas.store.tracking`` writes and ``nas ui`` prints:
the experiment's tags (its kind, the saved view of its runs table), a trial's run name and
one-line description, and the URL of a sweep's runs table. Nothing here talks to MLflow.

The names and the view's format are those MLflow 3's UI reads (its routes and its shared-view
state, in ``mlflow/server/js/build``): ``#/experiments/<id>/runs`` is the runs table,
``workflowType=machine_learning`` its "Model training" side, and ``viewStateShareKey=<key>``
applies the view kept in the experiment tag ``mlflow.sharedViewState.<key>``.
"""

from __future__ import annotations

import json
import math

from nas.spec import trial_label
from record.schema import EXPERIMENT_KIND, ExperimentTag, Metric, Tag

VIEW_KEY = "nas-runs"

# The runs table's columns beside the run name (the trial's arm and seed), its start and its
# duration, which the table always shows: the trial's loss, its wiring, its depth and how it
# ended. MLflow names a column by its kind and key, the key in backquotes.
VIEW_COLUMNS = (
    f"metrics.`{Metric.FINAL_VAL_LOSS}`",
    "params.`model.residual`",
    "params.`model.n_layers`",
    f"tags.`{Tag.STATUS}`",
)
# The trials grouped by arm (its grid cell or proposal, every setting but the seed): a group's
# row shows its seeds' mean final validation loss, its trials listed under it, so the noise
# between seeds is in sight beside the mean. MLflow's table aggregates a group by one function
# (min, average or max) at a time; the average is the one a comparison reads.
GROUP_BY = {
    "aggregateFunction": "average",
    "groupByKeys": [{"mode": "tag", "groupByData": Tag.ARM}],
}


def experiment_tags() -> dict[str, str]:
    """The tags a sweep's experiment carries: opened on the runs table, with the sweep's view
    (its columns, best first, trials grouped by arm)."""
    view = {
        "selectedColumns": list(VIEW_COLUMNS),
        # Best first. Ordered by anything but the start time, the table lists child runs as
        # rows of their own instead of folded under their collapsed parent.
        "orderByKey": f"metrics.`{Metric.FINAL_VAL_LOSS}`",
        "orderByAsc": True,
        "runsHiddenMode": "SHOW_ALL",  # the charts show every trial, not the first ten
        "groupBy": GROUP_BY,
    }
    return {
        ExperimentTag.KIND: EXPERIMENT_KIND,
        ExperimentTag.SHARED_VIEW_PREFIX + VIEW_KEY: json.dumps(view),
    }


def runs_url(base: str, experiment_id: str, tags: dict[str, str]) -> str:
    """The runs table of an experiment, in the sweep's view when the experiment has it.

    MLflow 3.17's UI takes an experiment's kind from the "GenAI / Model training" switch (kept
    in the browser, GenAI until the user flips it), not from ``mlflow.experimentKind``; the
    URL's ``workflowType`` sets that switch, so the page opens on the runs, not on traces."""
    url = f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?workflowType=machine_learning"
    if ExperimentTag.SHARED_VIEW_PREFIX + VIEW_KEY in tags:
        url += f"&viewStateShareKey={VIEW_KEY}"
    return url


def run_name(arm: str, seed: str) -> str:
    """A trial's run name: its label, as the live view and the summary write it."""
    return trial_label(arm, int(seed)) if seed.isdigit() else arm


def trial_note(arm: str, seed: str, status: str, val_loss: float | None = None) -> str:
    """A trial's description, one line: what it was, how it ended, its final validation loss."""
    note = f"{run_name(arm, seed)}: {status}"
    if val_loss is not None and math.isfinite(val_loss):
        note += f", final val loss {val_loss:.4f}"
    return note
