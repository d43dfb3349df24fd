"""A global batch in micro-batches (``train.micro_batch``, ``trainers.training.accumulate``): the
same gradient and the same optimizer step as the whole batch at once, for every wiring."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.config import (
    EXECUTION_FIELDS,
    RunConfig,
    TrainConfig,
    flatten,
    flatten_read,
    micro_steps,
)
from trainers.config_io import build_config, from_dict
from trainers.measure.memory_fit import CPU_HEADROOM
from trainers.measure.memory_plan import memory_plan
from trainers.model.transformer import DeepTransformer
from trainers.training.accumulate import accumulate_gradients, micro_chunks
from trainers.training.run import train

# float64 round-off: a gradient element is a sum over the batch's 72 tokens, and accumulating
# reorders that sum into k partial sums, each rounding at most once more (relative 2^-53 each);
# the chain of a few dozen operations before it adds as many roundings again. That is below
# 1e-13 of the gradient's scale; 1e-10 leaves a thousandfold margin and is still far below what
# any real fault gives (a missing 1/k is a factor k, a dropped micro-batch or a buffer not reset
# between backwards an O(1) change).
RTOL = 1e-10


def _perturbed(cfg: object) -> DeepTransformer:
    """A float64 model whose zero-initialized parts (AttnRes queries, ReZero gains, ...) are
    moved off zero, so every path carries gradient."""
    model = DeepTransformer(cfg).double()  # type: ignore[arg-type]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model


def _gradients(model: DeepTransformer, x: torch.Tensor, y: torch.Tensor, micro: int) -> dict:
    model.zero_grad(set_to_none=True)
    accumulate_gradients(model, x, y, micro)
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for name, g in want.items():
        scale = g.abs().max().item() or 1.0
        torch.testing.assert_close(got[name], g, rtol=RTOL, atol=RTOL * scale, msg=name)


@pytest.mark.parametrize("micro", [1, 2, 3])
def test_accumulated_gradient_is_the_whole_batch_gradient(
    wiring: dict[str, str], micro: int
) -> None:
    """Six sequences in micro-batches of 1, 2 or 3 give the gradient of all six at once."""
    model = _perturbed(tiny(n_layers=3, **wiring))
    x, y = torch.randint(0, 32, (6, 12)), torch.randint(0, 32, (6, 12))
    _assert_same(_gradients(model, x, y, micro), _gradients(model, x, y, 0))


def test_workers_shares_in_micro_batches_average_to_the_batch_gradient(
    wiring: dict[str, str],
) -> None:
    """What data parallelism computes, per wiring: two workers each accumulate their share
    (every other sequence, as the data module deals them) in micro-batches of 1, and the
    average of their gradients (DDP's all-reduce, FSDP's reduce-scatter) is the whole batch's.
    The real two-process runs (``tests/nas/test_data_parallel.py``, ``test_fsdp.py``) check
    the collectives themselves."""
    model = _perturbed(tiny(n_layers=3, **wiring))
    x, y = torch.randint(0, 32, (4, 12)), torch.randint(0, 32, (4, 12))
    shares = [_gradients(model, x[r::2], y[r::2], 1) for r in range(2)]
    mean = {n: (shares[0][n] + shares[1][n]) / 2 for n in shares[0]}
    _assert_same(mean, _gradients(model, x, y, 0))


@pytest.mark.parametrize("residual", ["attnres", "block_attnres"])
@pytest.mark.parametrize("fast", [True, False], ids=["buffered", "plain"])
def test_both_attnres_paths_accumulate_exactly(residual: str, fast: bool) -> None:
    """The buffered two-phase path (hand-written backward, buffers reset by each backward) and
    the plain autograd path both accumulate to the whole batch's gradient, at a depth where
    Block AttnRes holds several blocks."""
    model = _perturbed(tiny(n_layers=6, residual=residual, attnres_blocks=3))
    assert model.stream.fast  # the paper's design takes the buffered path by default
    model.stream.fast = fast
    x, y = torch.randint(0, 32, (4, 12)), torch.randint(0, 32, (4, 12))
    _assert_same(_gradients(model, x, y, 1), _gradients(model, x, y, 0))


def test_accumulated_loss_is_the_batch_mean() -> None:
    """The returned loss is the whole batch's mean loss, whatever the micro-batch."""
    model = _perturbed(tiny())
    x, y = torch.randint(0, 32, (6, 12)), torch.randint(0, 32, (6, 12))
    whole = accumulate_gradients(model, x, y, 0)
    assert accumulate_gradients(model, x, y, 2).item() == pytest.approx(whole.item(), rel=1e-12)


def test_chunks_are_consecutive_and_cover_the_batch() -> None:
    """Micro-batches are the batch's sequences in order, each ``micro_batch`` long."""
    x = torch.arange(12).view(6, 2)
    chunks = micro_chunks(x, x + 100, 2)
    assert [c[0][:, 0].tolist() for c in chunks] == [[0, 2], [4, 6], [8, 10]]
    assert torch.equal(torch.cat([c[1] for c in chunks]), x + 100)
    assert len(micro_chunks(x, x, 0)) == 1 and len(micro_chunks(x, x, 6)) == 1


def _config(residual: str, micro: int | str) -> RunConfig:
    run = {
        "model": {
            "residual": residual,
            "d_model": 16,
            "n_heads": 2,
            "n_layers": 4,
            "seq_len": 16,
            "attnres_blocks": 2,
        },
        "train": {
            "batch_size": 8,
            "micro_batch": micro,
            "max_steps": 3,
            "val_every": 3,
            "val_batches": 1,
            "warmup_steps": 1,
            "precision": "64-true",
            "accelerator": "cpu",
            "diagnostics_every": 0,
        },
        "data": {"source": "synthetic", "hops": 1, "n_symbols": 8},
    }
    return from_dict(run)


def _fit(
    tmp_path: Path, residual: str, micro: int | str, device_bytes: int | None = None
) -> tuple[object, DeepTransformer]:
    out = tmp_path / f"{residual}-{micro}"
    cfg = _config(residual, micro)
    result, model = train(cfg, out, progress=False, device_bytes=device_bytes)
    return result, model


@pytest.mark.parametrize("residual", ["standard", "block_attnres", "mhc"])
def test_training_in_micro_batches_reaches_the_same_parameters(
    tmp_path: Path, residual: str
) -> None:
    """A real fit (float64, gradient clipping and the schedule on) of three optimizer steps
    over a global batch of 8 ends at the same parameters in micro-batches of 2 as at once, and
    counts the same steps and FLOPs: the micro-batch is how a step runs, not what it trains.
    AdamW's update divides by the gradient's running rms (about |g| at these steps), which
    amplifies a relative gradient error by at most lr / eps = 3e5 on near-zero entries: a
    parameter error below 1e-8 is well inside that."""
    whole, a = _fit(tmp_path, residual, 0)
    micro, b = _fit(tmp_path, residual, 2)
    assert micro.steps == whole.steps == 3  # type: ignore[attr-defined]
    assert micro.train_flops == whole.train_flops  # type: ignore[attr-defined]
    assert micro.val_loss == pytest.approx(whole.val_loss, rel=1e-10)  # type: ignore[attr-defined]
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(q, p, rtol=1e-8, atol=1e-10, msg=name)


def test_auto_trains_the_largest_micro_batch_its_device_fits(tmp_path: Path) -> None:
    """Told its device lends just what micro-batch 2 needs (the plan's estimate over the CPU's
    90%), an 'auto' trial trains in micro-batches of 2, not 4, records them, and ends at the
    whole batch's parameters, as any micro-batch does."""
    two = _config("standard", 2)
    device = math.ceil(memory_plan(two, gpu=False).total / (1 - CPU_HEADROOM.reserve))
    assert memory_plan(_config("standard", 4), gpu=False).total > device  # 4 does not fit
    whole, a = _fit(tmp_path, "standard", 0)
    auto, b = _fit(tmp_path, "standard", "auto", device_bytes=device)
    assert (auto.micro_batch, auto.checkpointing) == (2, "none")  # type: ignore[attr-defined]
    assert whole.micro_batch == 8  # type: ignore[attr-defined]  # the whole share, as a number
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(q, p, rtol=1e-8, atol=1e-10, msg=name)


def test_auto_is_a_micro_batch_word() -> None:
    """'auto' reads from a --set and from YAML; other words, a bool or a float are refused
    naming the field and what it takes."""
    assert build_config(overrides=["train.micro_batch=auto"]).train.micro_batch == "auto"
    assert build_config(overrides=["train.micro_batch=4"]).train.micro_batch == 4
    assert from_dict({"train": {"micro_batch": "auto"}}).train.micro_batch == "auto"
    for bad in ("AUTO", "some", "1.5"):
        with pytest.raises(ValueError, match=r"train\.micro_batch: .*allowed: 'auto'"):
            build_config(overrides=[f"train.micro_batch={bad}"])
    for value in (True, 2.0):
        with pytest.raises(ValueError, match=r"expected int or one of auto"):
            from_dict({"train": {"micro_batch": value}})


def test_micro_batch_must_divide_the_batch() -> None:
    """A micro-batch larger than the batch, not dividing it or negative is refused naming the
    field and what is allowed; 0 and every divisor are accepted."""
    for bad, words in [(32, "larger than"), (3, "does not divide"), (-1, "negative")]:
        with pytest.raises(ValueError, match=rf"train\.micro_batch: {bad} .*{words}"):
            TrainConfig(batch_size=16, micro_batch=bad)
    for good in (0, 1, 2, 4, 8, 16):
        TrainConfig(batch_size=16, micro_batch=good)


def test_workers_take_whole_micro_batches() -> None:
    """Data-parallel workers each accumulate their share in whole micro-batches: 16 over 2
    workers in micro-batches of 4 is 2 per worker; of 8 over 4 workers (a share of 4) with
    micro-batches of 8 is refused, naming the share."""
    assert micro_steps(TrainConfig(batch_size=16, micro_batch=4), 2) == 2
    assert micro_steps(TrainConfig(batch_size=16), 2) == 1
    with pytest.raises(ValueError, match=r"does not divide each worker's share \(4\)"):
        micro_steps(TrainConfig(batch_size=16, micro_batch=8), 4)
    with pytest.raises(ValueError, match="does not split evenly over 3 workers"):
        micro_steps(TrainConfig(batch_size=16), 3)


def test_execution_fields_are_recorded_but_not_compared() -> None:
    """The micro-batch and checkpointing are in the record (``flatten``) but not in what two
    configurations must agree on to be one trial (``flatten_read``)."""
    base = RunConfig()
    other = dataclasses.replace(
        base, train=dataclasses.replace(base.train, micro_batch=4, checkpointing="sublayer")
    )
    assert flatten(other).keys() >= EXECUTION_FIELDS
    assert flatten(other) != flatten(base)
    assert flatten_read(other) == flatten_read(base)
