"""``nas coordcheck``: bad input is one line and exit 2 with nothing written; a run writes the
table (CSV and Markdown) and the figure per axis and prints a verdict, exit 1 when it fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import run_nas


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--widths", "64"], "two or more distinct integers"),
        (["--depths", "2,x"], "expected comma-separated integers"),
        (["--set", "model.parametrization=ntk"], "model.parametrization: 'ntk' is not allowed"),
        (["--set", "model.parametrization=mup", "--widths", "32,50"], "does not divide"),
        (
            ["--set", "model.parametrization=completep", "--set", "model.residual=attnres"],
            "fails the coord check",
        ),
        (["--steps", "0"], "expected one integer >= 1"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list, words: str) -> None:
    """Each refusal: exit 2, one line on stderr naming what is wrong, no output folder."""
    out = tmp_path / "out"
    done = run_nas(tmp_path, "coordcheck", *args, "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr
    assert not out.exists()


def test_a_run_writes_tables_figures_and_a_verdict(tmp_path: Path) -> None:
    """sp across two widths and two depths: both axes' CSV, Markdown and PNG are written, and
    the verdict (sp's updates grow with width) fails with exit 1."""
    out = tmp_path / "cc"
    done = run_nas(
        tmp_path, "coordcheck", "--widths", "32,128", "--depths", "2,4", "--seeds", "0",
        "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "fail: " in done.stdout and "width^" in done.stdout
    for axis in ("width", "depth"):
        for ext in ("csv", "md", "png"):
            assert (out / f"coordcheck-{axis}.{ext}").stat().st_size > 0
    header = (out / "coordcheck-width.csv").read_text().splitlines()[0]
    assert header.startswith("size,step,embedding,attention_logits")
