"""A changed plan against the real parts (Ray, MLflow SQLite store, Lightning trials): a
two-arm sweep, then ``--set`` and an edited arm refused with the keys before anything is
written (through the store's URI with a driver option too), and ``--restart`` archiving the
state under a new parent. (Extension by seeds and arms: test_campaign.py.)"""

from __future__ import annotations

from pathlib import Path

from record.schema import PLANS_FOLDER, Tag
from tests.cli import run_nas
from tests.nas import sweeps
from tests.nas.test_campaign import EDITED, TWO_ARMS


def test_a_changed_plan_is_refused_before_anything_is_written_and_restart_starts_anew(
    tmp_path: Path,
) -> None:
    space = tmp_path / "camp.yaml"
    space.write_text(TWO_ARMS)
    first = sweeps.sweep(tmp_path, str(space), "--name", "camp")
    assert first.returncode == 0, first.stderr[-3000:]
    parents, trials, client = sweeps.trials(tmp_path, "camp")
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    before = (len(trials), len(sweeps.tune_dirs(tmp_path, "camp")), len(plans))
    assert before == (2, 1, 1)

    changed = sweeps.sweep(tmp_path, str(space), "--name", "camp", "--set", "train.lr=0.01")
    assert changed.returncode == 2 and "Traceback" not in changed.stderr
    assert len(changed.stderr.strip().splitlines()) == 1
    assert "train.lr: 0.003 -> 0.01" in changed.stderr and "--restart" in changed.stderr
    # the same store through a URI with a driver option: the same sweep, the same refusal (a
    # parser that took "mlflow.db?timeout=5" for the file name found no sweep and ran the
    # changed plan into it)
    with_query = ("--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}?timeout=5")
    queried = sweeps.sweep(
        tmp_path, str(space), "--name", "camp", "--set", "train.lr=0.01", *with_query
    )
    assert (queried.returncode, queried.stderr) == (2, changed.stderr)
    report = run_nas(tmp_path, "report", "camp", *with_query, "--out", str(tmp_path / "report"))
    assert report.returncode == 0, report.stderr[-3000:]
    assert "standard" in (tmp_path / "report" / "report.md").read_text()
    space.write_text(EDITED)
    edited = sweeps.sweep(tmp_path, str(space), "--name", "camp")
    assert edited.returncode == 2
    assert "'standard seed 0' differs (train.lr: 0.003 -> 0.01)" in edited.stderr
    parents, trials, client = sweeps.trials(tmp_path, "camp")
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    assert (len(trials), len(sweeps.tune_dirs(tmp_path, "camp")), len(plans)) == before

    restart = sweeps.sweep(tmp_path, str(space), "--name", "camp", "--restart")
    assert restart.returncode == 0, restart.stderr[-3000:]
    assert list(tmp_path.glob("ray/camp.archived-*/tune-0001-*"))
    parents, trials, client = sweeps.trials(tmp_path, "camp")
    old = [p for p in parents if p.data.tags.get(Tag.SUPERSEDED) == "true"]
    new = [p for p in parents if p.data.tags.get(Tag.SUPERSEDED) != "true"]
    assert len(old) == len(new) == 1 and old[0].info.status == "FINISHED"
    assert new[0].data.params["train.lr"] == old[0].data.params["train.lr"] == "0.003"
    fresh = [t for t in trials if t.data.tags[Tag.PARENT] == new[0].info.run_id]
    assert len(trials) == 4 and len(fresh) == 2  # seed 0 of each arm, under the new parent
    assert {t.data.params["train.lr"] for t in fresh if t.data.tags[Tag.ARM] == "standard"} == {
        "0.01"
    }
    sweeps.check_record(trials, client)
    sweeps.check_schema(tmp_path, "camp", parents, trials)
