"""The in-process runner (``nas.sweep.local_run``) takes what it can run as Tune would, and refuses
what only Ray runs, before any trial starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from record.schema import Tag
from tests.nas import sweeps
from tests.nas.spaces import TINY_SEARCH


def test_a_search_is_refused_and_no_trial_is_recorded(tmp_path: Path) -> None:
    """A search's proposals come from Tune's searcher: the runner refuses it before a trial
    runs, and the record holds the sweep's parent, closed, and no trial."""
    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    with pytest.raises(ValueError, match="searcher"):
        sweeps.run_here(tmp_path, [str(space), "--name", "search"])
    parents, trials, _ = sweeps.trials(tmp_path, "search")
    assert len(parents) == 1 and parents[0].info.status != "RUNNING" and not trials


def test_a_grid_runs_each_trial_once_under_its_own_id(tmp_path: Path) -> None:
    """Every planned cell trains once, its run tagged with the id of the host that ran it,
    and the same command again finds them settled and runs nothing."""
    code, runner = sweeps.run_here(tmp_path, ["smoke", "--name", "here"])
    assert code == 0 and runner.stages == 1
    _, trials, client = sweeps.trials(tmp_path, "here")
    sweeps.check_record(trials, client)
    assert {r.data.tags[Tag.TRIAL_KEY] for r in trials} == set(runner.hosts)
    ids = {r.data.tags[Tag.TRIAL_ID] for r in trials}
    assert ids == {h.id for h in runner.hosts.values()} and len(ids) == len(trials)
    # the kernels each ran, as trainers.training.paths names them: eager on a CPU ('auto'), the
    # buffered two-phase path for Block AttnRes, no depth softmax for standard
    paths = {"block_attnres": "buffered", "standard": ""}
    for r in trials:
        tags = r.data.tags
        assert tags[Tag.COMPILED] == "false"
        assert tags[Tag.DEPTH_PATH] == paths[r.data.params["model.residual"]]
        assert "torch" in json.loads(tags[Tag.KERNELS])
        assert (tags[Tag.STRATEGY], tags[Tag.WORLD_SIZE]) == ("single", "1")
    code, again = sweeps.run_here(tmp_path, ["smoke", "--name", "here"])
    assert code == 0 and again.stages == 0 and not again.hosts


def test_a_trial_over_several_workers_is_refused_before_any_trial(tmp_path: Path) -> None:
    """Data-parallel workers are Ray Train's: refused before a trial runs, nothing recorded
    beyond the closed parent."""
    with pytest.raises(ValueError, match="Ray Train"):
        sweeps.run_here(tmp_path, ["smoke", "--name", "dp", "--workers-per-trial", "2"])
    parents, trials, _ = sweeps.trials(tmp_path, "dp")
    assert len(parents) == 1 and parents[0].info.status != "RUNNING" and not trials
