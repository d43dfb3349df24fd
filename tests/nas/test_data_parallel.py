"""Data-parallel training (``nas.data_parallel``): two gloo workers on the CPU train what one
process trains on the same global batch.

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
import csv
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from nas.data_parallel import check_split, train_data_parallel
from trainers.config import RunConfig
from trainers.config_io import from_dict
from trainers.run import train

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


def _curve(out: Path, key: str) -> dict[int, float]:
    """step -> value of ``key`` from the CSV logger's metrics.csv."""
    with (out / "metrics.csv").open() as f:
        return {int(row["step"]): float(row[key]) for row in csv.DictReader(f) if row.get(key)}


def test_the_global_batch_must_split_evenly() -> None:
    """A batch that does not divide over the workers, or no workers, is refused naming the key."""
    with pytest.raises(ValueError, match=r"train\.batch_size: 6 does not split evenly over 4"):
        check_split(_cfg(batch_size=6), 4)
    with pytest.raises(ValueError, match="workers: 0"):
        check_split(_cfg(), 0)
    check_split(_cfg(), WORKERS)


@pytest.fixture
def ray_cluster() -> Iterator[str]:
    """A local 2-CPU Ray started by this process (its driver), and its temp folder, which
    names every process of it; stopped after the test."""
    import ray

    # Ray's Unix sockets live in the temp folder, whose path must stay short (108 bytes).
    root = tempfile.mkdtemp(prefix="nas-ray-dp-", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=root)
    try:
        yield root
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_follow_the_single_process_loss_curve(tmp_path: Path, ray_cluster: str) -> None:
    """Two gloo workers on batch B/2 each log the loss curve of one process on batch B, up to
    float reordering (RTOL), and validate to the same loss."""
    cfg = _cfg()
    single, _ = train(cfg, tmp_path / "single", progress=False)
    parallel = train_data_parallel(cfg, tmp_path / "parallel", WORKERS)
    one, two = (
        _curve(tmp_path / "single", "train/loss"),
        _curve(tmp_path / "parallel", "train/loss"),
    )
    assert len(one) == cfg.train.max_steps and one.keys() == two.keys()
    for step in one:
        assert two[step] == pytest.approx(one[step], rel=RTOL), step
    assert parallel.steps == single.steps == cfg.train.max_steps
    assert parallel.val_loss == pytest.approx(single.val_loss, rel=RTOL)
    assert math.isfinite(parallel.val_loss)
    assert parallel.cost is not None and single.cost is not None
    # Ray gives each worker one CPU, so one thread: the run's devices are its workers' threads
    assert parallel.cost.devices == WORKERS


def _kill_one_worker_once_checkpointed(root: str, train_dir: Path, killed: list[int]) -> None:
    """Wait until Ray Train's controller has registered a checkpoint (its snapshot file; a
    checkpoint on storage whose report the controller has not yet collected dies with the
    worker), then SIGKILL one Ray Train worker of the cluster whose temp folder is ``root``."""
    from tests.ray_cluster import pids_naming

    deadline = time.monotonic() + 120
    snapshot = train_dir / "checkpoint_manager_snapshot.json"
    while not snapshot.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids_naming(root):
        with contextlib.suppress(OSError):
            if b"RayTrainWorker" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return


def test_a_killed_worker_resumes_the_run_from_its_checkpoint(
    tmp_path: Path, ray_cluster: str
) -> None:
    """SIGKILL of one worker once a checkpoint is registered: Ray Train starts the workers again
    from the newest registered checkpoint and the run finishes; the first validation is
    checkpointed once (a restart from scratch would save it twice; those saved but not yet
    registered at the kill are saved again)."""
    cfg = _cfg(max_steps=200, val_every=20)
    killed: list[int] = []
    killer = threading.Thread(
        target=_kill_one_worker_once_checkpointed,
        args=(ray_cluster, tmp_path / "ray-train" / "train", killed),
    )
    killer.start()
    result = train_data_parallel(cfg, tmp_path, WORKERS, max_failures=1)
    killer.join()
    assert killed, "no worker was found to kill"
    assert result.steps == 200 and math.isfinite(result.val_loss)
    steps = [
        torch.load(c, map_location="cpu", weights_only=False)["global_step"]
        for c in (tmp_path / "ray-train" / "train").glob("checkpoint_*/last.ckpt")
    ]
    assert steps.count(20) == 1 and set(steps) == set(range(20, 201, 20)), sorted(steps)
