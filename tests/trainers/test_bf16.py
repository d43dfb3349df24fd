"""bf16-mixed precision on the CPU for every wiring (a covering set of cells): the GPU's default
precision, so its numerics are tested on every CI run, on a machine without a GPU.

What is matched: Lightning 2.x's ``precision="bf16-mixed"`` (``MixedPrecision``) runs the
training step (forward and loss) inside ``torch.autocast(device, dtype=torch.bfloat16,
cache_enabled=False)``, with the CPU as the device on a CPU; the backward runs outside it,
there is no gradient scaler for bf16, and the weights and the optimizer state stay float32.
``test_lightning_bf16_mixed_on_the_cpu_is_this_autocast`` pins that, so the loop below is the
same arithmetic as a bf16-mixed ``nas train`` without the cost of a Trainer per cell.

The tolerance: bf16 keeps an 8-bit significand, so one rounding to nearest has a relative error
of at most ``U = 2**-8``. The loss at step ``k`` may differ from float32's by ``2 * U * (k + 1)``
relative: ``2 * U`` for the forward (each matmul rounds both its inputs; the CPU accumulates in
float32, and cross-entropy runs in float32 under autocast) and ``2 * U`` more for each AdamW step
before it, which moves the two models apart by what the rounded gradients change. Measured
worst (L=2, d=16, lr 1e-2): 5.5e-5 at step 0, 1.0e-2 at step 3 (``attnres``, sandwich), about a
third of the 3.1e-2 allowed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.model.transformer import DeepTransformer
from trainers.training.module import lm_loss, param_groups

U = 2.0**-8  # bf16's unit roundoff: 8 significand bits, round to nearest
STEPS = 3  # AdamW steps; the loss is compared before each and after the last


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """One torch thread: tiny bf16 ops are dominated by per-op overhead, which extra threads
    on a busy machine multiply."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _losses(model: torch.nn.Module, idx: torch.Tensor, bf16: bool) -> list[float]:
    """The loss before each of ``STEPS`` AdamW steps and after the last, the training step
    under bf16 autocast (as Lightning's bf16-mixed) or in float32."""
    opt = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-2)
    out = []
    for step in range(STEPS + 1):
        with torch.autocast("cpu", dtype=torch.bfloat16, cache_enabled=False, enabled=bf16):
            loss = lm_loss(model(idx[:, :-1]), idx[:, 1:])
        out.append(loss.item())
        if step == STEPS:
            return out
        opt.zero_grad()
        loss.backward()
        opt.step()
    return out


def test_bf16_mixed_tracks_float32(wiring: dict[str, str]) -> None:
    """From the same weights and batch, bf16-mixed losses are finite and within ``2U(k+1)``
    relative of float32's at step k, and not identical (autocast did round)."""
    model = DeepTransformer(tiny(**wiring))
    idx = torch.randint(0, 32, (2, 13))
    exact = _losses(copy.deepcopy(model), idx, bf16=False)
    mixed = _losses(copy.deepcopy(model), idx, bf16=True)
    assert all(math.isfinite(v) for v in mixed), mixed
    for k, (a, b) in enumerate(zip(exact, mixed, strict=True)):
        assert abs(b - a) <= 2 * U * (k + 1) * abs(a), (k, exact, mixed)
    assert exact != mixed


def test_lightning_bf16_mixed_on_the_cpu_is_this_autocast() -> None:
    """Lightning's bf16-mixed on a CPU trainer autocasts to bfloat16 on the CPU without a
    gradient scaler: the arithmetic the test above reproduces."""
    import lightning as L
    from lightning.pytorch.plugins.precision import MixedPrecision

    trainer = L.Trainer(
        accelerator="cpu",
        devices=1,
        precision="bf16-mixed",
        logger=False,
        enable_progress_bar=False,
    )
    plugin = trainer.precision_plugin
    assert isinstance(plugin, MixedPrecision)
    assert plugin.scaler is None
    ctx = plugin.autocast_context_manager()
    assert (ctx.device, ctx.fast_dtype, ctx._cache_enabled) == ("cpu", torch.bfloat16, False)
