"""Training: the optimizer's groups, the schedule, and real Lightning runs on tiny configs."""

from __future__ import annotations

import csv
import itertools
import json
import math
import shutil
from pathlib import Path

import pytest

from tests.trainers.conftest import tiny
from trainers.config import TrainConfig
from trainers.config_io import from_dict
from trainers.model.transformer import DeepTransformer
from trainers.training.module import lr_factor, param_groups
from trainers.training.run import resolve_precision, train


def test_schedule_warms_up_then_decays_to_the_floor() -> None:
    """Linear warm-up reaches 1 at warmup_steps; cosine then falls monotonically to the floor."""
    cfg = TrainConfig(max_steps=100, warmup_steps=10, min_lr_ratio=0.1)
    f = [lr_factor(s, cfg) for s in range(101)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0) and f[10] == 1.0
    assert all(a >= b for a, b in itertools.pairwise(f[10:]))
    assert f[100] == pytest.approx(0.1)
    assert f[55] == pytest.approx(0.1 + 0.9 * 0.5)  # cosine midpoint


def test_no_warmup_starts_at_peak() -> None:
    """warmup_steps=0 is allowed and starts at the peak rate."""
    assert lr_factor(0, TrainConfig(warmup_steps=0)) == 1.0


@pytest.mark.parametrize("residual", ["standard", "attnres", "block_attnres"])
def test_weight_decay_only_on_matrices(residual: str) -> None:
    """Every parameter is in exactly one group; norms, gains and queries are never decayed."""
    model = DeepTransformer(tiny(residual=residual, norm="layernorm", bias=True))
    decay, rest = param_groups(model, 0.1)
    assert {id(p) for p in decay["params"]}.isdisjoint(id(p) for p in rest["params"])
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))
    no_decay = {id(p) for p in rest["params"]}
    for name, p in model.named_parameters():
        vector = name.endswith(".bias") or "norm" in name or name.startswith("stream.sites.")
        assert (id(p) in no_decay) == vector, name
    assert rest["weight_decay"] == 0.0


def test_precision_auto_is_32_bit_on_cpu() -> None:
    """On a CPU, 'auto' resolves to 32-bit; an explicit choice is kept."""
    assert resolve_precision(TrainConfig(accelerator="cpu")) == "32-true"
    assert resolve_precision(TrainConfig(precision="bf16-mixed")) == "bf16-mixed"


def _tiny_run(**sections: dict[str, object]) -> dict[str, dict[str, object]]:
    run: dict[str, dict[str, object]] = {
        "model": {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 32},
        "train": {
            "batch_size": 8,
            "max_steps": 30,
            "val_every": 15,
            "val_batches": 2,
            "warmup_steps": 5,
            "lr": 3e-3,
            "accelerator": "cpu",
        },
        "data": {"max_bytes": 1_000_000},
    }
    for k, v in sections.items():
        run[k].update(v)
    return run


def test_training_lowers_the_loss_and_is_deterministic(tmp_path: Path) -> None:
    """A real Lightning fit on stdlib bytes beats the uniform loss ln(256) and repeats exactly."""
    cfg = from_dict(_tiny_run(data={"cache_dir": str(tmp_path / "cache"), "max_bytes": 1_000_000}))
    first, _ = train(cfg, tmp_path / "a", progress=False)
    second, _ = train(cfg, tmp_path / "b", progress=False)
    assert first.val_loss < math.log(256) - 1.0
    assert first.val_loss == second.val_loss
    assert first.val_bpb == pytest.approx(first.val_loss / math.log(2))
    assert first.steps == 30
    assert (tmp_path / "a" / "metrics.csv").exists()


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
def test_attnres_trains_on_the_synthetic_task(tmp_path: Path, residual: str) -> None:
    """AttnRes variants train end to end; pointer chasing reports no bits per byte."""
    cfg = from_dict(
        _tiny_run(
            model={"residual": residual, "attnres_blocks": 2},
            data={"source": "synthetic", "hops": 1, "n_symbols": 8},
        )
    )
    result, model = train(cfg, tmp_path, progress=False)
    assert math.isfinite(result.val_loss) and result.val_bpb is None
    assert model.stream.sites.queries.abs().sum() > 0  # the zero-init queries learned


def test_dilution_profile_is_logged_and_saved(tmp_path: Path) -> None:
    """With diagnostics on, every validation logs the dilution summaries at its step and saves
    the profile as JSON; the last one also as a figure; the result carries the summaries."""
    cfg = from_dict(
        _tiny_run(
            model={"residual": "block_attnres", "attnres_blocks": 2},
            data={"cache_dir": str(tmp_path / "cache")},
            train={"max_steps": 20, "val_every": 10},
        )
    )
    result, _ = train(cfg, tmp_path / "run", progress=False)
    rows = list(csv.DictReader((tmp_path / "run" / "metrics.csv").open()))
    logged = [r for r in rows if r.get("dilution/stream_growth")]
    assert [int(r["step"]) for r in logged] == [9, 19]  # Lightning's 0-based step of each val
    saved = sorted(p.name for p in (tmp_path / "run" / "dilution").iterdir())
    assert saved == ["step-000010.json", "step-000020.json", "step-000020.png"]
    profile = json.loads((tmp_path / "run" / "dilution" / "step-000020.json").read_text())
    assert len(profile["output_norm"]) == 2 and len(profile["depth_weights"]) == 5
    assert set(result.dilution) >= {
        "dilution/stream_growth",
        "dilution/grad_front_load",
        "dilution/depth_entropy",
    }


def test_a_last_step_off_the_validation_grid_is_profiled(tmp_path: Path) -> None:
    """A run whose steps are not a multiple of val_every (a FLOP budget's derived length) ends
    with one more validation, and its dilution profile, gradients included, at the last step
    (it raised inside Lightning's inference mode)."""
    cfg = from_dict(
        _tiny_run(
            model={"residual": "block_attnres", "attnres_blocks": 2},
            data={"cache_dir": str(tmp_path / "cache")},
            train={"max_steps": 13, "val_every": 10},
        )
    )
    result, _ = train(cfg, tmp_path / "run", progress=False)
    saved = sorted(p.name for p in (tmp_path / "run" / "dilution").iterdir())
    assert saved == ["step-000010.json", "step-000013.json", "step-000013.png"]
    profile = json.loads((tmp_path / "run" / "dilution" / "step-000013.json").read_text())
    assert all(g > 0 for g in profile["grad_norm"])
    assert result.steps == 13


def test_diagnostics_can_be_turned_off(tmp_path: Path) -> None:
    """diagnostics_every = 0: no profile, no files, no dilution metrics."""
    cfg = from_dict(
        _tiny_run(
            data={"cache_dir": str(tmp_path / "cache")},
            train={"max_steps": 10, "val_every": 10, "diagnostics_every": 0},
        )
    )
    result, _ = train(cfg, tmp_path / "run", progress=False)
    assert result.dilution == {} and not (tmp_path / "run" / "dilution").exists()


@pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None,
    reason="torch.compile on a CPU needs a C++ compiler (Inductor builds its kernels)",
)
def test_compiled_training_matches_eager_and_keeps_the_diagnostics(tmp_path: Path) -> None:
    """train.compile=true: the same losses as eager (fp32 kernels may reassociate sums, so a
    relative 1e-4, far below any seed-to-seed difference), the same state-dict keys, and the
    dilution profile still sees the depth weights (it runs the eager forward). One graph serves
    the whole run: neither the validations (under no_grad, in eval mode) nor the profiles
    between training steps compile the model again."""
    import torch._dynamo

    run = _tiny_run(
        model={"residual": "block_attnres", "attnres_blocks": 2},
        data={"cache_dir": str(tmp_path / "cache")},
        train={"max_steps": 6, "val_every": 3, "warmup_steps": 2},
    )
    eager, eager_model = train(from_dict(run), tmp_path / "eager", progress=False)
    run["train"]["compile"] = True  # a YAML bool, as configurations wrote it before 'auto'
    torch._dynamo.reset()  # no graph of another test's model on the forward's code
    with torch._dynamo.config.patch(error_on_recompile=True):
        compiled, compiled_model = train(from_dict(run), tmp_path / "compiled", progress=False)
    assert compiled.val_loss == pytest.approx(eager.val_loss, rel=1e-4)
    assert list(compiled_model.state_dict()) == list(eager_model.state_dict())
    for step in (3, 6):
        profile = json.loads(
            (tmp_path / "compiled" / "dilution" / f"step-00000{step}.json").read_text()
        )
        assert len(profile["depth_weights"]) == 5
    assert compiled.dilution["dilution/depth_entropy"] == pytest.approx(
        eager.dilution["dilution/depth_entropy"], rel=1e-3
    )


def test_a_resumed_run_goes_on_with_the_batches_it_had_not_trained(tmp_path: Path) -> None:
    """A run resumed from its step-2 checkpoint trains steps 2-5 on the batches the
    uninterrupted run trains them on, to the same losses bit for bit: the data stream is not
    started again (it was, and a resumed trial trained its first batches twice), nor is the
    epoch ended early (Lightning counts on from step 2 against the loader's length, so a loader
    of the 4 batches left would end it after 2 and start over)."""
    import lightning as L

    run = _tiny_run(
        model={"d_model": 16, "seq_len": 16},
        train={
            "batch_size": 4,
            "max_steps": 6,
            "val_every": 3,
            "warmup_steps": 1,
            "log_every": 1,
            "diagnostics_every": 0,
        },
        data={"source": "synthetic", "hops": 1, "n_symbols": 8},
    )
    ckpt = tmp_path / "step2.ckpt"

    class SaveAtStep2(L.Callback):
        def on_train_batch_end(self, trainer: L.Trainer, *args: object) -> None:
            if trainer.global_step == 2:
                trainer.save_checkpoint(str(ckpt))

    def losses(folder: Path) -> dict[int, float]:
        rows = csv.DictReader((folder / "metrics.csv").open())
        return {int(r["step"]): float(r["train/loss"]) for r in rows if r.get("train/loss")}

    cfg = from_dict(run)
    train(cfg, tmp_path / "whole", callbacks=[SaveAtStep2()], progress=False)
    resumed, _ = train(cfg, tmp_path / "resumed", progress=False, ckpt_path=ckpt)
    whole = losses(tmp_path / "whole")
    assert sorted(whole) == list(range(6)) and resumed.timed_steps == 4
    assert losses(tmp_path / "resumed") == {k: whole[k] for k in (2, 3, 4, 5)}
