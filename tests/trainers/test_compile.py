"""``torch.compile`` over every catalogue cell: the training step (forward and backward) and the
KV-cache decode step trace as one graph each (``fullgraph=True`` raises at the first graph
break), and the traced graphs compute what the eager model computes.

The graphs run on AOTAutograd's eager backend: it traces what Inductor would receive (the forward
and backward as ATen graphs, with every guard and Python-side constant the tracer baked in) and
runs it op by op, so a difference from eager is a tracing error (a stale constant, a dropped
side effect, the plain-autograd AttnRes path disagreeing with the buffered one it replaces under
the tracer), not a kernel's rounding. Models are float64, whose unit round-off (1.1e-16) summed
over a few hundred operations stays far below the 1e-10 these tests allow; a tracing error
moves a loss or a gradient by orders of magnitude more. Inductor's own kernels are checked
against eager in float32 by ``test_module.py``'s compiled training run and by
``benchmarks.model.compile_speedup``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch._dynamo
from torch import Tensor

from tests.trainers.attnres_cases import DEPARTURES
from tests.trainers.conftest import tiny
from trainers.config import ModelConfig, valid_wirings
from trainers.model.checkpointing import enable_checkpointing
from trainers.model.loss import lm_loss
from trainers.model.transformer import DeepTransformer

# Each wiring's first placement: its other placements only fill norm slots around the same
# branches (``trainers.model.placement``), so their decode step is not traced again.
FIRST_PLACEMENT: dict[str, str] = {}
# The wirings whose compiled backward is not autograd over the eager model's own operators: the
# AttnRes family (compiled, its two-phase path trades the buffered path's hand-written backward
# for the stacked path's autograd) and mHC (its own autograd.Function). At their first placement,
# on the plain path and checkpointed, their backward is traced by AOTAutograd, as Inductor
# receives it; every other graph (further placements, the switches, the attentions, the other
# wirings) runs on Dynamo alone, whose backward is autograd over the traced operators (a
# quarter of the time of a cell).
TRACED_BACKWARD = ("attnres", "block_attnres", "mhc")


def _cells() -> dict[str, dict[str, Any]]:
    """Every (residual, placement) of the catalogue at its first valid norm, each attention
    variant, every AttnRes switch, both AttnRes paths and activation checkpointing."""
    cells: dict[str, dict[str, Any]] = {}
    for residual, placement, norm, scaling in valid_wirings():
        fields = {"residual": residual, "placement": placement, "norm": norm}
        cells.setdefault(f"{residual}-{placement}", fields | {"norm_scaling": scaling})
        FIRST_PLACEMENT.setdefault(residual, f"{residual}-{placement}")
    for attention in ("value_residual", "value_residual_learned"):  # inside attention only
        cells[attention] = {"attention": attention}
    # Full and Block AttnRes share the mixer; Block adds the partial sum, Full the window's spans
    for name, fields in DEPARTURES.items():
        cells[f"block_attnres-{name}"] = {"residual": "block_attnres", **fields}
    cells["attnres-window=2"] = {"residual": "attnres", "attnres_window": 2}
    return cells


CELLS = _cells()
# make test-fast traces these; make test every cell
QUICK = ("standard-pre", "block_attnres-pre", "mhc_lite-pre")
# Cells run with something else than their configuration: the AttnRes plain path (the stream's
# ``fast`` off: every Table 4 switch's direct computation), and sublayer checkpointing.
PLAIN = {
    "block_attnres-plain": {"residual": "block_attnres"},
    "attnres-plain": {"residual": "attnres"},
}


def _params() -> list[Any]:
    every = {**CELLS, **PLAIN, "block_attnres-checkpointed": {"residual": "block_attnres"}}
    return [
        pytest.param(name, marks=() if name in QUICK else pytest.mark.slow, id=name)
        for name in every
    ]


def _model(name: str) -> tuple[DeepTransformer, ModelConfig]:
    fields = {**CELLS, **PLAIN}.get(name, {"residual": "block_attnres"})
    cfg = tiny(n_layers=1, **fields)  # two sublayers: every site kind, half the tracing
    torch.manual_seed(0)
    model = DeepTransformer(cfg).double()
    with torch.no_grad():  # away from init: zero queries and gates would hide a wrong path
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    if name in PLAIN:
        model.stream.fast = False  # type: ignore[union-attr]
    if name.endswith("checkpointed"):
        enable_checkpointing(model, "sublayer")
    return model, cfg


def _loss_and_grads(model: DeepTransformer, step: Any, idx: Tensor) -> tuple[Tensor, list[Tensor]]:
    model.zero_grad(set_to_none=True)
    loss = step(idx)
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]


@pytest.mark.parametrize("name", _params())
def test_training_and_decode_steps_compile_whole_and_equal_eager(name: str) -> None:
    """One graph for the forward (and, for ``TRACED_BACKWARD``, the backward) of every cell,
    with the eager model's loss and gradients to float64 round-off; one graph for its KV-cache
    decode step (but for further placements), with the eager step's logits."""
    torch._dynamo.reset()
    model, cfg = _model(name)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))

    def step(i: Tensor) -> Tensor:
        return lm_loss(model(i), i)

    loss, grads = _loss_and_grads(model, step, idx)
    fields = CELLS.get(name, {"residual": "block_attnres"})  # PLAIN and checkpointed: Block's
    further = "placement" in fields and name != FIRST_PLACEMENT[fields["residual"]]
    switched = name in CELLS and "placement" not in fields  # a switch or an attention
    traced = fields.get("residual") in TRACED_BACKWARD and not (further or switched)
    backend = "aot_eager" if traced else "eager"
    compiled = torch.compile(step, backend=backend, fullgraph=True)
    traced_loss, traced_grads = _loss_and_grads(model, compiled, idx)
    assert len(traced_grads) == len(grads) == sum(1 for _ in model.parameters())
    torch.testing.assert_close(traced_loss, loss, rtol=1e-10, atol=1e-10)
    for g, t in zip(grads, traced_grads, strict=True):
        torch.testing.assert_close(t, g, rtol=1e-10, atol=1e-10)
    if not further:  # a further placement's decode runs the branches its forward traced
        _check_decode(model, idx[:, :6])


@torch.no_grad()
def _check_decode(model: DeepTransformer, idx: Tensor) -> None:
    """Dynamo alone (no backward to trace): a break or a wrong graph is a tracing matter."""
    model.eval()
    step = torch.compile(model.decode_step, backend="eager", fullgraph=True)
    eager, _ = model.decode_step(idx[:, 5:], model.prefill(idx[:, :5])[1])
    traced, cache = step(idx[:, 5:], model.prefill(idx[:, :5])[1])
    assert cache.length == 6
    torch.testing.assert_close(traced, eager, rtol=1e-10, atol=1e-10)
