"""The fused Block AttnRes path (``trainers.residual.attnres.fused``, the optional package
``flash-attn-res``) against the existing one, and both against standard pre-norm.

- **kernels**: each phase's forward and gradients against the depth softmax in float64
  (``kernel_exactness``);
- **model**: a small Block AttnRes model (uneven partition) run with the fused kernels and with
  the existing path on the same input, in float32 with weights far from init and in bf16 autocast
  at init (``MODEL_CASES``): the largest absolute difference of the logits and of every
  parameter's gradient, and the largest magnitude beside it. The kernels store their outputs in
  bfloat16, so the float32 case differs by bfloat16 roundings compounded over 12 sublayers;
- **forced cell** (a CPU, under the interpreter): the GPU check's dry-run cell of Block AttnRes
  trained as ``study_cell`` trains it, on the existing path and pinned onto the kernels: the path
  each model took and its first two losses (``forced_cell``);
- **timing** (CUDA only, not ``--quick``, the budget allowing): seconds per training step (bf16
  autocast, AdamW) and per decoded token (``trainers.measure.decode_cost``) of standard, Block
  AttnRes (N = 8) unfused and fused at d_model 1024, 32 layers, interleaved in rounds.

On a CPU the kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set here before the
package is imported; one autotuning config per kernel, since tuning needs a GPU driver).

    python -m benchmarks.gpu.fused_block [--device cuda] [--quick] [--out DIR] [--budget-s S]

Needs triton and flash-attn-res (pip install -e '.[gpu]'); where they do not import it says so in
one line and checks nothing. flash-attn-res 0.1.12 does not import under Triton 3.9 (its
autotuner rejects a tuning key the package names): Triton 3.8 is the newest it imports under.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks.common import Deadline, cli, md_table, on_path
from trainers.config import ModelConfig
from trainers.model.transformer import DeepTransformer

KERNELS = (
    "phase_1_batched_attention_forward_kernel",
    "phase_1_batched_attention_backward_kernel",
    "phase_2_online_softmax_merge_forward_kernel",
    "phase_2_online_softmax_merge_backward_kernel",
    "reduce_grad_queries_kernel",
)


def load_package(interpret: bool) -> str | None:
    """Imports flash-attn-res, under Triton's interpreter when ``interpret``; why not, in a line,
    where it does not import. Each kernel keeps its first autotuning config: on a CPU, tuning
    needs a GPU driver; on a GPU, tuning every config compiles each one for every new shape, and
    on an H200 (2026-12-04) Block AttnRes's first fused forward took 50 s and its backward over 45 s
    more, past the stage's whole budget. The fused timings are therefore of untuned kernels."""
    if interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are decorated: set first
    try:
        import flash_attn_res as far
    except Exception as e:  # any failure: the check is skipped, saying why
        return f"flash_attn_res does not import ({type(e).__name__}: {e})"
    for name in KERNELS:
        kernel = getattr(far, name)
        far.set_autotune_configs(kernel, kernel.configs[:1])
    return None


def exactness_config(d_model: int = 16, residual: str = "block_attnres") -> ModelConfig:
    # 6 layers: 12 sublayers in 5 blocks of 3, 3, 2, 2, 2 (uneven).
    return ModelConfig(
        vocab_size=32,
        d_model=d_model,
        n_heads=2,
        n_layers=6,
        seq_len=8,
        residual=residual,
        attnres_blocks=5 if residual == "block_attnres" else 2,  # Full reads none
    )


def _run(
    model: DeepTransformer, idx: torch.Tensor, fused: bool, bf16: bool, kernels: Any = None
) -> dict[str, torch.Tensor]:
    """Logits and every gradient of one step; ``kernels`` replaces the package's phases."""
    stream: Any = model.stream
    stream.fused, stream.kernels = fused, kernels
    model.zero_grad(set_to_none=True)
    with torch.autocast(idx.device.type, torch.bfloat16, enabled=bf16):
        logits = model(idx)
    F.cross_entropy(logits.float().flatten(0, 1), idx.flatten()).backward()
    out = {"logits": logits.detach().float()}
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        out[f"grad {name}"] = p.grad.detach().float().clone()
    return out


def fused_saved_bytes(device: str, residual: str) -> dict[str, float]:
    """Bytes per token the fused path saves for the backward, counted by
    ``saved_tensors_hooks`` inside its sources' ``mix`` (each storage once), under bf16
    autocast at d_model 24 (rows padded to 32), against the memory plan's ``fused_saved``. Per
    token: the count at two micro-batches, differenced, so the queries (one copy per step)
    drop out."""
    from trainers.measure.memory_plan import PRECISION_BYTES, fused_saved

    cfg = exactness_config(24, residual)
    counts = [_saved_in_mix(cfg, batch, device) for batch in (1, 2)]
    per_token = (counts[1] - counts[0]) / cfg.seq_len
    planned = fused_saved(cfg).bytes(PRECISION_BYTES["bf16-mixed"])
    return {"measured": per_token, "planned": planned}


def _saved_in_mix(cfg: ModelConfig, batch: int, device: str) -> int:
    """Bytes the fused sources' ``mix`` saves for the backward over one forward of ``batch``
    sequences, each storage once."""
    from trainers.residual.attnres import fused as fused_attnres

    torch.manual_seed(0)
    model = on_path(DeepTransformer(cfg).to(device).train(), fused=True)
    saved: dict[int, int] = {}
    inside = [False]

    def pack(t: torch.Tensor) -> torch.Tensor:
        if inside[0] and t.dtype.is_floating_point:
            storage = t.untyped_storage()
            saved[storage.data_ptr()] = storage.nbytes()
        return t

    def counted(mix: Any) -> Any:
        def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
            inside[0] = True
            try:
                return mix(self, *args, **kwargs)
            finally:
                inside[0] = False

        return wrapped

    classes = (fused_attnres.FusedSources, fused_attnres.FullFusedSources)
    originals = {k: k.__dict__["mix"] for k in classes}
    for klass, mix in originals.items():
        klass.mix = counted(mix)  # type: ignore[method-assign]
    idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len), device=device)
    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    try:
        with hooks, torch.autocast(device, torch.bfloat16):
            model(idx)
    finally:
        for klass, mix in originals.items():
            klass.mix = mix  # type: ignore[method-assign]
    return sum(saved.values())


def _rounded_phase1(v: torch.Tensor, q: torch.Tensor, eps: float) -> tuple[Any, Any]:
    """Phase 1 in plain torch, as the kernel computes it (float32) and stores it: each query's
    softmax over RMS-normalized keys, the output in bfloat16, the log-sum-exp in float32."""
    v, q = v.float(), q.float()
    logits = torch.einsum("nbtd,gd->gbtn", F.rms_norm(v, (v.shape[-1],), eps=eps), q)
    out = torch.einsum("gbtn,nbtd->gbtd", logits.softmax(-1), v)
    return out.bfloat16(), logits.logsumexp(-1)


def _rounded_phase2(
    part: torch.Tensor, q: torch.Tensor, out: torch.Tensor, lse: torch.Tensor, eps: float
) -> torch.Tensor:
    """Phase 2 in plain torch, in float32, stored in bfloat16: the online-softmax merge of
    phase 1's (rounded) output with the partial sum."""
    part = part.float()
    logit = F.rms_norm(part, (part.shape[-1],), eps=eps) @ q.float()
    w = torch.softmax(torch.stack((lse.float(), logit), -1), -1)
    return (w[..., :1] * out.float() + w[..., 1:] * part).bfloat16()


# What rounding the site inputs to bfloat16 alone does to the model, with no kernel in it: the
# fused bookkeeping over the two phases written in plain torch, storing bfloat16 where the
# kernels do. The kernels' own difference from the existing path is held to it.
ROUNDED_PHASES = (_rounded_phase1, _rounded_phase2)


def _diffs(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor]) -> dict[str, Any]:
    return {
        k: {
            "max_abs_err": (got[k] - ref[k]).abs().max().item(),
            "max_abs": ref[k].abs().max().item(),
        }
        for k in ref
    }


def _worst(diffs: dict[str, Any]) -> tuple[str, float]:
    """The compared tensor with the largest error relative to its largest value, and that."""
    name = max(diffs, key=lambda k: diffs[k]["max_abs_err"] / max(diffs[k]["max_abs"], 1e-12))
    return name, diffs[name]["max_abs_err"] / max(diffs[name]["max_abs"], 1e-12)


# The model-level comparisons: float32 weights moved far from init (random queries and gains:
# sharp depth softmaxes, the hard case for bfloat16 stores), and bf16 autocast at init, as
# training starts, also at d_model 24, whose rows the fused path pads to 32. (bf16, perturbed, d)
MODEL_CASES = {
    "float32_perturbed": (False, True, 16, "block_attnres"),
    "bf16_autocast_init": (True, False, 16, "block_attnres"),
    "bf16_autocast_init_d24": (True, False, 24, "block_attnres"),
    # Full AttnRes (13 sites in groups of 8: each later site merges a second phase 1)
    "full_float32_perturbed": (False, True, 16, "attnres"),
    "full_bf16_autocast_init": (True, False, 16, "attnres"),
}


def perturb(model: DeepTransformer) -> None:
    """Move a model away from its init, where zero queries make every depth-mixing weight equal
    and hide a wrong one: its depth-mixing parameters (queries, gains) drawn from N(0, 1), every
    other weight shifted by N(0, 0.1²). The buffered-path tests use it too."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("stream.sites."):
                p.copy_(torch.randn_like(p))
            else:
                p.add_(torch.randn_like(p) * 0.1)


def exactness(
    device: str, bf16: bool, perturbed: bool, d_model: int = 16, residual: str = "block_attnres"
) -> dict[str, Any]:
    """Fused against existing, and the bfloat16 rounding alone (``ROUNDED_PHASES``) against
    existing: per compared tensor, the max abs difference and max abs value, and the worst."""
    cfg = exactness_config(d_model, residual)
    torch.manual_seed(1)
    model = DeepTransformer(cfg).to(device)
    if perturbed:
        perturb(model)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len), device=device)
    ref, got = _run(model, idx, False, bf16), _run(model, idx, True, bf16)
    rounded = _run(model, idx, True, bf16, ROUNDED_PHASES)
    diffs, rounding = _diffs(got, ref), _diffs(rounded, ref)
    worst, relative = _worst(diffs)
    rounding_worst, rounding_relative = _worst(rounding)
    return {
        "compared": len(diffs),
        "worst": worst,
        "worst_relative": relative,
        "diffs": diffs,
        "rounding_worst": rounding_worst,
        "rounding_worst_relative": rounding_relative,
        "rounding_diffs": rounding,
    }


def kernel_exactness(device: str) -> dict[str, float]:
    """The two kernels alone in float32 against the depth softmax in float64 (n = 4 stored
    sources, 3 sites, d = 32): phase 1's output against the reference rounded to bfloat16 (what
    it stores), its log-sum-exp, and its gradients for an incoming gradient that bfloat16 holds
    exactly; phase 2 (one site over the stored sources and a partial sum) forward and gradients.
    Relative figures: max abs error over max abs value."""
    from flash_attn_res.ops.phase_1 import phase_1_batched_attention_triton_op as phase1
    from flash_attn_res.ops.phase_2 import phase_2_online_softmax_merge_triton_op as phase2

    n, b, t, d, g, eps = 4, 2, 3, 32, 3, 1e-6
    gen = torch.Generator().manual_seed(0)

    def draw(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(device).requires_grad_()

    def softmax_mix(v: torch.Tensor, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = torch.einsum("n...d,gd->g...n", F.rms_norm(v, (d,), eps=eps), q)
        return torch.einsum("g...n,n...d->g...d", logits.softmax(-1), v), logits.logsumexp(-1)

    def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
        return ((a.double() - ref).abs().max() / ref.abs().max()).item()

    v, q, part = draw(n, b, t, d), draw(g, d), draw(b, t, d)
    v64, q64, p64 = (x.detach().double().requires_grad_() for x in (v, q, part))
    out, lse = phase1(v, q, eps)
    ref, ref_lse = softmax_mix(v64, q64)
    grad = torch.randn(g, b, t, d, generator=gen).bfloat16().to(device)
    got = torch.autograd.grad((out * grad).float().sum(), (v, q), retain_graph=True)
    want = torch.autograd.grad((ref * grad.double()).sum(), (v64, q64))
    result = {
        "phase1_out_vs_bf16_rounded": rel(out, ref.bfloat16().double()),
        "phase1_lse": rel(lse, ref_lse),
        "phase1_grad_sources": rel(got[0], want[0]),
        "phase1_grad_queries": rel(got[1], want[1]),
    }
    site = 1  # the site's softmax over the stored sources and the partial sum, in one piece
    merged = phase2(part, q[site], out[site], lse[site], eps)
    ref2 = softmax_mix(torch.cat((v64, p64[None])), q64[site : site + 1])[0][0]
    grad2 = torch.randn(b, t, d, generator=gen).bfloat16().to(device)
    got2 = torch.autograd.grad((merged * grad2).float().sum(), (v, q, part))
    want2 = torch.autograd.grad((ref2 * grad2.double()).sum(), (v64, q64, p64))
    result["phase2_out"] = rel(merged, ref2)
    for name, a, w in zip(("sources", "queries", "partial"), got2, want2, strict=True):
        result[f"phase2_grad_{name}"] = rel(a, w)
    return result


# The setting: Block AttnRes against standard at d_model 1024, 32 layers.
TIMING_DIMS = {"d_model": 1024, "n_heads": 16, "n_layers": 32, "seq_len": 1024, "vocab_size": 50304}


def timing(
    device: str,
    deadline: Deadline | None = None,
    rounds: int = 5,
    dims: dict[str, int] | None = None,
    batch: int = 8,
) -> dict[str, Any]:
    """Step and decode seconds at d_model 1024, 32 layers: standard, Block AttnRes with the
    existing path, and Block AttnRes as the dispatch rule has it (fused where it applies: the
    result says what it decided, and which path each arm's model took). Each arm's model is
    built from seed 0 and draws its batch after it, so the two Block AttnRes arms train the same
    weights on the same tokens: ``losses`` holds every step's loss (the warm-up's and each
    round's), which are the same where both take the existing path."""
    from benchmarks.common import config, interleaved, model_step, on_path, ratio
    from trainers.measure.decode_cost import measure
    from trainers.residual.attnres.fused import dispatch

    dims = dims or TIMING_DIMS
    cuda = device == "cuda"
    arms = {"standard": ("standard", None), "block": ("block_attnres", False)}
    arms["block_fused"] = ("block_attnres", None)  # None: the rule decides
    steps, decode, paths = {}, {}, {}
    losses: dict[str, list[float]] = {name: [] for name in arms}
    verdict = dispatch(config("block_attnres", **dims), device, "bfloat16")
    dtype = "bfloat16" if cuda else "float32"  # model_step's autocast is CUDA's only
    for name, (arm, fused) in arms.items():
        cfg = config(arm, **dims)
        torch.manual_seed(0)
        model = on_path(DeepTransformer(cfg).to(device), fused)
        paths[name] = list(model.stream.mixing_path(torch.device(device).type, dtype, False))
        steps[name] = recorded(model_step(model, batch, device), losses[name])
        decode[name] = 1 / measure(model, bf16=True).tokens_per_s
    times = interleaved(steps, warmup=3, rounds=rounds, deadline=deadline)
    return {
        "dispatch": {"fused": verdict.fused, "reason": verdict.reason},
        "paths": paths,
        "losses": losses,
        "rounds": len(times["standard"]),
        "step_s": {k: sorted(v)[len(v) // 2] for k, v in times.items()},
        "step_ratio_to_standard": {k: ratio(v, times["standard"]) for k, v in times.items()},
        "decode_s_per_token": decode,
        "decode_ratio_to_standard": {k: v / decode["standard"] for k, v in decode.items()},
        "peak_bytes": torch.cuda.max_memory_allocated() if cuda else None,
    }


def recorded(step: Any, losses: list[float]) -> Any:
    """``step``, appending the loss each call returns to ``losses`` (the step has synchronized
    before it returns, so reading the loss waits for nothing)."""

    def run() -> None:
        losses.append(float(step()))

    return run


# The depth study's largest cell (search_spaces depth_gpt2: 48 layers of width 768, context 1024)
# at the micro-batch its plan picks for an 80 GiB device, two micro-batches a step: the plan's
# estimate beside the measured peak, fused and not. Tiny on the CPU dry run (never fused there by
# the rule; forced onto the kernels under Triton's interpreter, ``forced_cell``, whose cost grows
# with the kernels' programs: one sequence of 8 tokens per micro-batch).
STUDY_DEVICE_BYTES = 80 * 2**30
STUDY_QUICK: dict[str, Any] = {
    "d_model": 32,
    "n_heads": 2,
    "n_layers": 2,
    "seq_len": 8,
    "vocab_size": 256,
}


def study_config(arm: str, quick: bool) -> Any:
    """The study's 48-layer cell for ``arm`` with two micro-batches of the size 'auto' picks
    for an 80 GiB GPU (its stated headroom kept back)."""
    from search_spaces import BUILTIN
    from trainers.config import ModelConfig, RunConfig, TrainConfig
    from trainers.config_io import from_dict, nest
    from trainers.measure.memory_fit import GPU_HEADROOM, fit_auto

    if quick:
        micro = 1
        model = ModelConfig(residual=arm, attnres_blocks=2, **STUDY_QUICK)
    else:
        base = {**BUILTIN["depth_gpt2"].base, "model.residual": arm, "model.n_layers": 48}
        full = from_dict(nest(base))
        fit = fit_auto(full, GPU_HEADROOM.usable(STUDY_DEVICE_BYTES))
        micro = fit.plan.micro_batch if fit is not None else 1
        model = full.model
    return RunConfig(model=model, train=TrainConfig(batch_size=2 * micro, micro_batch=micro))


def study_cell(device: str, quick: bool, deadline: Deadline | None = None) -> dict[str, Any]:
    """Standard, Block AttnRes on the existing path and Block AttnRes as the dispatch rule has
    it: each cell's plan (``trainers.measure.memory_plan``, 'auto' precision as on a GPU), its
    measured peak over one step (``benchmarks.model.memory_plan.device_peak_bytes``), the path
    its model took, and its median step time and every timed step's loss over a few
    interleaved rounds. The two Block AttnRes arms train the same weights on the same tokens
    (``device_step`` builds each from seed 0)."""
    from benchmarks.common import interleaved
    from benchmarks.model.memory_plan import device_peak_bytes
    from trainers.measure.memory_plan import memory_plan
    from trainers.residual.attnres.fused import dispatch

    arms = {"standard": ("standard", None), "block": ("block_attnres", False)}
    arms["block_fused"] = ("block_attnres", None)
    verdict = dispatch(study_config("block_attnres", quick).model, device, "bfloat16")
    cells: dict[str, Any] = {}
    steps = {}
    for name, (arm, pin) in arms.items():
        cfg = study_config(arm, quick)
        run, measured = device_peak_bytes(cfg, device, pin)
        plan = memory_plan(cfg, gpu=True).total
        path = run.model.stream.mixing_path(torch.device(device).type, "bfloat16", False)
        cells[name] = {
            "micro_batch": cfg.train.micro_batch,
            "estimate": plan,
            "measured": measured,
            "error": (plan - measured) / measured,
            "path": list(path),
            "losses": [],
        }
        steps[name] = recorded(run.step, cells[name]["losses"])
    times = interleaved(steps, 0, 2 if quick else 3, deadline)
    for name, cell in cells.items():
        cell["step_s"] = sorted(times[name])[len(times[name]) // 2] if times[name] else None
    return {"dispatch": {"fused": verdict.fused, "reason": verdict.reason}, "cells": cells}


def forced_cell(device: str) -> dict[str, Any]:
    """The dry run's Block AttnRes cell (``study_config``, quick) trained as ``study_cell``
    trains it (``device_step``), on the existing path and pinned onto the kernels; on a CPU
    under Triton's interpreter, the one way a CPU runs them. Per arm the path its model took and
    the losses of its first two steps, from the same weights on the same tokens. (The whole
    study cell, with its profiled step and timed rounds, took minutes under the interpreter.)"""
    from benchmarks.model.memory_plan import device_step

    cfg = study_config("block_attnres", quick=True)
    cells: dict[str, Any] = {}
    for name, pin in (("block", False), ("block_fused", True)):
        run = device_step(cfg, device, pin)
        path = run.model.stream.mixing_path(torch.device(device).type, "bfloat16", False)
        cells[name] = {"path": list(path), "losses": [run.first_loss, float(run.step())]}
    return cells


def run(quick: bool, device: str = "cpu", deadline: Deadline | None = None) -> dict[str, Any]:
    """The exactness checks on ``device`` (a CPU: under the interpreter), then on CUDA, unless
    ``quick`` or the budget is spent, the timing."""
    start = time.perf_counter()
    result: dict[str, Any] = {"device": device}
    skipped = load_package(interpret=device == "cpu")
    if skipped:  # the study's cell still runs: on the existing path, as the rule then has it
        result["skipped"] = skipped
    else:
        result["kernels"] = kernel_exactness(device)
        for case, (bf16, perturbed, d_model, residual) in MODEL_CASES.items():
            result[case] = exactness(device, bf16, perturbed, d_model, residual)
        result["saved"] = {r: fused_saved_bytes(device, r) for r in ("block_attnres", "attnres")}
        if device == "cpu":  # under the interpreter: the study cell's arm forced onto them
            result["forced_cell"] = forced_cell(device)
        result["exactness_s"] = time.perf_counter() - start
        if device == "cuda" and not quick and (deadline is None or deadline.left() > 0):
            result["timing"] = timing(device, deadline)
    if (device == "cuda" or quick) and (deadline is None or deadline.left() > 0):
        result["study_cell"] = study_cell(device, quick, deadline)
    return result


def _checks(result: dict[str, Any]) -> list[str]:
    lines = [f"fused_block on {result['device']} ({result['exactness_s']:.1f} s of checks):", ""]
    lines += md_table(
        ["kernel check", "relative max abs err"],
        ([k, f"{v:.2e}"] for k, v in result["kernels"].items()),
    )
    rows = []
    for case in MODEL_CASES:
        ex, logits = result[case], result[case]["diffs"]["logits"]
        rows.append(
            [
                case,
                f"{logits['max_abs_err'] / logits['max_abs']:.2e}",
                f"{ex['worst_relative']:.2e} ({ex['worst']})",
                f"{_relative(ex['rounding_diffs']['logits']):.2e}",
                f"{ex['rounding_worst_relative']:.2e} ({ex['rounding_worst']})",
            ]
        )
    header = [
        "model, against existing",
        "fused: logits",
        "fused: worst tensor",
        "bf16 rounding alone: logits",
        "bf16 rounding alone: worst tensor",
    ]
    lines += ["", *md_table(header, rows)]
    if "forced_cell" in result:
        f = result["forced_cell"]
        lines += [
            "",
            f"The dry run's Block AttnRes cell, {f['block_fused']['path'][1]}: losses "
            f"{', '.join(f'{x:.6f}' for x in f['block_fused']['losses'])} against the existing "
            f"path's {', '.join(f'{x:.6f}' for x in f['block']['losses'])}.",
        ]
    if "timing" in result:
        t = result["timing"]
        lines += [
            "",
            f"dispatch: {t['dispatch']['reason']}; kernels untuned (each its first autotuning"
            f" config); {t['rounds']} rounds",
            "",
            *md_table(
                ["arm (d 1024, 32 layers)", "step s", "step / standard", "decode s/token", "/ std"],
                (
                    [
                        arm,
                        f"{t['step_s'][arm]:.4f}",
                        f"{t['step_ratio_to_standard'][arm]:.3f}",
                        f"{t['decode_s_per_token'][arm]:.5f}",
                        f"{t['decode_ratio_to_standard'][arm]:.3f}",
                    ]
                    for arm in t["step_s"]
                ),
            ),
        ]
    return lines


def _relative(d: dict[str, float]) -> float:
    return d["max_abs_err"] / max(d["max_abs"], 1e-12)


def markdown(result: dict[str, Any]) -> str:
    if "skipped" in result:
        lines = [f"fused_block on {result['device']}: kernels skipped: {result['skipped']}"]
    else:
        lines = _checks(result)
    if "study_cell" in result:
        st = result["study_cell"]
        lines += [
            "",
            f"depth_gpt2's largest cell: dispatch: {st['dispatch']['reason']}",
            "",
            *md_table(
                ["arm", "micro-batch", "plan MiB", "measured MiB", "plan error", "step s"],
                (
                    [
                        arm,
                        str(c["micro_batch"]),
                        f"{c['estimate'] / 2**20:,.0f}",
                        f"{c['measured'] / 2**20:,.0f}",
                        f"{c['error']:+.1%}",
                        "—" if c["step_s"] is None else f"{c['step_s']:.3f}",
                    ]
                    for arm, c in st["cells"].items()
                ),
            ),
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    cli("fused_block", __doc__ or "", run, markdown)
