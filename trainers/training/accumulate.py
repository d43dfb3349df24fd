"""Gradient accumulation: one optimizer step's gradient from a batch taken in micro-batches.

The loss is a mean over the batch's tokens and every micro-batch holds as many tokens, so the
batch's mean loss is the mean of the micro-batches' means, and its gradient the sum of their
gradients each scaled by 1/k: k forwards of ``micro_batch`` sequences give the gradient one
forward of the whole batch gives, up to the order of float sums (``tests/trainers/
test_micro_batch.py`` holds every wiring to it in float64). Dropout is the exception: each
micro-batch draws its own masks, so the masks differ from one whole-batch forward's, though not
in distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

import torch
from torch import Tensor, nn

from trainers.model.loss import lm_loss


def micro_chunks(x: Tensor, y: Tensor, micro_batch: int) -> list[tuple[Tensor, Tensor]]:
    """A batch as consecutive micro-batches of ``micro_batch`` sequences (0: the batch)."""
    if not micro_batch or micro_batch >= len(x):
        return [(x, y)]
    return list(zip(x.split(micro_batch), y.split(micro_batch), strict=True))


def _no_sync(last: bool) -> AbstractContextManager[None]:
    return nullcontext()


def accumulate_gradients(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    micro_batch: int,
    backward: Callable[[Tensor], None] = Tensor.backward,
    sync: Callable[[bool], AbstractContextManager[None]] = _no_sync,
) -> Tensor:
    """Add the gradient of the batch's mean loss to ``model``'s ``.grad``, one micro-batch at a
    time; return the mean loss, detached. ``backward`` runs each backward (Lightning's
    ``manual_backward`` in training); ``sync(last)`` surrounds each micro-batch, told whether it
    is the last, so that data-parallel ranks average their gradients once, after the last."""
    chunks = micro_chunks(x, y, micro_batch)
    k = len(chunks)
    losses = []
    for i, (cx, cy) in enumerate(chunks):
        with sync(i == k - 1):
            loss = lm_loss(model(cx), cy)
            backward(loss / k if k > 1 else loss)  # k = 1: the loss itself, bit for bit
        losses.append(loss.detach())
    return losses[0] if k == 1 else torch.stack(losses).mean()
