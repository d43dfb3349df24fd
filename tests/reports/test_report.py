"""``nas report`` on a real sweep: a local Ray ``smoke`` sweep over two seeds recorded in a real
MLflow store (the session's ``swept``, shared with the diff tests), then the report's numbers
checked against the runs themselves, the page checked in headless Chromium, and the variants (one
seed, a running sweep, failures) built from the same record."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest

from record.schema import Status
from reports.ablation import arm_rows
from reports.build import build_report
from reports.load import SweepData as LoadedSweep
from reports.load import load_sweep
from reports.merge import merge_sweeps, separating_keys
from reports.render_md import render_markdown
from reports.sections.results import COLUMNS
from tests.cli import nas_here
from tests.cli import run_nas as _nas
from tests.reports.browser import artifact_dir, check_page


def _final_losses(uri: str) -> dict[str, dict[int, float]]:
    """arm -> seed -> final validation loss, read straight from MLflow (not through reports)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    out: dict[str, dict[int, float]] = {}
    for run in client.search_runs([exp.experiment_id], "tags.`nas.role` = 'trial'"):
        arm, seed = run.data.tags["nas.arm"], int(run.data.tags["nas.seed"])
        out.setdefault(arm, {})[seed] = run.data.metrics["final/val_loss"]
    return out


def _row(markdown: str, arm: str) -> dict[str, str]:
    """The main table's row for ``arm``, keyed by column."""
    for line in markdown.splitlines():
        line = re.sub(r"\\(.)", r"\1", line)  # Markdown escapes (\[ -> [)
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        if cells and cells[0].removesuffix(" (baseline)") == arm and len(cells) == len(COLUMNS):
            return dict(zip(COLUMNS, cells, strict=True))
    raise AssertionError(f"no row for {arm}")


def test_report_numbers_match_the_runs(swept: tuple[Path, str]) -> None:
    root, uri = swept
    proc = _nas(root, "report", "smoke", "--tracking-uri", uri)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = root / "nas-reports" / "smoke"
    markdown = (out / "report.md").read_text()
    losses = _final_losses(uri)
    assert set(losses) == {"standard", "block_attnres"}
    for arm, by_seed in losses.items():
        cells = _row(markdown, arm)
        values = np.array(list(by_seed.values()))
        # mean ± t(0.975, 1) * s / sqrt(2) for two seeds
        half = 12.706204736174707 * values.std(ddof=1) / np.sqrt(2)
        assert cells["final val loss"] == f"{values.mean():.4f} ± {half:.4f}"
        assert cells["seeds"] == "2" and cells["outcomes"] == "all 2 seeds finished"
    base, block = losses["standard"], losses["block_attnres"]
    diff = np.mean([block[s] - base[s] for s in base])
    cells = _row(markdown, "block_attnres")
    assert cells["Δ vs baseline [95% CI]"].startswith(f"{diff:+.4f} [")
    assert cells["test"] == "paired t"
    assert _row(markdown, "standard")["verdict"] == "baseline"
    # the published Table 4 rows sit beside the user's, labelled as published
    assert "AttnRes Block (N = 8)" in markdown and "different scale" in markdown
    # written figures are the ones the Markdown links
    for link in re.findall(r"\]\((figures/[^)]+)\)", markdown):
        assert (out / link).read_bytes().startswith(b"\x89PNG")


def test_report_is_logged_to_the_parent_run(swept: tuple[Path, str]) -> None:
    root, uri = swept
    assert _nas(root, "report", "smoke", "--tracking-uri", uri).returncode == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    (parent,) = client.search_runs([exp.experiment_id], "tags.`nas.role` = 'sweep'")
    names = {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
    assert {"report/report.html", "report/report.md", "report/figures"} <= names


def test_report_page_renders_in_chromium(
    chromium: str, swept: tuple[Path, str], tmp_path: Path
) -> None:
    root, uri = swept
    out = tmp_path / "page"
    proc = _nas(root, "report", "smoke", "--tracking-uri", uri, "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    shot = artifact_dir(tmp_path) / "smoke-report.png"
    check = check_page(out / "report.html", shot, chromium)
    print(f"screenshot: {shot}")
    assert check.title == "Sweep report: smoke"
    assert check.images >= 3 and check.decoded == check.images
    assert check.tables >= 3
    assert 'src="figures/' not in (out / "report.html").read_text()  # inlined: opens anywhere


def test_single_seed_report_says_why_there_are_no_intervals(swept: tuple[Path, str]) -> None:
    data = load_sweep(swept[1], "smoke")
    one = dataclasses.replace(data, trials=data.trials[data.trials["seed"] == 0])
    text, _ = render_markdown(build_report(one))
    assert "single seed" in text and "too few seeds" in text
    assert " ± " not in _row(text, "standard")["final val loss"]


def test_running_sweep_and_failures_are_reported_as_such(swept: tuple[Path, str]) -> None:
    """A running parent is reported as running; a failed trial is counted and listed, and left
    out of its arm's statistics."""
    data = load_sweep(swept[1], "smoke")
    parents = data.parents.assign(run_status="RUNNING")
    trials = data.trials.copy()
    failed = trials.index[(trials["arm"] == "standard") & (trials["seed"] == 1)]
    trials.loc[failed, ["status", "run_status"]] = [Status.FAILED.value, "FAILED"]
    text, _ = render_markdown(
        build_report(dataclasses.replace(data, parents=parents, trials=trials))
    )
    assert "still running" in text
    assert "3 finished" in text and "1 failed" in text
    assert "standard seed 1 | failed |" in text
    # the failed run is not in the statistics: standard now has one seed
    row = _row(text, "standard")
    assert row["seeds"] == "1" and row["outcomes"] == "1 of 2 seeds failed"


def test_real_sweep_reads_as_finished_trials(swept: tuple[Path, str]) -> None:
    """Every trial of a real sweep that ran to the end reads as finished, with a key, an arm
    and a seed, whatever version of the record the sweep wrote."""
    t = load_sweep(swept[1], "smoke").trials
    assert set(t["status"]) == {Status.FINISHED} and set(t["run_status"]) == {"FINISHED"}
    assert t["key"].str.len().min() > 0 and set(t["seed"]) == {0, 1}


@pytest.mark.parametrize(
    "args,match",
    [
        (["report", "nonesuch"], "no sweep named 'nonesuch'"),
        (["report", "smoke", "--format", "pdf"], "--format 'pdf'"),
        (["report", "smoke", "--baseline", "mhc"], "--baseline 'mhc': no such arm"),
        (["report", "smoke", "--out", "a-file/report"], "--out"),
    ],
)
def test_bad_report_input_exits_2_with_one_line(
    swept: tuple[Path, str], tmp_path: Path, args: list[str], match: str
) -> None:
    """In this process (``tests.cli.nas_here``: ``nas.cli.main``, what ``nas`` runs; the store
    missing altogether is refused by the command in a subprocess, below)."""
    (tmp_path / "a-file").write_text("not a folder")
    proc = nas_here(tmp_path, *args, "--tracking-uri", swept[1])
    assert proc.returncode == 2, proc.stderr
    assert match in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]  # nothing half-written


def test_missing_store_is_refused_not_created(tmp_path: Path) -> None:
    proc = _nas(tmp_path, "report", "smoke")
    assert proc.returncode == 2 and "no MLflow store there" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_report_without_a_sweep_lists_them(swept: tuple[Path, str]) -> None:
    proc = _nas(swept[0], "report", "--tracking-uri", swept[1])
    assert proc.returncode == 0 and re.search(r"^smoke\s+4 trial runs$", proc.stdout, re.M)


def _again(data: LoadedSweep, name: str, **columns: object) -> LoadedSweep:
    """``data`` as if recorded again under ``name``: new run ids, columns replaced."""
    trials = data.trials.assign(run_id=data.trials["run_id"] + name, **columns)
    curves = data.curves.assign(run_id=data.curves["run_id"] + name)
    profiles = data.profiles.assign(run_id=data.profiles["run_id"] + name)
    return dataclasses.replace(data, name=name, trials=trials, curves=curves, profiles=profiles)


def test_a_sweep_reported_with_its_extension_gives_the_extended_table(
    swept: tuple[Path, str], tmp_path: Path
) -> None:
    """The sweep as it was before its second seed (a copy of the store without seed 1's runs)
    reported together with the extended sweep: the same arm statistics as the extended sweep
    alone, each trial once, and the CLI's table names both sweeps for every arm."""
    import shutil

    from mlflow.tracking import MlflowClient

    root, uri = swept
    early = f"sqlite:///{tmp_path / 'early.db'}"
    shutil.copy(root / "mlflow.db", tmp_path / "early.db")
    client = MlflowClient(tracking_uri=early)
    exp = client.get_experiment_by_name("smoke")
    for run in client.search_runs([exp.experiment_id], "tags.`nas.seed` = '1'"):
        client.delete_run(run.info.run_id)
    before, after = load_sweep(early, "smoke"), load_sweep(uri, "smoke")
    assert len(before.trials) == 2 and len(after.trials) == 4
    merged = merge_sweeps([before, after])
    assert len(merged.trials) == 4 and merged.trials["run_id"].is_unique
    assert arm_rows(merged.view) == arm_rows(after.view)
    # recorded twice under different run ids (a copied sweep): still each configuration and
    # seed once
    assert arm_rows(merge_sweeps([after, _again(after, "copy")]).view) == arm_rows(after.view)

    out = tmp_path / "both"
    proc = _nas(root, "report", f"smoke@{early}", f"smoke@{uri}", "--format", "md",
                "--out", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    markdown = (out / "report.md").read_text()
    for arm in ("standard", "block_attnres"):
        # the main table's row: one more column than a one-sweep report's
        cells = next(
            [c.strip().strip("*") for c in x.strip("|").split("|")]
            for x in markdown.splitlines()
            if x.lstrip("| *").startswith(arm) and x.count(" | ") == len(COLUMNS)
        )
        assert cells[1] == f"smoke@{early}, smoke@{uri}", cells


def test_sweeps_that_ran_different_lengths_are_never_paired(swept: tuple[Path, str]) -> None:
    """A second sweep of the same arms with another train.max_steps: four arms, each compared
    only with the baseline of its own length, and the report says what kept them apart."""
    data = load_sweep(swept[1], "smoke")
    longer = _again(data, "longer", **{"train.max_steps": 999, "key": data.trials["key"] + "L"})
    merged = merge_sweeps([data, longer])
    rows = arm_rows(merged.view)
    assert len(rows) == 4
    steps = {a: str(s) for a, s in merged.view.labelled[["arm", "train.max_steps"]].values}
    for row in rows:
        assert row.baseline is not None and steps[row.baseline] == steps[row.arm], row
    assert separating_keys(merged.trials) == {
        "train.max_steps": ["longer: 999", f"smoke: {data.trials['train.max_steps'].iloc[0]}"]
    }
    text, _ = render_markdown(build_report(merged))
    assert "no seed pairing or comparison crosses them" in text


def test_arms_are_matched_by_configuration_not_by_name(swept: tuple[Path, str]) -> None:
    """The same configurations recorded in a second sweep under other arm names, with other
    seeds: two arms of four seeds each, as if one sweep had run them all."""
    data = load_sweep(swept[1], "smoke")
    renamed = _again(
        data,
        "renamed",
        arm="x-" + data.trials["arm"],
        seed=data.trials["seed"] + 10,
        key=data.trials["key"] + "R",
    )
    rows = arm_rows(merge_sweeps([data, renamed]).view)
    assert len(rows) == 2 and all(len(r.seeds) == 4 for r in rows), rows
    assert {r.seeds for r in rows} == {(0, 1, 10, 11)}


def test_tracking_uris_must_pair_with_the_sweeps(swept: tuple[Path, str]) -> None:
    root, uri = swept
    proc = _nas(root, "report", "a", "b", "c", "--tracking-uri", uri, "--tracking-uri", uri)
    assert proc.returncode == 2 and "--tracking-uri given 2 times for 3 sweeps" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
