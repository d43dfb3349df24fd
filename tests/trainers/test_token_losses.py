"""Token-weighted losses (``trainers.training.accumulate``): a training step's loss and gradient,
and a validation pass's loss, are the mean over every counted target however the targets are cut
into micro-batches, batches and data-parallel ranks, with ignored targets spread unevenly
(``tests.trainers.token_cases``), in float64."""

from __future__ import annotations

import csv
from pathlib import Path

import lightning as L
import pytest
import torch
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, TensorDataset

from record.schema import Metric
from tests.trainers.token_cases import (
    CFG,
    STEP_KEEP,
    VAL_KEEP,
    UnevenSource,
    lightning_val_worker,
    perturbed_model,
    rank_worker,
    token_mean,
    tolerance,
    uneven_batch,
    uneven_set,
)
from trainers.config import RunConfig, TrainConfig
from trainers.model.loss import lm_loss
from trainers.model.transformer import DeepTransformer
from trainers.training.accumulate import accumulate_gradients, micro_chunks
from trainers.training.module import LanguageModelModule
from trainers.training.run import train

STEP_TOL = tolerance(CFG, targets=CFG.seq_len * len(STEP_KEEP))
VAL_TOL = tolerance(CFG, targets=CFG.seq_len * len(VAL_KEEP))


def _whole_batch(model: DeepTransformer, x: torch.Tensor, y: torch.Tensor) -> tuple[float, dict]:
    """The whole batch's mean loss and its gradient, in one forward and one backward."""
    model.zero_grad(set_to_none=True)
    loss = lm_loss(model(x), y)
    loss.backward()
    return loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}


def _assert_close(got: dict, want: dict, tol: float) -> None:
    """Every gradient within ``tol`` of its largest element."""
    assert got.keys() == want.keys()
    for name, g in want.items():
        worst = (got[name] - g).abs().max().item()
        assert worst <= tol * g.abs().max().item(), f"{name}: {worst:.3g}"


def test_these_masks_tell_a_mean_of_means_from_the_token_mean() -> None:
    """The cases have teeth: on them, the mean of micro-batch means (the rule this replaced)
    misses the whole batch's mean by far more than the tolerance, at micro-batches of 2 and 3."""
    model = perturbed_model()
    x, y = uneven_batch(STEP_KEEP, seed=1)
    whole, _ = _whole_batch(model, x, y)
    for micro in (2, 3):
        with torch.no_grad():
            means = [lm_loss(model(cx), cy) for cx, cy in micro_chunks(x, y, micro)]
        assert abs(torch.stack(means).mean().item() - whole) > 1e3 * STEP_TOL * whole


@pytest.mark.parametrize("micro", [1, 2, 3])
def test_a_step_in_micro_batches_is_the_whole_batch_token_mean(micro: int) -> None:
    """Six sequences keeping 1, 0, 0, 12, 3 and 12 of their 12 targets, in micro-batches of 1
    (two hold no target), 2 or 3: the returned loss and every parameter's gradient are the
    whole batch's mean loss and its gradient."""
    model = perturbed_model()
    x, y = uneven_batch(STEP_KEEP, seed=1)
    want_loss, want = _whole_batch(model, x, y)
    model.zero_grad(set_to_none=True)
    loss = accumulate_gradients(model, x, y, micro).item()
    assert abs(loss - want_loss) <= STEP_TOL * want_loss
    _assert_close({n: p.grad for n, p in model.named_parameters()}, want, STEP_TOL)


def test_two_ranks_average_to_the_whole_batch_token_mean(tmp_path: Path) -> None:
    """Two real gloo ranks under DDP, holding 4 and 24 of the batch's counted targets, each
    accumulating its share in micro-batches of 1: DDP's averaged gradient is the whole batch's,
    the ranks' losses averaged (as the module logs them) are its mean loss, and the validation
    pass over both ranks' shares (6 and 5 sequences in batches of 2) is the mean over all its
    counted targets."""
    out = tmp_path / "rank0.pt"
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(rank_worker, args=(2, init, str(out)), nprocs=2, join=True)
    got = torch.load(out)
    model = perturbed_model()
    want_loss, want = _whole_batch(model, *uneven_batch(STEP_KEEP, seed=1))
    assert abs(got["logged"].item() - want_loss) <= STEP_TOL * want_loss
    # rank 0's part alone (4 of the 28 targets) is not the mean: only the ranks' average is
    assert abs(got["part"].item() - want_loss) > 1e3 * STEP_TOL * want_loss
    _assert_close(got["grads"], want, STEP_TOL)
    with torch.no_grad():
        vx, vy = uneven_batch(VAL_KEEP, seed=2)
        val = token_mean(model(vx), vy).item()
    assert abs(got["val"].item() - val) <= VAL_TOL * val


def _validation_loss(model: DeepTransformer, micro: int, batches: DataLoader) -> float:
    """The module's validation loss over ``batches`` through a real Lightning ``validate``,
    with ``train.micro_batch`` = ``micro`` and ``model``'s weights."""
    train_cfg = TrainConfig(batch_size=4, micro_batch=micro, precision="64-true", accelerator="cpu")
    module = LanguageModelModule(RunConfig(model=CFG, train=train_cfg))
    module.model.double().load_state_dict(model.state_dict())  # float64 first: no float32 copy
    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        precision="64-true",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(module, dataloaders=batches, verbose=False)
    return float(trainer.callback_metrics[Metric.VAL_LOSS])


def test_validation_loss_is_the_pass_token_mean_at_every_micro_batch() -> None:
    """Eleven sequences in batches of 4 (the last holds 3) keeping 0 to 12 targets each: the
    validation loss is the same at micro-batches of 1, 2 (the last batch cut 2 + 1) and the
    whole batch, and is the sum of every counted target's cross-entropy over their count. The
    rule it replaced (a batch-size-weighted mean of micro-batch means) misses it here."""
    model = perturbed_model()
    vx, vy = uneven_batch(VAL_KEEP, seed=2)
    batches = DataLoader(TensorDataset(vx, vy), batch_size=4)
    with torch.no_grad():
        want = token_mean(model(vx), vy).item()
        sizes = [len(bx) for bx, _ in batches]
        old = sum(lm_loss(model(bx), by).item() * len(bx) for bx, by in batches) / sum(sizes)
    assert sizes == [4, 4, 3]
    assert abs(old - want) > 1e3 * VAL_TOL * want
    for micro in (1, 2, 0):
        got = _validation_loss(model, micro, batches)
        assert abs(got - want) <= VAL_TOL * want, f"micro_batch {micro}: {got} != {want}"


def _fit_config(micro: int) -> RunConfig:
    t = TrainConfig(
        batch_size=4,
        micro_batch=micro,
        max_steps=3,
        val_every=3,
        val_batches=2,
        warmup_steps=1,
        log_every=1,
        precision="64-true",
        accelerator="cpu",
        diagnostics_every=0,
    )
    return RunConfig(model=CFG, train=t)


def _logged_train_losses(out: Path) -> list[float]:
    with (out / "metrics.csv").open() as f:
        return [float(r[Metric.TRAIN_LOSS]) for r in csv.DictReader(f) if r[Metric.TRAIN_LOSS]]


def test_a_fit_on_uneven_masks_is_the_same_in_micro_batches(tmp_path: Path) -> None:
    """A real fit (float64, clipping and the schedule on) of three steps over batches of 4 whose
    sequences keep 0 to 12 targets: in micro-batches of 2 it logs the same training losses,
    ends at the same parameters and the same validation loss (7 sequences: the last batch cut
    2 + 1) as at once; its first logged loss is the first batch's token mean at the initial
    weights, its validation loss the pass's at the final ones. Parameters: within AdamW's
    amplification of gradient round-off (``test_micro_batch``'s fit test says why)."""
    source = UnevenSource()
    whole, a = train(_fit_config(0), tmp_path / "whole", source, progress=False)
    micro, b = train(_fit_config(2), tmp_path / "micro", source, progress=False)
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(q, p, rtol=1e-8, atol=1e-10, msg=name)
    losses, micro_losses = (_logged_train_losses(tmp_path / r) for r in ("whole", "micro"))
    assert len(losses) == len(micro_losses) == 3
    # the first step's loss is taken at the same weights: round-off alone; later ones and the
    # validation at weights that may differ within the parameters' tolerance, so held to it
    assert micro_losses[0] == pytest.approx(losses[0], rel=STEP_TOL)
    assert micro_losses[1:] == pytest.approx(losses[1:], rel=1e-8)
    assert micro.val_loss == pytest.approx(whole.val_loss, rel=1e-8)
    with torch.no_grad():
        L.seed_everything(0, verbose=False)  # train()'s seed, then its model's init
        first = LanguageModelModule(_fit_config(0)).model.double()
        x, y = (t[:4] for t in uneven_set(12, seed=0).tensors)  # the 3 steps' first batch
        assert losses[0] == pytest.approx(token_mean(first(x), y).item(), rel=STEP_TOL)
        vx, vy = uneven_set(7, seed=1_000).tensors
        assert whole.val_loss == pytest.approx(token_mean(a(vx), vy).item(), rel=VAL_TOL)


def test_two_ranks_validate_a_split_they_cannot_share_evenly_as_one_process_does(
    tmp_path: Path,
) -> None:
    """A real Lightning DDP ``validate`` on two gloo ranks over a validation split of 7
    sequences (shares of 2 cannot divide it): the logged loss is the mean over the split's
    counted targets, each sequence counted once, as one process computes it. (Evening the
    shares with a repeat of the first sequence, as a ``DistributedSampler`` does, would count
    its targets twice: here that moves the loss far beyond round-off.)"""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "val.pt"
    mp.spawn(lightning_val_worker, args=(2, port, str(out)), nprocs=2, join=True)
    got = torch.load(out).item()
    model = perturbed_model()
    vx, vy = uneven_set(7, seed=1_000).tensors
    with torch.no_grad():
        want = token_mean(model(vx), vy).item()
        repeated = token_mean(model(torch.cat([vx, vx[:1]])), torch.cat([vy, vy[:1]])).item()
    assert abs(repeated - want) > 1e3 * VAL_TOL * want
    assert abs(got - want) <= VAL_TOL * want, (got, want)
