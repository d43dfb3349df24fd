"""``nas sweep --seeds auto`` end to end on a real local Ray and MLflow: the pilot runs, its noise
sets the seeds, exactly the extra seeds run, and the same command again runs nothing."""

from __future__ import annotations

import json
from pathlib import Path

from record.schema import SEEDS_FILE, Metric, Tag
from search_spaces.seed_choice import SeedRule, choose
from tests.nas import sweeps
from tests.nas.test_seeds_campaign import PILOT

# Sized so the smoke-scale pilot's noise (block minus standard, per seed) asks for more
# seeds than the pilot's 3 and no more than MAX_SEEDS (measured: sd 0.0023, 4 seeds; 4 or 5
# at 30% more or less noise).
EFFECT, MAX_SEEDS = 0.005, 5
ARGS = ("--name", "auto", "--seeds", "auto", "--effect", str(EFFECT), "--max-seeds", str(MAX_SEEDS))


def test_seeds_auto_runs_the_pilot_then_exactly_the_seeds_its_noise_asks_for(
    tmp_path: Path,
) -> None:
    """The record holds the pilot (2 arms x seeds 0-2), the choice on the parent run (JSON and
    tag) equal to ``choose`` on the recorded pilot's paired differences, and exactly the extra
    seeds it planned, every tag and metric one the schema names; the same command again runs nothing and writes no Tune experiment."""
    space = tmp_path / "pilot.yaml"
    space.write_text(PILOT)
    first = sweeps.sweep(tmp_path, str(space), *ARGS)
    assert first.returncode == 0, first.stderr[-3000:]
    parents, trials, client = sweeps.trials(tmp_path, "auto")
    sweeps.check_record(trials, client)
    sweeps.check_schema(tmp_path, "auto", parents, trials)
    state = json.loads(
        Path(client.download_artifacts(parents[0].info.run_id, SEEDS_FILE, tmp_path)).read_text()
    )
    loss = {
        (r.data.tags[Tag.ARM], int(r.data.tags[Tag.SEED])): r.data.metrics[Metric.FINAL_VAL_LOSS]
        for r in trials
    }
    diffs = [loss["block", s] - loss["standard", s] for s in (0, 1, 2)]
    expected = choose({"block": ("standard", diffs)}, SeedRule(effect=EFFECT, cap=MAX_SEEDS), 3)
    assert state["seeds"] == expected.seeds and 3 < expected.seeds <= MAX_SEEDS, state
    assert state["comparisons"]["block"]["sd"] == expected.needs["block"].sd
    assert parents[0].data.tags[Tag.SEEDS_AUTO] == str(expected.seeds)
    assert set(loss) == {(a, s) for a in ("standard", "block") for s in range(expected.seeds)}
    assert sweeps.finished_lines(first.stdout) == 2 * expected.seeds
    assert "--seeds auto: " in first.stdout and "pilot sd" in first.stdout

    tune = len(sweeps.tune_dirs(tmp_path, "auto"))
    again = sweeps.sweep(tmp_path, str(space), *ARGS)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing to run" in again.stdout and sweeps.finished_lines(again.stdout) == 0
    assert len(sweeps.trials(tmp_path, "auto")[1]) == len(trials)
    assert len(sweeps.tune_dirs(tmp_path, "auto")) == tune
