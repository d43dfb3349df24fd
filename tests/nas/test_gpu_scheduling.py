"""GPU scheduling without a GPU: a Ray cluster of its own whose node declares two logical GPUs
and four CPUs (``ray start --num-gpus 2``; not the session's shared cluster, where Tune's
default of one GPU per trial would then change every other sweep), and a sweep of four trials
at ``--gpus-per-trial 0.5 --cpus-per-trial 1``. Ray assigns each trial half of GPU 0 or 1 and
names it in ``CUDA_VISIBLE_DEVICES``; no CUDA device exists, so each trial still trains on the
CPU: it chooses its device from what torch sees, never from what Ray assigned."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from record.schema import Metric, Tag
from tests.ray_cluster import BIN, free_port, node_args, pids_naming, stop


@pytest.fixture
def gpu_cluster() -> Iterator[tuple[str, dict[str, str]]]:
    """(Ray address, environment with its token) of a one-node cluster with 4 CPUs and 2
    logical GPUs, stopped by process id afterwards."""
    # Ray's Unix sockets live in the temp folder, whose path must stay short (108 bytes).
    root = Path(tempfile.mkdtemp(prefix="nas-ray-gpu-", dir="/tmp"))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    env.pop("CUDA_VISIBLE_DEVICES", None)
    port = free_port()
    try:
        head = [str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1",
                f"--port={port}", "--include-dashboard=false",
                *node_args("head", root, cpus=4, gpus=2)]  # fmt: skip
        subprocess.run(head, env=env, check=True, capture_output=True, timeout=180)
        yield f"127.0.0.1:{port}", env
    finally:
        stop(pids_naming(str(root)))
        shutil.rmtree(root, ignore_errors=True)


def test_fractional_logical_gpus_run_four_trials_at_once_on_the_cpu(
    gpu_cluster: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    """``smoke`` over two seeds (four trials) at 0.5 GPU and 1 CPU per trial: all four trial
    functions ran at once, each held one Ray GPU id with two trials per id,
    CUDA_VISIBLE_DEVICES named that id, and each trained on the CPU."""
    from mlflow.tracking import MlflowClient

    address, env = gpu_cluster
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cmd = [sys.executable, "-m", "nas.cli", "sweep", "smoke", "--seeds", "0,1",
           "--address", address, "--concurrency", "4", "--gpus-per-trial", "0.5",
           "--cpus-per-trial", "1", "--tracking-uri", uri,
           "--storage-path", str(tmp_path / "ray")]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("smoke")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    trials = [r for r in runs if r.data.tags.get(Tag.ROLE) == "trial"]
    assert len(trials) == 4
    tags = [r.data.tags for r in trials]
    assert {t[Tag.DEVICE] for t in tags} == {"cpu"}
    assert all(t[Tag.CUDA_VISIBLE_DEVICES] == t[Tag.RAY_GPU_IDS] for t in tags), tags
    assert Counter(t[Tag.RAY_GPU_IDS] for t in tags) == {"0": 2, "1": 2}
    # --cpus-per-trial 1 reached each trial as its torch threads (Ray sets OMP_NUM_THREADS)
    assert all(t[Tag.HARDWARE].endswith(", 1 threads") for t in tags), tags
    # A trial holds its resources from its function's start (its run's end less final/trial_s,
    # which is measured a little before the run ends: a start estimated late, so the check is
    # conservative) to its run's end. Ray starts the four together (measured: within 0.5 s),
    # and each then spends seconds importing, opening its run and training before it ends.
    ends = [r.info.end_time / 1000 for r in trials]
    starts = [
        end - r.data.metrics[Metric.FINAL_TRIAL_S] for r, end in zip(trials, ends, strict=True)
    ]
    assert max(starts) < min(ends), (starts, ends)
