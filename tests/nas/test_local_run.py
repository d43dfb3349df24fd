"""The in-process runner (``nas.sweep.local_run``) runs a grid and a search as Tune would, one trial
at a time, and refuses what only Ray runs, before any trial starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from record.schema import Metric, Report, Tag
from tests.nas import sweeps
from tests.nas.spaces import TINY_SEARCH


def test_a_search_proposes_trains_and_records_its_trials(tmp_path: Path) -> None:
    """A TPE search of ``--trials 2`` in this process, its study in a SQLite database of its own:
    the searcher proposes two points, each inside the space's ranges (``train.lr`` in [3e-4,
    1e-2], ``model.residual`` one of its two values, ``model.attnres_blocks`` fixed at 2); each is
    trained to its last step (no ASHA here) and recorded as one trial run with its point as
    params; the stored study holds two completed trials, at the recorded points, with the
    recorded final validation losses as their values."""
    import optuna

    space = tmp_path / "search.yaml"
    space.write_text(TINY_SEARCH)
    study = f"sqlite:///{tmp_path / 'study.db'}"
    args = [str(space), "--name", "search", "--trials", "2", "--study-storage", study]
    code, runner = sweeps.run_here(tmp_path, args)
    assert code == 0 and runner.stages == 1 and runner.repeats == 0
    _, trials, client = sweeps.trials(tmp_path, "search")
    sweeps.check_record(trials, client)
    assert len(trials) == len(runner.proposals) == 2
    for point in runner.proposals:
        assert 3e-4 <= point["train.lr"] <= 1e-2
        assert point["model.residual"] in ("standard", "block_attnres")
        assert point["model.attnres_blocks"] == 2
    recorded = {
        (float(r.data.params["train.lr"]), r.data.params["model.residual"]): r for r in trials
    }
    assert set(recorded) == {(p["train.lr"], p["model.residual"]) for p in runner.proposals}
    for run in trials:
        assert run.data.tags[Tag.STATUS] == "finished"
        assert run.data.metrics[Metric.FINAL_STEPS] == sweeps.STEPS
    stored = optuna.load_study(study_name="search", storage=study).trials
    assert [t.state.name for t in stored] == ["COMPLETE"] * 2
    for t in stored:
        run = recorded[t.params["train.lr"], t.params["model.residual"]]
        assert t.values == [run.data.metrics[Metric.FINAL_VAL_LOSS]]


# Three proposals over two points: at least one repeats a point the record has settled.
TWO_POINTS = """\
description: a random search over two points
kind: search
sampler: random
base: {model.d_model: 32, model.n_heads: 2, model.seq_len: 64, train.batch_size: 4,
       train.max_steps: 4, train.val_every: 2, train.val_batches: 2, train.warmup_steps: 1,
       train.diagnostics_batch: 2, data.max_bytes: 1000000}
params:
  model.n_layers: [1, 2]
trials: 3
"""


def test_a_search_answers_a_repeated_point_from_the_record_and_counts_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three proposals over two points: each point trains once, as one trial run; every other
    proposal of it is answered from the record (its last report a repeat, at the recorded
    status) and counted, so the summary leaves no proposal 'not started' and the sweep ends
    settled (exit 0, its parent FINISHED). The study holds all three proposals, completed at
    the recorded loss of their point."""
    import optuna

    space = tmp_path / "two.yaml"
    space.write_text(TWO_POINTS)
    study = f"sqlite:///{tmp_path / 'study.db'}"
    code, runner = sweeps.run_here(
        tmp_path, [str(space), "--name", "two", "--study-storage", study]
    )
    assert code == 0 and "not started" not in capsys.readouterr().out
    parents, trials, client = sweeps.trials(tmp_path, "two")
    sweeps.check_record(trials, client)
    assert parents[0].info.status == "FINISHED"
    loss = {r.data.params["model.n_layers"]: r.data.metrics[Metric.FINAL_VAL_LOSS] for r in trials}
    assert len(loss) == len(trials) and len(runner.proposals) == 3
    assert runner.repeats == 3 - len(trials) >= 1
    repeated = [h.reports[-1] for h in runner.hosts.values() if h.reports[-1].get(Report.REPEAT)]
    assert repeated and all(r[Report.STATUS] == "finished" for r in repeated)
    stored = optuna.load_study(study_name="two", storage=study).trials
    assert [t.state.name for t in stored] == ["COMPLETE"] * 3
    assert all(t.values == [loss[str(t.params["model.n_layers"])]] for t in stored)


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
