"""A changed plan, on a real MLflow SQLite store without Ray (``tests.nas.sweeps.play`` and the
real ``nas`` commands in-process, each refused or settled before Ray starts): a two-arm sweep,
then ``--set`` and an edited arm refused with the keys before anything is written (through the
store's URI with a driver option too), and ``--restart`` archiving the state under a new parent.
(Extension by seeds and arms: test_campaign.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from record.schema import PLANS_FOLDER, Tag
from tests.nas import sweeps
from tests.nas.spaces import EDITED, TWO_ARMS

LOSSES = {("standard", 0): 3.1, ("block", 0): 3.0}


def _state(tmp: Path) -> tuple[int, list[str], int]:
    """The sweep's trial runs, the files of its Tune folders, its parent's plan files."""
    parents, trials, client = sweeps.trials(tmp, "camp")
    plans = client.list_artifacts(parents[0].info.run_id, PLANS_FOLDER)
    files = sorted(str(f.relative_to(tmp)) for f in (tmp / "ray").rglob("*"))
    return len(trials), files, len(plans)


def test_a_changed_plan_is_refused_before_anything_is_written_and_restart_starts_anew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A two-arm sweep (played, then settled by the real command, which leaves its folder);
    ``--set`` refused with the key's old and new value, in one line, exit status 2, before Ray
    starts, and the same through a URI with a driver option (whose report reads the sweep);
    an edited arm refused naming its trial; none writes a run, a file or a plan. ``--restart``
    archives the folder, supersedes the old parent and runs both arms again under a new one,
    the edited arm at its new value."""
    import ray

    from nas.cli import main

    space = tmp_path / "camp.yaml"
    space.write_text(TWO_ARMS)
    args = [str(space), "--name", "camp"]
    assert len(sweeps.play(tmp_path, args, LOSSES)) == 2
    assert main(sweeps.command(tmp_path, *args)) == 0  # settled: nothing to run
    before = _state(tmp_path)
    assert (before[0], before[2]) == (2, 2) and before[1]

    def refused(*more: str) -> str:
        capsys.readouterr()
        assert main([*sweeps.command(tmp_path, *args, *more)]) == 2
        assert not ray.is_initialized()
        stderr = capsys.readouterr().err
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1
        return stderr

    changed = refused("--set", "train.lr=0.01")
    assert "train.lr: 0.003 -> 0.01" in changed and "--restart" in changed
    # the same store through a URI with a driver option: the same sweep, the same refusal (a
    # parser that took "mlflow.db?timeout=5" for the file name found no sweep and ran the
    # changed plan into it); argparse keeps the last --tracking-uri
    with_query = ("--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}?timeout=5")
    assert refused("--set", "train.lr=0.01", *with_query) == changed
    report = ["report", "camp", *with_query, "--out", str(tmp_path / "report")]
    assert main(report) == 0
    assert "standard" in (tmp_path / "report" / "report.md").read_text()
    space.write_text(EDITED)
    assert "'standard seed 0' differs (train.lr: 0.003 -> 0.01)" in refused()
    assert _state(tmp_path) == before

    restart = sweeps.play(tmp_path, [*args, "--restart"], LOSSES)
    assert sorted((s.arm, s.seed) for s in restart) == [("block", 0), ("standard", 0)]
    archived = [f.replace("ray/camp/", "", 1) for f in before[1] if f.startswith("ray/camp/")]
    assert archived
    (kept,) = tmp_path.glob("ray/camp.archived-*")
    assert sorted(str(f.relative_to(kept)) for f in kept.rglob("*")) == archived
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
    sweeps.check_tags(parents, trials)
