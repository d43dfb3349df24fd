"""The coord check (Yang et al. 2021, Tensor Programs V, §D; microsoft/mup's ``get_coord_data``):
train one configuration at several widths or depths for a few AdamW steps on one fixed batch and
record the mean |activation| of each module class at every step. Under a parametrization that
transfers, each class's size stays flat across sizes; under one that does not, some class grows
or shrinks as a power of the size, which ``slopes`` measures and ``verdict`` judges.

The steps are the run's own optimizer (``trainers.training.module.optimizer_groups``: the
parametrization's groups) at a constant learning rate, so the check tests exactly what a
sweep trains. The table's seeds' means are made here; what is read from a table (ratios,
slopes, the verdict, the Markdown, the figure) is the torch-free
``trainers.measure.coordcheck_table``'s, which a report reads a recorded table with. The command is
``nas coordcheck``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from trainers.config import ModelConfig, TrainConfig
from trainers.measure import coordcheck_table as table
from trainers.model.layers import MLP, Attention
from trainers.model.loss import lm_loss
from trainers.model.optim_groups import optimizer_groups
from trainers.model.transformer import DeepTransformer

# The table's vocabulary and what is read from it (classes, band, slopes, verdict) are the
# torch-free ``trainers.measure.coordcheck_table``'s, so that a report judges a recorded table
# alike.
Axis = table.Axis
Kind = table.Kind
CLASSES = table.CLASSES
FLAT = table.FLAT
judged = table.judged


@dataclass(frozen=True, kw_only=True, slots=True)
class CoordCheck:
    """What to check: ``model`` at each of ``sizes`` along ``axis`` (d_model or n_layers),
    ``steps`` AdamW steps of ``train``'s lr, betas and weight decay on one fixed batch, for
    each seed."""

    model: ModelConfig
    train: TrainConfig
    axis: Axis
    sizes: tuple[int, ...]
    steps: int = 4
    seeds: tuple[int, ...] = (0, 1)
    batch_size: int = 4

    def __post_init__(self) -> None:
        if self.axis not in ("width", "depth"):
            raise ValueError(f"coordcheck axis: {self.axis!r} is not allowed; width or depth")
        if len(self.sizes) < 2 or min(self.sizes) < 1 or len(set(self.sizes)) < len(self.sizes):
            raise ValueError(f"coordcheck sizes: {self.sizes} must be two or more distinct >= 1")
        if self.steps < 1 or not self.seeds or self.batch_size < 1:
            raise ValueError("coordcheck: steps, seeds and batch size must each be at least 1")

    def config_at(self, size: int) -> ModelConfig:
        """The model at one size (validated: a size the config refuses is refused here)."""
        if self.axis == "width":
            return dataclasses.replace(self.model, d_model=size)
        return dataclasses.replace(self.model, n_layers=size)


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """One measurement: a size, a seed, a step (0: at init), each class's mean |activation|
    (``values``) and its mean |change since init| (``deltas``; 0 at step 0)."""

    size: int
    seed: int
    step: int
    values: dict[str, float]
    deltas: dict[str, float]


Captured = dict[str, list[Tensor]]


def _hooks(model: DeepTransformer, seen: Captured) -> list[RemovableHandle]:
    """Forward hooks that append each class's activations to ``seen``, in call order."""

    def record(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Tensor, ...], out: Tensor) -> None:
            seen[name].append(out.detach().clone())

        return hook

    def attention_logits(module: nn.Module, args: tuple[Tensor, ...], out: Tensor) -> None:
        seen["attention_logits"].append(_attention_logits(module, args[0]))

    def stream(module: nn.Module, args: tuple[Tensor, ...]) -> None:
        seen["stream"].append(args[0].detach().clone())

    handles = [model.tok_emb.register_forward_hook(record("embedding"))]
    for m in model.modules():
        if isinstance(m, Attention):
            handles.append(m.register_forward_hook(attention_logits))
            handles.append(m.register_forward_hook(record("attention_out")))
        if isinstance(m, MLP):
            handles.append(m.register_forward_hook(record("mlp_out")))
    handles.append(model.final_norm.register_forward_pre_hook(stream))
    handles.append(model.register_forward_hook(record("logits")))
    return handles


def _attention_logits(attn: nn.Module, x: Tensor) -> Tensor:
    """The queries and keys of one attention's input ``x`` (B, T, d), recomputed as its forward
    computes them, each times sqrt(scale): stacked (2, B, nh, T, hd), whose product is the
    attention logits."""
    assert isinstance(attn, Attention)
    with torch.no_grad():
        b, t, d = x.shape
        q, k, _ = attn.qkv(x).view(b, t, 3, attn.n_heads, d // attn.n_heads).unbind(2)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, nh, T, hd)
        if attn.rotary is not None:
            q, k = attn.rotary(q), attn.rotary(k)
        scale = attn.scale if attn.scale is not None else q.shape[-1] ** -0.5
        return torch.stack((q, k)) * math.sqrt(scale)


def _logits(qk: Tensor) -> Tensor:
    """The causal attention logits q·kᵀ · scale of ``_attention_logits``' stack."""
    t = qk.shape[-2]
    return (qk[0] @ qk[1].transpose(-2, -1))[..., torch.ones(t, t, dtype=torch.bool).tril()]


def _batch(cfg: ModelConfig, batch_size: int) -> tuple[Tensor, Tensor]:
    """One fixed batch (the same at every size and seed): seeded random tokens whose second
    half repeats the first, so that attention has something to learn (looking back one
    period) and its queries and keys align within a few steps, as in training on text."""
    g = torch.Generator().manual_seed(1234)
    half = (cfg.seq_len + 2) // 2
    first = torch.randint(0, cfg.vocab_size, (batch_size, half), generator=g)
    idx = torch.cat((first, first), dim=1)[:, : cfg.seq_len + 1]
    return idx[:, :-1], idx[:, 1:]


def _mean_abs(tensors: Sequence[Tensor]) -> float:
    return sum(t.abs().mean().item() for t in tensors) / len(tensors)


def _aligned_update(qk: Tensor, qk0: Tensor) -> float:
    """The attention logits' update once queries and keys align: d_head · scale · mean|Δq| ·
    mean|Δk| (scale folded into the stack). Training aligns Δq and Δk, and then q·k moves by
    this much (Yang et al. 2021, Tensor Programs V, §J.2.1, why muP's scale is 1/d_head); the
    logits' own change is early on dominated by the cross terms q₀·Δkᵀ, which shrink with width
    at any scale and would hide a wrong one."""
    dq, dk = (qk - qk0).abs().mean(dim=(1, 2, 3, 4))
    return (dq * dk).item() * qk.shape[-1]


def _sizes(seen: Captured, first: Captured) -> tuple[dict[str, float], dict[str, float]]:
    """Each class's mean |activation| and mean |change since init| (the attention logits':
    their aligned update, ``_aligned_update``)."""
    values = {c: _mean_abs(v) for c, v in seen.items() if c != "attention_logits"}
    deltas = {
        c: _mean_abs([a - a0 for a, a0 in zip(v, first[c], strict=True)])
        for c, v in seen.items()
        if c != "attention_logits"
    }
    qk, qk0 = seen["attention_logits"], first["attention_logits"]
    values["attention_logits"] = _mean_abs([_logits(a) for a in qk])
    aligned = [_aligned_update(a, a0) for a, a0 in zip(qk, qk0, strict=True)]
    deltas["attention_logits"] = sum(aligned) / len(aligned)
    return {c: values[c] for c in CLASSES}, {c: deltas[c] for c in CLASSES}


def measure(
    cfg: ModelConfig, train: TrainConfig, steps: int, seed: int, batch_size: int
) -> list[tuple[dict[str, float], dict[str, float]]]:
    """Each class's mean |activation| and mean |change since init| at steps 0..steps (after
    that many AdamW updates at a constant ``train.lr``)."""
    torch.manual_seed(seed)
    model = DeepTransformer(cfg)
    groups = optimizer_groups(model, train)
    opt = torch.optim.AdamW(groups, lr=train.lr, betas=(train.beta1, train.beta2))
    x, y = _batch(cfg, batch_size)
    out, first = [], None
    for step in range(steps + 1):
        seen: Captured = {c: [] for c in CLASSES}
        handles = _hooks(model, seen)
        logits = model(x)
        for h in handles:
            h.remove()
        first = first or seen
        out.append(_sizes(seen, first))
        if step < steps:
            opt.zero_grad(set_to_none=True)
            lm_loss(logits, y).backward()
            opt.step()
    return out


def run(check: CoordCheck) -> list[Row]:
    """Every size, seed and step's measurement, on one CPU thread's worth of work each."""
    rows = []
    for size in check.sizes:
        cfg = check.config_at(size)
        for seed in check.seeds:
            measured = measure(cfg, check.train, check.steps, seed, check.batch_size)
            for step, (values, deltas) in enumerate(measured):
                rows.append(Row(size=size, seed=seed, step=step, values=values, deltas=deltas))
    return rows


def means(rows: Sequence[Row], step: int, kind: Kind = "values") -> dict[str, dict[int, float]]:
    """Class -> size -> the seeds' mean at one step (of the activations or their changes)."""
    out: dict[str, dict[int, float]] = {c: {} for c in CLASSES}
    for c in CLASSES:
        for size in sorted({r.size for r in rows}):
            vals = [getattr(r, kind)[c] for r in rows if r.size == size and r.step == step]
            out[c][size] = sum(vals) / len(vals)
    return out


def ratios(rows: Sequence[Row], kind: Kind = "deltas") -> dict[str, float]:
    """Class -> its size at the largest size over its size at the smallest, at the last step
    (``trainers.measure.coordcheck_table.ratios`` of the seeds' means)."""
    return table.ratios(table_rows(rows), kind)


def slopes(rows: Sequence[Row], kind: Kind = "deltas") -> dict[str, float]:
    """Class -> the exponent s of size^s (``trainers.measure.coordcheck_table.slopes``)."""
    return table.slopes(table_rows(rows), kind)


def verdict(rows: Sequence[Row], axis: Axis, flat: tuple[float, float] = FLAT) -> tuple[bool, str]:
    """Whether every judged class's update stays flat, and one line naming those that do not
    (``trainers.measure.coordcheck_table.verdict`` of the seeds' means)."""
    return table.verdict(table_rows(rows), axis, flat)


def table_rows(rows: Sequence[Row]) -> list[dict[str, float | int]]:
    """The seeds' means per size and step, one dict per (size, step): each class's mean
    |activation| and, as ``<class>_delta``, its mean |change since init|."""
    out: list[dict[str, float | int]] = []
    for step in sorted({r.step for r in rows}):
        values, deltas = means(rows, step), means(rows, step, "deltas")
        for size in sorted({r.size for r in rows}):
            row: dict[str, float | int] = {"size": size, "step": step}
            row |= {c: values[c][size] for c in CLASSES}
            row |= {table.column(c, "deltas"): deltas[c][size] for c in CLASSES}
            out.append(row)
    return out


def write_csv(rows: Sequence[Row], path: Path) -> None:
    path.write_text(table.to_csv(table_rows(rows)))


def markdown(rows: Sequence[Row], axis: Axis) -> str:
    """The last step's update per size, each class's ratio and slope, and the activations'
    ratio (``trainers.measure.coordcheck_table.markdown``)."""
    return table.markdown(table_rows(rows), axis)


def write_figure(rows: Sequence[Row], axis: Axis, path: Path, title: str) -> None:
    """microsoft/mup's coord-check plot (``trainers.measure.coordcheck_table.draw``) as a PNG."""
    table.draw(table_rows(rows), axis, title).savefig(path, dpi=100)
