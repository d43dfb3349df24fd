"""``nas report --format tex,md,csv`` on the report tests' real ``smoke`` sweep: the LaTeX
table says what the Markdown table says, every included figure is a PDF that exists, the LaTeX
compiles where pdflatex is installed, and the tidy CSV files read back into the arms' means."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from record.schema import Metric
from tests.cli import run_nas

NUMBER = re.compile(r"[+-]?\d[\d,]*(?:\.\d+)?")


@pytest.fixture(scope="module")
def written(swept: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of the shared sweep in every format but HTML, written once for the module."""
    root, uri = swept
    out = tmp_path_factory.mktemp("formats") / "report"
    args = ("report", "smoke", "--format", "tex,md,csv", "--out", str(out), "--tracking-uri", uri)
    proc = run_nas(root, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _trial_runs(uri: str) -> list:
    """The sweep's trial runs, read straight from MLflow (not through reports)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    return client.search_runs([exp.experiment_id], "tags.`nas.role` = 'trial'")


def _md_rows(markdown: str) -> dict[str, str]:
    """arm -> its main-table row as Markdown (the table captioned with the arms' order)."""
    table = markdown.split("**arms sorted by", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in table.splitlines()[2:]:  # after the header and the rule
        first = line.strip("| ").split(" | ", 1)[0]
        rows[re.sub(r"[\\*]", "", first).removesuffix(" (baseline)")] = line
    return rows


def _tex_rows(tex: str) -> dict[str, str]:
    """arm -> its main-table row as LaTeX (the table captioned with the arms' order)."""
    table = tex.split("\\caption{arms sorted by", 1)[1].split("\\end{tabular}", 1)[0]
    body = table.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    rows = {}
    for line in body.strip().splitlines():
        first = re.sub(r"\\text(it|bf)\{|\}", "", line.split(" & ", 1)[0])
        rows[first.replace("\\_", "_").removesuffix(" (baseline)")] = line
    return rows


def test_tex_table_numbers_match_the_markdown(written: Path) -> None:
    """Row for row, the LaTeX main table holds the Markdown table's numbers in the same order,
    the lowest final loss in bold and mean ± interval as $\\pm$."""
    md = _md_rows((written / "report.md").read_text())
    tex = _tex_rows((written / "report.tex").read_text())
    assert set(md) == set(tex) == {"standard", "block_attnres"}
    for arm, line in md.items():
        assert NUMBER.findall(tex[arm]) == NUMBER.findall(line)
        assert "$\\pm$" in tex[arm]
    best = min(md, key=lambda arm: float(NUMBER.findall(md[arm])[0]))
    assert "\\textbf{" in tex[best]


def test_tex_figures_are_pdfs_that_exist(written: Path) -> None:
    """Every \\includegraphics names a PDF in the folder; every figure written is included."""
    tex = (written / "report.tex").read_text()
    included = re.findall(r"\\includegraphics\[[^\]]*\]\{([^}]+)\}", tex)
    assert len(included) >= 3
    for path in included:
        assert path.endswith(".pdf") and (written / path).read_bytes().startswith(b"%PDF")
    pdfs = {p.relative_to(written).as_posix() for p in (written / "figures").glob("*.pdf")}
    assert pdfs == set(included)


def test_tex_compiles_with_pdflatex(written: Path, tmp_path: Path) -> None:
    """pdflatex turns the report into a PDF, with no error."""
    pdflatex = shutil.which("pdflatex")
    if pdflatex is None:
        pytest.skip("pdflatex is not installed; the numbers are checked against the Markdown")
    folder = shutil.copytree(written, tmp_path / "tex")
    proc = subprocess.run(
        [pdflatex, "-interaction=nonstopmode", "-halt-on-error", "report.tex"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert (folder / "report.pdf").read_bytes().startswith(b"%PDF")


def test_trials_csv_is_one_row_per_trial_with_every_param(
    written: Path, swept: tuple[Path, str]
) -> None:
    """trials.csv has one row per trial run, each param of each run as a column holding the
    run's value, and its final metrics at full precision."""
    trials = pd.read_csv(written / "trials.csv")
    runs = _trial_runs(swept[1])
    assert len(trials) == len(runs) == trials["run_id"].nunique()
    by_id = trials.set_index("run_id")
    for run in runs:
        row = by_id.loc[run.info.run_id]
        assert row["sweep"] == "smoke" and row["arm"] == run.data.tags["nas.arm"]
        for name, value in run.data.params.items():
            if value == "":  # an empty param reads back as a missing cell, as in pandas and R
                assert pd.isna(row[name]), name
            else:
                assert str(row[name]) == value or float(row[name]) == float(value), name
        assert row[Metric.FINAL_VAL_LOSS] == run.data.metrics[Metric.FINAL_VAL_LOSS]
    assert {"status", "reason", Metric.FINAL_DEVICE_HOURS} <= set(trials.columns)


def test_arms_csv_means_recompute_from_trials_csv(written: Path) -> None:
    """Each arm's mean and standard deviation of final validation loss in arms.csv are those of
    its finished trials in trials.csv; the interval brackets the mean."""
    trials = pd.read_csv(written / "trials.csv")
    arms = pd.read_csv(written / "arms.csv").set_index("arm")
    finished = trials[trials["status"] == "finished"].groupby("arm")[Metric.FINAL_VAL_LOSS]
    pd.testing.assert_series_equal(
        arms["final_val_loss_mean"].sort_index(),
        finished.mean().sort_index(),
        check_names=False,
        rtol=1e-12,
    )
    pd.testing.assert_series_equal(
        arms["final_val_loss_std"].sort_index(),
        finished.std(ddof=1).sort_index(),
        check_names=False,
        rtol=1e-12,
    )
    assert (arms["final_val_loss_ci_low"] < arms["final_val_loss_mean"]).all()
    assert (arms["final_val_loss_mean"] < arms["final_val_loss_ci_high"]).all()
    assert (arms["n_seeds"] == finished.size()).all()
    assert arms.loc["standard", "verdict"] == "baseline"
