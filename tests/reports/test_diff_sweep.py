"""``nas diff`` on the session's real ``smoke`` sweep (``swept``: two arms, seeds 0 and 1): the
differing keys are exactly the ones the arms or seeds set, the deltas are the recorded values'
differences, ``sweep:arm:seed`` names the same run as its id, and ``--out`` writes a figure
that opens."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from record.schema import Metric
from tests.cli import run_nas as _nas


def _trials(uri: str) -> dict[tuple[str, int], object]:
    """(arm, seed) -> the trial run, read straight from MLflow (not through reports)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    runs = client.search_runs([exp.experiment_id], "tags.`nas.role` = 'trial'")
    return {(r.data.tags["nas.arm"], int(r.data.tags["nas.seed"])): r for r in runs}


def _section(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the table under ``## title``, keyed by first cell (header and rule left
    out)."""
    body = text.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in body.splitlines() if line.startswith("|")]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {r[0]: r[1:] for r in rows}


def _diff(root: Path, uri: str, *args: str) -> str:
    proc = _nas(root, "diff", *args, "--tracking-uri", uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_two_arms_differ_in_the_residual_only(swept: tuple[Path, str], tmp_path: Path) -> None:
    """The smoke arms set only ``model.residual``: it is listed and no equal key is; each final
    metric's B - A is the recorded difference; ``--out`` writes the same text and a PNG."""
    root, uri = swept
    runs = _trials(uri)
    a, b = runs[("standard", 0)], runs[("block_attnres", 0)]
    out = tmp_path / "out"
    text = _diff(root, uri, a.info.run_id, b.info.run_id, "--out", str(out))
    changes = _section(text, "Configuration keys that differ")
    assert changes == {"model.residual": ["standard", "block_attnres"]}
    finals = _section(text, "Final metrics")
    recorded = {k for k in a.data.metrics if k.startswith("final/")}
    assert set(finals) == recorded and Metric.FINAL_VAL_LOSS in finals
    for name, (va, vb, delta, _) in finals.items():
        want = b.data.metrics[name] - a.data.metrics[name]
        assert float(delta) == pytest.approx(want, rel=1e-5, abs=1e-12)
        assert float(va) == pytest.approx(a.data.metrics[name], rel=1e-5)
        assert float(vb) == pytest.approx(b.data.metrics[name], rel=1e-5)
    # AttnRes-only summaries are missing for standard, not 0
    assert _section(text, "Dilution summaries (last profile)")["dilution/depth_entropy"][0] == (
        "missing"
    )
    assert (out / "diff.md").read_text() in text
    from PIL import Image

    with Image.open(out / "profiles.png") as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > 500


def test_seeds_differ_in_the_seed_only(swept: tuple[Path, str]) -> None:
    root, uri = swept
    text = _diff(root, uri, "smoke:standard:0", "smoke:standard:1")
    assert _section(text, "Configuration keys that differ") == {"train.seed": ["0", "1"]}


def test_sweep_arm_seed_is_the_run_itself(swept: tuple[Path, str]) -> None:
    """A run against its own ``sweep:arm:seed``: one run id twice, no differing keys, every
    delta zero."""
    root, uri = swept
    run_id = _trials(uri)[("block_attnres", 1)].info.run_id
    text = _diff(root, uri, run_id, "smoke:block_attnres:1")
    assert re.findall(r"^\| ([AB]) \| (\w{32}) ", text, re.M) == [("A", run_id), ("B", run_id)]
    assert "none: the two runs share every configuration key and value" in text
    for title in ("Final metrics", "Dilution summaries (last profile)"):
        rows = _section(text, title)
        assert rows and all(r[2] == "+0" for r in rows.values()), rows
