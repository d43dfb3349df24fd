"""Token-weighted losses over micro-batches and data-parallel ranks: one optimizer step's
gradient from a batch taken in micro-batches, and one validation pass's loss.

A step's loss is the sum of the cross-entropies of its counted targets (those not ``IGNORE``)
over every micro-batch and every rank's share, divided by how many there are in all; a
validation pass's is the same over all of its batches. Each micro-batch therefore adds its
*summed* loss divided by that whole count, never its own mean: a mean of means would weight a
micro-batch's targets by how few of them it holds, so the loss would depend on how the batch is
cut (``train.micro_batch``, the number of workers, a short last validation batch). With the
count taken before the first micro-batch, k forwards of ``micro_batch`` sequences give the
loss and the gradient one forward of the whole batch gives, up to the order of float sums
(``tests/trainers/test_micro_batch.py`` holds every wiring to it in float64,
``tests/trainers/test_token_losses.py`` with uneven masks, a short validation batch and two
ranks). Dropout is the exception: each micro-batch draws its own masks, so the masks differ
from one whole-batch forward's, though not in distribution.

Data-parallel ranks average their gradients (DDP's all-reduce, FSDP's reduce-scatter) and the
module averages their logged losses; so each rank divides its summed loss by the global count
(one scalar all-reduce per step) and multiplies it by the number of ranks, and the average of
the ranks' parts is the global mean however unevenly the ranks hold the counted targets. One
process runs no collective.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from trainers.model.loss import counted, lm_loss


def micro_chunks(x: Tensor, y: Tensor, micro_batch: int) -> list[tuple[Tensor, Tensor]]:
    """A batch as consecutive micro-batches of ``micro_batch`` sequences (0: the batch)."""
    if not micro_batch or micro_batch >= len(x):
        return [(x, y)]
    return list(zip(x.split(micro_batch), y.split(micro_batch), strict=True))


def over_ranks(value: Tensor, ranks: int) -> Tensor:
    """``value`` summed over the ``ranks`` data-parallel ranks of the default process group
    (every rank must call it at the same point); ``value`` itself on one rank, with no
    collective."""
    if ranks == 1:
        return value
    import torch.distributed as dist

    total = value.clone()  # all_reduce works in place; the caller's tensor stays its own
    dist.all_reduce(total)
    return total


@dataclass(frozen=True)
class LossTotal:
    """Summed per-target losses and the count of targets they cover, added up over
    micro-batches and batches: their ratio is a mean over every counted target, however the
    targets were batched."""

    loss: Tensor
    count: Tensor

    def __add__(self, other: LossTotal) -> LossTotal:
        return LossTotal(self.loss + other.loss, self.count + other.count)

    def mean(self, ranks: int = 1) -> Tensor:
        """The mean over every rank's targets (a collective where ``ranks`` > 1); NaN where
        there are none, as a mean over no targets is."""
        return over_ranks(self.loss, ranks) / over_ranks(self.count, ranks)


def loss_total(model: nn.Module, x: Tensor, y: Tensor, micro_batch: int) -> LossTotal:
    """The batch's summed loss and count, one micro-batch at a time, detached (validation)."""
    totals = [
        LossTotal(lm_loss(model(cx), cy, reduction="sum").detach(), counted(cy))
        for cx, cy in micro_chunks(x, y, micro_batch)
    ]
    return functools.reduce(operator.add, totals)


def _no_sync(last: bool) -> AbstractContextManager[None]:
    return nullcontext()


def accumulate_gradients(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    micro_batch: int,
    backward: Callable[[Tensor], None] = Tensor.backward,
    sync: Callable[[bool], AbstractContextManager[None]] = _no_sync,
    ranks: int = 1,
) -> Tensor:
    """Add the gradient of this rank's part of the step's loss to ``model``'s ``.grad``, one
    micro-batch at a time; return that part, detached. The part is this rank's summed loss over
    the step's counted targets on every one of ``ranks`` ranks, times ``ranks``: the average of
    the parts (and of their gradients, as data-parallel ranks take it) is the step's mean loss;
    on one rank the part is that mean. ``backward`` runs each backward (Lightning's
    ``manual_backward`` in training); ``sync(last)`` surrounds each micro-batch, told whether it
    is the last, so that data-parallel ranks average their gradients once, after the last."""
    chunks = micro_chunks(x, y, micro_batch)
    total = over_ranks(counted(y), ranks)  # before any forward: every micro-batch divides by it
    parts = []
    for i, (cx, cy) in enumerate(chunks):
        with sync(i == len(chunks) - 1):
            # divided by the int64 count first, which takes the loss's dtype (count / ranks
            # would be rounded to float32 in a float64 run); times 1 on one rank is exact
            part = lm_loss(model(cx), cy, reduction="sum") / total * ranks
            backward(part)
        parts.append(part.detach())
    return parts[0] if len(parts) == 1 else torch.stack(parts).sum()
