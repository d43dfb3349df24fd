"""The sweep's last screen (``nas.sweep.summary.print_end``) on a real recorded store (the old smoke
sweep of ``tests/reports/old_record.py``, no Ray): the arms as the report's first table gives
them, then one line saying where the best configuration was written, never the YAML itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from nas.spec import grid_specs
from nas.store.tracking import RecordedTrial
from nas.sweep.summary import BEST_CONFIG, Outcome, print_end
from record.schema import Metric, Status
from search_spaces import BUILTIN, grid_cells
from tests.reports.old_record import unpack
from trainers.config import RunConfig, flatten
from trainers.config_io import build_config


def _best() -> Outcome:
    """The smoke grid's block_attnres trial as the record holds it, finished."""
    specs = grid_specs(grid_cells(BUILTIN["smoke"], RunConfig())[0])
    spec = next(s for s in specs if s.arm == "block_attnres")
    params = {k: str(v) for k, v in flatten(spec.config).items()}
    metrics = {Metric.FINAL_VAL_LOSS: 4.2243}
    trial = RecordedTrial(
        "run", spec.key, spec.arm, 0, Status.FINISHED, "FINISHED", "", params, metrics
    )
    return Outcome(spec.label, Status.FINISHED.value, "", metrics, trial)


def test_sweep_ends_with_the_arms_and_where_the_best_configuration_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The arms table (one seed each: Δ with 'too few seeds' and the line saying why), then one
    line naming the best trial and the file its configuration was written to; the file holds
    the configuration, the screen does not (it used to print the YAML)."""
    uri = unpack(tmp_path / "store")
    top = _best()
    print_end("smoke", uri, top, tmp_path / "ray")
    lines = capsys.readouterr().out.splitlines()
    path = tmp_path / "ray" / BEST_CONFIG
    assert lines[0] == "" and lines[1].startswith("arms by mean final validation loss")
    block = next(line for line in lines if line.startswith("  block_attnres"))
    assert block.split()[1:4] == ["4.2243", "1", "-0.0060"] and "too few seeds" in block
    assert any(line.startswith("one seed per arm: no interval") for line in lines)
    assert lines[-1] == (
        f"best trial: {top.label} (final val loss 4.2243); for `nas train --config`: {path}"
    )
    assert not any(line.lstrip().startswith(("model:", "train:", "data:")) for line in lines)
    assert len(lines) <= 10
    config = build_config(str(path))
    assert config.model.residual == top.trial.params["model.residual"]  # type: ignore[union-attr]


def test_a_record_the_report_cannot_read_is_one_line_not_a_failed_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep the reader refuses (here: none of that name) ends the screen with one line
    saying why; with no best trial, no configuration file is written."""
    uri = unpack(tmp_path / "store")
    print_end("nonesuch", uri, None, tmp_path / "ray")
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        f"arms: the record cannot be summarized (no sweep named 'nonesuch' in {uri}; sweeps "
        "there: smoke)"
    ]
    assert not (tmp_path / "ray" / BEST_CONFIG).exists()


def test_the_best_configuration_is_saved_and_named_not_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``write_best`` writes the YAML file and prints one line naming it (it used to print the
    configuration's 60 lines)."""
    from nas.sweep.summary import write_best

    path = tmp_path / "best.yaml"
    write_best(_best(), path)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and str(path) in out
    assert build_config(str(path)).model.residual == "block_attnres"
