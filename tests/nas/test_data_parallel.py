"""Data-parallel sweep trials (``nas sweep --workers-per-trial``, ``nas.trial.data_parallel``): two
gloo workers on the CPU train what one process trains on the same global batch, and a killed
worker's trial is retried from its checkpoint into the same run.

Why the tolerance: the two runs differ only in the order of float sums. One process averages
the loss over B·T tokens in one reduction; two workers each average B·T/2 and DDP averages their
gradients. A float32 sum of n terms reorders to a relative difference of at most about
log2(n)·eps (pairwise summation, eps = 2**-24 ≈ 6e-8): for B·T = 8·16 tokens, under 1e-6. Adam
normalizes each update by the gradient's own scale, so a relative gradient difference moves an
update by the same relative amount, and a few steps at a small learning rate keep the losses
within a few times that. ``RTOL`` = 1e-5 leaves a margin of ten over that bound; a wrong split
(a sequence dropped or seen twice, a rank's loss left out of the mean) moves the loss by 1e-2.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nas.trial.checkpoints import MARK_NAME
from nas.trial.data_parallel import check_split
from record.schema import PROFILE_FOLDER, ROLE_TRIAL, Metric, Tag
from tests.nas.sweeps import run_here
from tests.ray_cluster import pids_naming, shared_env
from trainers.config import RunConfig
from trainers.config_io import from_dict

RTOL = 1e-5
WORKERS = 2


def _cfg(batch_size: int = 8, max_steps: int = 6, val_every: int = 3) -> RunConfig:
    return from_dict(
        {
            "model": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 16, "dropout": 0.0},
            "train": {
                "batch_size": batch_size,
                "max_steps": max_steps,
                "val_every": val_every,
                "val_batches": 2,
                "warmup_steps": 2,
                "lr": 1e-3,
                "log_every": 1,
                "accelerator": "cpu",
                "diagnostics_every": 0,
            },
            "data": {"source": "synthetic", "hops": 1, "n_symbols": 8},
        }
    )


def test_the_global_batch_must_split_evenly() -> None:
    """A batch that does not divide over the workers, or no workers, is refused naming the key."""
    with pytest.raises(ValueError, match=r"train\.batch_size: 6 does not split evenly over 4"):
        check_split(_cfg(batch_size=6), 4)
    with pytest.raises(ValueError, match="workers: 0"):
        check_split(_cfg(), 0)
    check_split(_cfg(), WORKERS)


# One arm, long enough for a kill between its checkpoints; the profile measured at each
# validation (diagnostics_every 1) so a duplicate from a second rank would show.
ONE_ARM = """\
description: one data-parallel trial
base: {{model.d_model: 32, model.n_heads: 2, model.n_layers: 2, model.seq_len: 16,
       model.dropout: 0.0, train.batch_size: 8, train.max_steps: {steps},
       train.val_every: {every}, train.val_batches: 2, train.warmup_steps: 2,
       train.log_every: 1, train.lr: 0.001, train.diagnostics_every: 1,
       train.diagnostics_batch: 2,
       data.source: synthetic, data.hops: 1, data.n_symbols: 8}}
params: {{model.residual: [standard]}}
"""


def _sweep(tmp: Path, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``nas sweep`` of ``space.yaml`` in ``tmp`` on the session's shared 2-CPU cluster."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **shared_env()}
    cmd = [sys.executable, "-m", "nas.cli", "sweep", str(tmp / "space.yaml"), "--name", name,
           "--cpus-per-trial", "1", "--tracking-uri", f"sqlite:///{tmp / 'mlflow.db'}",
           "--storage-path", str(tmp / "ray"), *args]  # fmt: skip
    return subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600, env=env)


def _trial(tmp: Path, name: str) -> tuple[Any, Any]:
    """The sweep's one trial run, and the client that reads it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name(name)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    trials = [r for r in runs if r.data.tags.get(Tag.ROLE) == ROLE_TRIAL]
    assert len(trials) == 1, [r.data.tags for r in runs]
    return trials[0], client


def _history(client: Any, run_id: str, key: str) -> dict[int, float]:
    """step -> value; asserts that no step was recorded twice."""
    history = client.get_metric_history(run_id, key)
    steps = [m.step for m in history]
    assert len(steps) == len(set(steps)), (key, sorted(steps))
    return {m.step: m.value for m in history}


def _kill_a_worker_once_checkpointed(storage: Path, killed: list[int]) -> None:
    """Once Ray Train has registered a checkpoint of the sweep's trial (its snapshot file in
    the trial's ``<trial id>-train`` folder), SIGKILL one of its workers: a Ray Train worker
    working in a folder of that name (Ray's artifacts folder of the run), not another test's
    on the shared cluster."""
    deadline, snapshots = time.monotonic() + 300, []
    while time.monotonic() < deadline and not snapshots:
        snapshots = list(storage.glob("*/tune-*/*-train/checkpoint_manager_snapshot.json"))
        time.sleep(0.05)
    if not snapshots:
        return
    run = snapshots[0].parent.name
    for pid in pids_naming("RayTrainWorker"):
        with contextlib.suppress(OSError):
            ours = Path(os.readlink(f"/proc/{pid}/cwd")).name == run
            if ours and b"RayTrainWorker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return


def test_a_two_worker_trial_records_what_one_process_does_and_survives_a_killed_worker(
    tmp_path: Path,
) -> None:
    """``--workers-per-trial 2``, one Train start for both properties (each costs tens of
    seconds of worker start-up here):

    - what one process does: the loss curve and every validation, the retried attempt's
      included, equal the same trial trained in one process within RTOL, though each worker accumulates its share of 4 sequences in two
      micro-batches of 2 (``train.micro_batch``, gradients averaged over the workers once per
      step) where the one process takes its 8 at once; the parameters are the same but that
      execution field, the dilution profile is written once
      per validation (rank 0 alone measures and writes), and the cost counts both workers;
    - a killed worker: SIGKILL of one worker once a checkpoint is registered makes Tune retry
      the trial, which resumes from the newest checkpoint of its key into the same run. The
      sweep finishes with one run, every step recorded once, and the first validation's
      checkpoint written once (a retry from scratch would write it again).
    """
    (tmp_path / "space.yaml").write_text(ONE_ARM.format(steps=80, every=20))
    # one process: the command with its trial trained in this process (no Ray to start)
    assert run_here(tmp_path, [str(tmp_path / "space.yaml"), "--name", "one"])[0] == 0
    killed: list[int] = []
    killer = threading.Thread(
        target=_kill_a_worker_once_checkpointed, args=(tmp_path / "ray", killed)
    )
    killer.start()
    proc = _sweep(tmp_path, "kill", "--workers-per-trial", "2", "--set", "train.micro_batch=2")
    killer.join()
    assert killed, "no worker was found to kill"
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "sweep kill: 1 finished" in proc.stdout

    (single, client), (run, _) = _trial(tmp_path, "one"), _trial(tmp_path, "kill")
    assert run.info.status == "FINISHED" and run.data.tags[Tag.STATUS] == "finished"
    spread = (Tag.STRATEGY, Tag.WORLD_SIZE)
    assert [run.data.tags[t] for t in spread] == ["ddp", "2"]
    assert [single.data.tags[t] for t in spread] == ["single", "1"]
    assert run.data.metrics[Metric.FINAL_STEPS] == 80
    assert run.data.params == {**single.data.params, "train.micro_batch": "2"}
    val, train = (_history(client, run.info.run_id, k) for k in ("val/loss", "train/loss"))
    assert sorted(val) == list(range(19, 80, 20)) and sorted(train) == list(range(80))
    # every step, the resumed attempt's too: it goes on with the batches it had not trained
    for key, steps in (("train/loss", range(80)), ("val/loss", range(19, 80, 20))):
        a, b = (_history(client, r.info.run_id, key) for r in (single, run))
        for step in steps:
            assert b[step] == pytest.approx(a[step], rel=RTOL), (key, step)
    profiles = [a.path for a in client.list_artifacts(run.info.run_id, PROFILE_FOLDER)]
    expected = [a.path for a in client.list_artifacts(single.info.run_id, PROFILE_FOLDER)]
    assert profiles == expected and profiles
    # two workers of one thread each held their cores for the whole (last) attempt
    final = run.data.metrics
    hours = final[Metric.FINAL_TRIAL_S] * WORKERS / 3600
    assert final[Metric.FINAL_DEVICE_HOURS] == pytest.approx(hours, rel=1e-6)
    # rank 0 alone timed decoding (its result is the record's), and its cache is the model's
    assert final[Metric.FINAL_DECODE_TOKENS_PER_S] > 0
    kv = Metric.FINAL_KV_BYTES_PER_TOKEN
    assert final[kv] == single.data.metrics[kv]
    marks = [
        json.loads(m.read_text())["step"]
        for m in (tmp_path / "ray").glob(f"kill/tune-*/*-train/checkpoint_*/{MARK_NAME}")
    ]
    # the sweep, settled, keeps its trial's newest checkpoint only; the attempts' storage
    # folders (one per attempt's trial id) are what remain of the others
    assert marks == [80], marks
