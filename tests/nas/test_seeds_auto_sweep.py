"""``nas sweep --seeds auto`` on a real MLflow SQLite store without Ray
(``tests.nas.sweeps.play``): the pilot is handed to Tune first, its recorded noise sets the
seeds, exactly the extra seeds are handed next in the same invocation, and the same command
again runs nothing and starts no Ray. (The campaign's choice on a constructed record and the
refusals: test_seeds_campaign.py; what Tune itself writes: the real grid sweep of
test_sweep.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from record.schema import SEEDS_FILE, Metric, Tag
from search_spaces.seed_choice import SeedRule, choose
from tests.nas import sweeps
from tests.nas.spaces import PILOT

EFFECT, MAX_SEEDS = 0.005, 5
ARGS = ("--name", "auto", "--seeds", "auto", "--effect", str(EFFECT), "--max-seeds", str(MAX_SEEDS))
# block minus standard per pilot seed: sd 0.0023, which asks for 4 seeds to detect EFFECT
NOISE = {0: 0.002, 1: -0.001, 2: 0.0035}
LOSSES = {("standard", s): 3.0 for s in range(MAX_SEEDS)}
LOSSES |= {("block", s): 3.0 + NOISE.get(s, 0.01) for s in range(MAX_SEEDS)}


def test_seeds_auto_runs_the_pilot_then_exactly_the_seeds_its_noise_asks_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pilot (2 arms x seeds 0-2) is handed first, then only the extra seeds; the record
    holds the choice on the parent run (JSON and tag) equal to ``choose`` on the recorded
    pilot's paired differences, the decision printed, exactly the cells of the chosen seeds,
    every record invariant, every nas tag one the schema names; the same command again, in
    this process, runs nothing, starts no Ray and writes no Tune experiment."""
    import ray

    from nas.cli import main

    space = tmp_path / "pilot.yaml"
    space.write_text(PILOT)
    handed = sweeps.play(tmp_path, [str(space), *ARGS], LOSSES)
    printed = capsys.readouterr().out  # the choice, printed as it is made
    assert "pilot sd" in printed and "--seeds auto: " in printed
    pilot = [(a, s) for a in ("standard", "block") for s in (0, 1, 2)]
    assert sorted((s.arm, s.seed) for s in handed[:6]) == sorted(pilot)
    parents, trials, client = sweeps.trials(tmp_path, "auto")
    sweeps.check_record(trials, client)
    sweeps.check_tags(parents, trials)
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
    cells = {(a, s) for a in ("standard", "block") for s in range(expected.seeds)}
    assert set(loss) == cells and len(trials) == len(cells)
    extra = sorted((s.arm, s.seed) for s in handed[6:])  # handed once the pilot settled
    assert extra == sorted(cells - set(pilot))

    assert main(sweeps.command(tmp_path, str(space), *ARGS)) == 0
    out = capsys.readouterr().out
    assert "nothing to run" in out and not ray.is_initialized()
    assert len(sweeps.trials(tmp_path, "auto")[1]) == len(trials)
    assert not sweeps.tune_dirs(tmp_path, "auto")
