"""The coord check a sweep records (``nas.sweep.coordcheck``): a sweep under a parametrization
other than sp records one check per wiring and axis on its parent run (a real SQLite MLflow
store), the report reads them back with their verdicts and figures, an extended sweep runs none
again, and an sp sweep records nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nas.store.tracking import open_sweep, sweep_text
from nas.sweep.coordcheck import planned, record_coordchecks
from nas.sweep.plan import Plan, SweepOptions, plan
from record.schema import COORDCHECK_INDEX, Tag
from reports.document import Figure, Table
from reports.load import load_sweep
from reports.sections.coordcheck import coordcheck_section
from search_spaces.distributions import Choice
from search_spaces.loader import space_to_data
from search_spaces.space import Space

# One wiring at two depths under CompleteP (its base at the smaller): the two arms are one model
# at the check's sizes, so one check per axis.
COMPLETEP = ("model.parametrization=completep", "model.base_width=32", "model.base_depth=2")
SPACE = Space(
    name="cc",
    description="",
    base={"model.d_model": 32, "model.n_heads": 2, "model.seq_len": 64},
    params={"model.n_layers": Choice((2, 4))},
)


def _plan(tmp_path: Path, *overrides: str) -> Plan:
    path = tmp_path / "cc.yaml"
    path.write_text(yaml.safe_dump(space_to_data(SPACE), sort_keys=False))
    opts = SweepOptions(str(path), overrides=overrides, storage_path=str(tmp_path / "ray"))
    return plan(opts)


def test_an_sp_sweep_plans_no_check(tmp_path: Path) -> None:
    """The space as it is (sp): nothing to check, nothing run or written."""
    assert planned(_plan(tmp_path)) == []


def test_a_completep_sweep_records_its_checks_and_the_report_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under CompleteP: one check per axis for the one wiring, each a table on the parent run;
    its report's section has the two verdicts (each passes) and two figures; run again (an
    extended sweep), nothing is run or rewritten."""
    p = _plan(tmp_path, *COMPLETEP)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tags = {Tag.COMMAND: "nas sweep smoke", Tag.SPACE: "smoke", Tag.VERSIONS: "{}"}
    record = open_sweep(uri, "cc", "key", tags, {})
    record_coordchecks(record, p)
    assert "coord check: 2 recorded in" in capsys.readouterr().out
    index = json.loads(sweep_text(record, COORDCHECK_INDEX) or "[]")
    assert [(e["axis"], e["sizes"]) for e in index] == [
        ("width", [32, 64, 128]),
        ("depth", [2, 4, 8]),
    ]
    assert {e["model"]["model.parametrization"] for e in index} == {"completep"}
    record_coordchecks(record, p)
    assert capsys.readouterr().out == ""
    data = load_sweep(uri, "cc")
    assert [c.entry for c in data.coordchecks] == index
    section = coordcheck_section(data)
    assert section is not None
    (summary,) = [b for b in section.blocks if isinstance(b, Table)]
    assert [r[-1] for r in summary.rows] == ["pass", "pass"]
    assert len([b for b in section.blocks if isinstance(b, Figure)]) == 2
