"""Sharded data-parallel training (``nas.trial.data_parallel.Workers(strategy="fsdp")``: FSDP2, each
Transformer block one unit): two gloo workers on the CPU train what one process trains on the
same global batch and give the result one process gives; a checkpoint resumes across strategies
(one process's under FSDP, FSDP's in one process) as it resumes under its own.

Why the tolerance: the runs differ only in the order of float sums, as DDP's do
(``tests/nas/test_data_parallel``: a float32 sum of n terms reorders to about log2(n)·eps
relative, under 1e-6 for these 8·16 tokens, and Adam carries a relative gradient difference
into the update unchanged). Sharding adds two reorderings of the same kind: each micro-batch's
gradient is reduce-scattered and the shards summed over micro-batches (one process sums the
micro-batches first), and the clipped norm is a sum of per-shard squared norms; each is again
a relative difference of a few eps. ``RTOL`` = 1e-5 keeps DDP's margin; a lost micro-batch,
a rank's shard left out, or a norm clipped per shard instead of globally moves the loss by
1e-3 or more at this clip (0.05, far below the gradient's norm, so every step is clipped).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nas.trial.checkpoints import CKPT_NAME, MARK_NAME
from nas.trial.data_parallel import Workers, check_strategy
from tests.ray_cluster import shared_env
from trainers.config import RunConfig
from trainers.config_io import from_dict

RTOL = 1e-5
ROOT = Path(__file__).resolve().parents[2]


def _cfg() -> RunConfig:
    """Two micro-batches per worker's share and a clip that every step reaches: the sharded
    paths of accumulation and clipping both act."""
    return from_dict(
        {
            "model": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 16, "dropout": 0.0},
            "train": {
                "batch_size": 8,
                "micro_batch": 2,
                "grad_clip": 0.05,
                "max_steps": 6,
                "val_every": 3,
                "val_batches": 2,
                "warmup_steps": 2,
                "lr": 1e-3,
                "log_every": 1,
                "accelerator": "cpu",
                "diagnostics_every": 1,
                "diagnostics_batch": 2,
            },
            "data": {"source": "synthetic", "hops": 1, "n_symbols": 8},
        }
    )


def test_fsdp_needs_two_workers_and_strategies_are_named() -> None:
    """Sharding over one worker, or an unknown strategy, is refused in one line naming the
    choices; DDP takes any count."""
    with pytest.raises(ValueError, match=r"strategy fsdp: shards .* at least 2 \(not 1\)"):
        Workers(1, strategy="fsdp")
    with pytest.raises(ValueError, match="--strategy zero3: unknown; choose from ddp, fsdp"):
        check_strategy("zero3", 2, "--strategy")
    assert Workers(2, strategy="fsdp").strategy == "fsdp" and Workers(1).strategy == "ddp"


@pytest.mark.parametrize("tied", [True, False])
def test_an_optimizer_state_numbered_either_way_loads_onto_its_parameters(tied: bool) -> None:
    """A whole checkpoint's Adam state, numbered in the optimizer groups' order (one process's
    and DDP's: ``Optimizer.state_dict``) or in the model's (Lightning's FSDP save, by the torch
    call it makes), puts back on every parameter, a tied embedding's too, exactly the state
    it had: the map by name (``named_optimizer_state``) that FSDP2 resumes by."""
    from dataclasses import replace

    import torch
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
        set_optimizer_state_dict,
    )
    from torch.distributed.fsdp import FullyShardedDataParallel, OptimStateKeyType

    from nas.trial.fsdp_strategy import named_optimizer_state
    from trainers.training.module import LanguageModelModule

    cfg = _cfg()
    cfg = replace(cfg, model=replace(cfg.model, tie_embeddings=tied))

    def fresh() -> tuple[Any, Any]:
        module = LanguageModelModule(cfg)
        return module, module.configure_optimizers()["optimizer"]

    torch.manual_seed(0)
    module, optimizer = fresh()
    for _ in range(2):  # moments that differ from parameter to parameter
        for p in module.parameters():
            p.grad = torch.randn_like(p)
        optimizer.step()
    had = {name: optimizer.state[p] for name, p in module.named_parameters()}
    by_groups = optimizer.state_dict()
    by_model = FullyShardedDataParallel.rekey_optim_state_dict(
        get_optimizer_state_dict(module, optimizer), OptimStateKeyType.PARAM_ID, module
    )
    numbers = [[g["params"] for g in s["param_groups"]] for s in (by_groups, by_model)]
    assert numbers[0] != numbers[1]  # the two numberings differ for this model
    for saved in (by_groups, by_model):
        module, optimizer = fresh()
        named = named_optimizer_state(saved, module, optimizer)
        options = StateDictOptions(full_state_dict=True)
        set_optimizer_state_dict(module, optimizer, optim_state_dict=named, options=options)
        for name, p in module.named_parameters():
            for key, value in had[name].items():
                assert torch.equal(optimizer.state[p][key], value), (name, key)


def _logged(out: Path) -> dict[str, dict[int, float]]:
    """Rank 0's CSV log: metric -> step -> value."""
    logged: dict[str, dict[int, float]] = {}
    with (out / "metrics.csv").open() as f:
        for row in csv.DictReader(f):
            for key, value in row.items():
                if key not in ("step", "epoch") and value:
                    logged.setdefault(key, {})[int(row["step"])] = float(value)
    return logged


def _summary(result: Any, out: Path) -> dict[str, Any]:
    return {
        "logged": _logged(out),
        "val_loss": result.val_loss,
        "params": result.params,
        "steps": result.steps,
        "dilution": sorted(result.dilution),
        "decode": result.decode is not None,
        "devices": None if result.cost is None else result.cost.devices,
        "profiles": sorted(p.name for p in (out / "dilution").glob("*")),
    }


def _checkpoint_at(storage: Path, step: int) -> Path:
    for mark in storage.glob(f"checkpoint_*/{MARK_NAME}"):
        if json.loads(mark.read_text())["step"] == step:
            return mark.parent / CKPT_NAME
    raise AssertionError(f"no checkpoint of step {step} under {storage}")


def fits(folder: str) -> None:
    """The subprocess's part (it joins the session's shared Ray): one process, keeping its
    step-3 checkpoint as a sweep trial does; two FSDP workers; the workers again, resumed from
    the one process's checkpoint; and one process resumed from the workers' step-3 checkpoint;
    each summarized into ``folder/fits.json``."""
    import lightning as L
    import ray

    from nas.trial.data_parallel import train_data_parallel
    from nas.trial.lightning_hooks import save_marked
    from trainers.training.run import train

    tmp, cfg, workers = Path(folder), _cfg(), Workers(2, strategy="fsdp")

    class KeepStep3(L.Callback):
        def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
            if trainer.global_step == 3:
                save_marked(trainer, tmp / "one-ckpt", "one")

    (tmp / "one-ckpt").mkdir(parents=True)
    one, _ = train(cfg, tmp / "one", progress=False, callbacks=[KeepStep3()])
    ray.init()
    two = train_data_parallel(cfg, tmp / "two", workers)
    one_ckpt = tmp / "one-ckpt" / CKPT_NAME
    resumed = train_data_parallel(cfg, tmp / "resumed", workers, ckpt_path=one_ckpt)
    two_ckpt = _checkpoint_at(tmp / "two" / "ray-train" / "train", 3)
    back, _ = train(cfg, tmp / "back", progress=False, ckpt_path=two_ckpt)
    summaries = {
        name: _summary(result, tmp / name)
        for name, result in (("one", one), ("two", two), ("resumed", resumed), ("back", back))
    }
    (tmp / "fits.json").write_text(json.dumps(summaries))


@pytest.mark.slow
def test_two_sharded_workers_train_what_one_process_does_and_resume_across(tmp_path: Path) -> None:
    """Two FSDP workers, micro-batched and clipped: every step's training loss and each
    validation equal one process's within RTOL; the result has its shape (the same parameter
    count, dilution summaries and profiles, gathered from the shards onto rank 0; a decode
    cost; both workers' cores); and across strategies, the workers resumed from the one
    process's step-3 checkpoint, and one process resumed from the workers' (saved whole by
    rank 0), train steps 3-5 as the uninterrupted process does, on the same batches. A state
    of Adam's put on the wrong parameter fails the load (another shape) or moves step 4's loss
    by far more than RTOL (the same shape); one left out moves it too (Adam's first step from
    nothing is lr·sign(g), not a running average's)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", **shared_env()}
    code = f"from tests.nas.test_fsdp import fits; fits({str(tmp_path)!r})"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    fit = json.loads((tmp_path / "fits.json").read_text())
    one, two = fit["one"], fit["two"]
    assert set(two["logged"]) == set(one["logged"])  # every metric one process logs
    for key in ("train/loss", "val/loss"):
        assert sorted(two["logged"][key]) == sorted(one["logged"][key]), key
        for step, value in one["logged"][key].items():
            assert two["logged"][key][step] == pytest.approx(value, rel=RTOL), (key, step)
    for key in ("params", "steps", "dilution", "decode", "profiles"):
        assert two[key] == one[key], key
    assert two["val_loss"] == pytest.approx(one["val_loss"], rel=RTOL)
    assert two["devices"] == 2  # two workers of one core each (one process had both cores)
    # resumed at step 3, across strategies: each trains steps 3-5 as the one process does
    for name in ("resumed", "back"):
        across = fit[name]
        assert sorted(across["logged"]["train/loss"]) == ["3", "4", "5"], name
        for step in ("3", "4", "5"):
            value = one["logged"]["train/loss"][step]
            assert across["logged"]["train/loss"][step] == pytest.approx(value, rel=RTOL), (
                name,
                step,
            )
        assert across["val_loss"] == pytest.approx(one["val_loss"], rel=RTOL), name
        assert across["steps"] == 6, name
