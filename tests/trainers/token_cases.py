"""Batches whose counted targets are spread unevenly, a float64 model, and two real
data-parallel ranks: the cases ``test_token_losses.py`` holds the token-weighted losses to.

The ranks' worker lives here, not in the test module, so that each spawned process imports only
torch and the model, not Lightning and the test suite."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
from torch import Tensor
from torch.utils.data import Dataset, TensorDataset

from tests.trainers.conftest import tiny
from trainers.config import ModelConfig, RunConfig, TrainConfig
from trainers.data.source import DataSource, Sample
from trainers.model.loss import IGNORE
from trainers.model.transformer import DeepTransformer
from trainers.training.accumulate import (
    LossTotal,
    accumulate_gradients,
    loss_total,
    over_ranks,
)

CFG = tiny()  # vocabulary 32, length 12, two blocks
U = torch.finfo(torch.float64).eps / 2  # float64 unit roundoff, 2^-53

# Counted targets (of 12) per sequence of the training batch. In micro-batches of 2 the first
# holds 1 target against 12 and 15; of 3, 1 against 27; of 1, two hold none. Dealt to two
# ranks (sequence i to rank i mod 2, as the data module deals them), rank 0 holds 1 + 0 + 3 = 4
# targets and rank 1 0 + 12 + 12 = 24.
STEP_KEEP = (1, 0, 0, 12, 3, 12)
# A validation pass of 11 sequences: in batches of 4 the last holds 3, so micro-batches of 2 cut
# it into 2 + 1 sequences; counts from 0 to 12.
VAL_KEEP = (12, 1, 0, 9, 2, 12, 5, 1, 11, 0, 4)


def uneven_batch(keep: Sequence[int], seed: int, cfg: ModelConfig = CFG) -> tuple[Tensor, Tensor]:
    """Random inputs and targets, sequence i keeping ``keep[i]`` targets at random positions
    and ``IGNORE`` at the others."""
    g = torch.Generator().manual_seed(seed)
    shape = (len(keep), cfg.seq_len)
    x = torch.randint(0, cfg.vocab_size, shape, generator=g)
    y = torch.randint(0, cfg.vocab_size, shape, generator=g)
    for i, k in enumerate(keep):
        y[i, torch.randperm(cfg.seq_len, generator=g)[k:]] = IGNORE
    return x, y


def perturbed_model(seed: int = 0, cfg: ModelConfig = CFG) -> DeepTransformer:
    """A float64 model, the same in every process: seeded init, then every parameter moved by
    0.2 N(0, 1) so that zero-initialized parts carry gradient too."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = DeepTransformer(cfg).double()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def token_mean(logits: Tensor, targets: Tensor) -> Tensor:
    """The mean cross-entropy over the counted targets, written out: the sum of every counted
    target's cross-entropy over their number."""
    flat, y = logits.flatten(0, 1), targets.flatten()
    total = torch.nn.functional.cross_entropy(flat, y, ignore_index=IGNORE, reduction="sum")
    return total / (y != IGNORE).sum()


def tolerance(cfg: ModelConfig, targets: int) -> float:
    """How far, relative to its largest element, a gradient (or the loss) taken in pieces may
    differ from the whole batch's in float64.

    Both compute the same sums over the same targets, in another order: the pieces' kernels see
    other shapes and the pieces' sums are added at the end. A length-n sum rounded at each step
    errs by at most about n * u of its terms' magnitudes (u = 2^-53); a gradient element ends a
    chain of at most S = 8 such operations per sublayer plus 4 on the forward and as many on the
    backward, each of length at most n = max(d_model, mlp_hidden, the targets summed over). With
    activations of order one (``perturbed_model``), 2 * n * S * u bounds each computation's
    error to first order, and twice that their difference. A fault (a micro-batch weighted by
    its own count, a missing rank's share, a count taken per micro-batch) moves the loss by
    order one on these masks, far outside it."""
    n = max(cfg.d_model, cfg.mlp_hidden, targets)
    steps = 8 * cfg.n_sublayers + 4
    return 2 * 2 * n * steps * U


def rank_worker(rank: int, world: int, init: str, out: str) -> None:
    """One of ``world`` gloo ranks: its share of ``STEP_KEEP``'s batch accumulated through real
    DDP (``no_sync`` but at the last micro-batch, as Lightning's ``toggle_model`` does), the
    losses averaged as the module logs them, and its share of the validation pass, in batches
    of 2. Rank 0 saves what the test compares."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)  # two ranks of several threads each would spin against each other
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        model = perturbed_model()
        ddp = DistributedDataParallel(model, find_unused_parameters=True)
        x, y = uneven_batch(STEP_KEEP, seed=1)

        def sync(last: bool) -> AbstractContextManager[None]:
            return nullcontext() if last else ddp.no_sync()

        part = accumulate_gradients(ddp, x[rank::world], y[rank::world], 1, sync=sync, ranks=world)
        logged = over_ranks(part, world) / world  # sync_dist's mean over the ranks
        vx, vy = uneven_batch(VAL_KEEP, seed=2)
        vx, vy = vx[rank::world], vy[rank::world]  # 6 and 5 sequences: a short last batch
        with torch.no_grad():
            batches = range(0, len(vx), 2)
            val = sum_totals([loss_total(model, vx[i : i + 2], vy[i : i + 2], 1) for i in batches])
            val_mean = val.mean(world)
        if rank == 0:
            grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            state = {"part": part, "logged": logged, "val": val_mean, "grads": grads}
            torch.save(state, Path(out))
    finally:
        dist.destroy_process_group()


class UnevenSource(DataSource):
    """Random tokens whose sequences keep from none to all of their targets (seeded), and a
    validation split one sequence short of whole batches."""

    name = "uneven"
    vocab_size = CFG.vocab_size
    bytes_per_token = None

    def train_set(self, seq_len: int, n: int, seed: int) -> Dataset[Sample]:
        return uneven_set(n, seed)

    def val_set(self, seq_len: int, n: int) -> Dataset[Sample]:
        return uneven_set(n - 1, seed=1_000)


def uneven_set(n: int, seed: int) -> TensorDataset:
    """``n`` random sequences keeping from none to all of their targets (seeded)."""
    keep = torch.randint(0, CFG.seq_len + 1, (n,), generator=torch.Generator().manual_seed(seed))
    return TensorDataset(*uneven_batch(keep.tolist(), seed))


def sum_totals(totals: Sequence[LossTotal]) -> LossTotal:
    """The validation pass's total: its batches' totals added, as the module adds them."""
    return functools.reduce(operator.add, totals)


def val_config() -> RunConfig:
    """Validation of ``CFG`` in float64 over ``UnevenSource``'s split of 7 sequences (two
    batches of 4 asked for, one sequence short): on two ranks, shares of 2 that do not divide
    it."""
    train = TrainConfig(batch_size=4, val_batches=2, precision="64-true", accelerator="cpu")
    return RunConfig(model=CFG, train=train)


def lightning_val_worker(rank: int, world: int, port: int, out: str) -> None:
    """One of ``world`` processes of a real Lightning DDP ``validate`` (gloo), launched as a
    cluster's launcher would (``LOCAL_RANK`` and the rendezvous in the environment), the
    data module dealing the shares, ``perturbed_model``'s weights; rank 0 saves the logged
    validation loss."""
    import os

    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        LOCAL_RANK=str(rank),
        NODE_RANK="0",
        WORLD_SIZE=str(world),
    )
    torch.set_num_threads(1)
    import lightning as L

    from record.schema import Metric
    from trainers.data.module import LMDataModule
    from trainers.training.module import LanguageModelModule

    cfg = val_config()
    module = LanguageModelModule(cfg)
    module.model.double().load_state_dict(perturbed_model().state_dict())
    trainer = L.Trainer(
        accelerator="cpu",
        devices=world,
        strategy="ddp",
        precision="64-true",
        use_distributed_sampler=False,  # as trainers.training.run: the data module deals
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.validate(module, datamodule=LMDataModule(cfg, UnevenSource()), verbose=False)
    if rank == 0:
        torch.save(trainer.callback_metrics[Metric.VAL_LOSS], Path(out))
