"""The memory plan (``trainers.measure.memory_plan``): what follows from its math, that its
parameter count and saved activations are the implementation's, and one measured peak on a tiny
model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainers import catalogue
from trainers.config import ModelConfig, RunConfig, TrainConfig, valid_wirings
from trainers.measure.memory_plan import (
    ATTNRES_GROUP,
    PRECISION_BYTES,
    activation_tokens,
    depth_state,
    fixed_elements,
    memory_plan,
    param_count,
)

TINY = {"d_model": 32, "n_heads": 2, "seq_len": 16, "vocab_size": 64}
WIRINGS = ("standard", "attnres", "block_attnres", "hyper", "mhc", "mhc_lite", "denseformer",
           "mudd", "rezero", "laurel_rw", "laurel_lr")  # fmt: skip


def _run(
    residual: str = "standard", n_layers: int = 4, micro: int = 0, **train: object
) -> RunConfig:
    blocks = min(4, 2 * n_layers)
    model = ModelConfig(residual=residual, n_layers=n_layers, attnres_blocks=blocks, **TINY)
    return RunConfig(model=model, train=TrainConfig(batch_size=8, micro_batch=micro, **train))


@pytest.mark.parametrize("residual", WIRINGS)
def test_activations_scale_linearly_with_the_micro_batch(residual: str) -> None:
    """Twice the micro-batch, twice the activations and the logits; the rest unchanged."""
    two, four = memory_plan(_run(residual, micro=2)), memory_plan(_run(residual, micro=4))
    fixed = fixed_elements(_run(residual).model) * 4  # mHC's concatenated maps, per step
    assert four.activations - fixed == pytest.approx(2 * (two.activations - fixed), abs=2)
    assert four.logits == 2 * two.logits
    assert (four.params, four.states) == (two.params, two.states)


@pytest.mark.parametrize("residual", WIRINGS)
def test_checkpointing_lowers_the_activations_and_keeps_the_depth_state(residual: str) -> None:
    """Checkpointing every sublayer keeps less, but not the wiring's depth state."""
    none, sub = memory_plan(_run(residual)), memory_plan(_run(residual, checkpointing="sublayer"))
    assert sub.activations < none.activations
    assert sub.depth_state == none.depth_state


def test_sharding_over_n_workers_divides_the_parameter_terms_by_n() -> None:
    """FSDP over 4 workers: a quarter of the parameters, gradients and AdamW state per device;
    the same micro-batch's activations."""
    cfg = _run("attnres", micro=2)
    whole, shard = memory_plan(cfg, workers=4), memory_plan(cfg, workers=4, sharded=True)
    for name in ("params", "grads", "optimizer"):
        assert getattr(shard, name) == pytest.approx(getattr(whole, name) / 4, rel=1e-3)
    assert shard.activations == whole.activations


def test_full_attnres_depth_state_grows_faster_than_linearly() -> None:
    """Full AttnRes keeps every source's logits at every site: at twice the depth more than
    twice the depth state (standard keeps none), and its activations grow faster than
    standard's."""
    state = {n: depth_state(_run("attnres", n).model) for n in (8, 16)}
    assert state[16].wide + state[16].narrow > 2 * (state[8].wide + state[8].narrow)
    assert depth_state(_run("standard", 16).model).wide == 0

    def growth(residual: str) -> int:
        return (
            memory_plan(_run(residual, 16)).activations - memory_plan(_run(residual, 8)).activations
        )

    assert growth("attnres") > growth("standard")


def test_the_plans_group_size_is_full_attnres_own() -> None:
    """The plan counts phase 1's weights with the buffered path's own group size."""
    from trainers.residual.attnres.full import GROUP_SIZE

    assert ATTNRES_GROUP == GROUP_SIZE


@pytest.mark.parametrize("wiring", valid_wirings(), ids="-".join)
def test_the_parameter_count_is_the_built_models(wiring: tuple[str, str, str, str]) -> None:
    """Every valid wiring, placement, norm and norm scaling: the plan's count is the model's."""
    from trainers.model.transformer import DeepTransformer, num_params

    residual, placement, norm, scaling = wiring
    cfg = ModelConfig(residual=residual, placement=placement, norm=norm, norm_scaling=scaling,
                      n_layers=2, attnres_blocks=2, **TINY)  # fmt: skip
    assert param_count(cfg) == num_params(DeepTransformer(cfg))


def _saved_per_token(cfg: ModelConfig, checkpointing: str) -> float:
    """Elements the forward saves for its backward per token, each storage once, outside the
    parameters (``saved_tensors_hooks``); the token ids are left out."""
    from trainers.model.checkpointing import enable_checkpointing
    from trainers.model.transformer import DeepTransformer

    torch.manual_seed(0)
    model = DeepTransformer(cfg).train()
    enable_checkpointing(model, checkpointing)  # type: ignore[arg-type]
    weights = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        if s.data_ptr() not in weights and t.dtype.is_floating_point:
            saved[s.data_ptr()] = s.nbytes()
        return t

    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(idx)
    return (sum(saved.values()) / 4 - fixed_elements(cfg)) / idx.numel()


# The plain residual, the depth states of streams (Hyper-Connections static and dynamic, mHC,
# mHC-lite) and of stacked outputs, and every wiring whose sites keep something (its catalogue
# entry's site_keeps), as (residual, model overrides).
SAVED = (
    *((r, {}) for r in ("standard", "hyper", "mhc", "mhc_lite", "denseformer")),
    ("hyper", {"hc_dynamic": True}),
    *((w.name, {}) for w in catalogue.WIRINGS if w.site_keeps),
)
SAVED_IDS = [r + "".join(f"-{k}" for k in o) for r, o in SAVED]


def _saved_model(residual: str, overrides: dict[str, object], **dims: int) -> ModelConfig:
    fields = {**TINY, "n_layers": 3, "attnres_blocks": 4, **overrides, **dims}
    return ModelConfig(residual=residual, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("residual", "overrides"), SAVED, ids=SAVED_IDS)
@pytest.mark.parametrize("checkpointing", ("none", "sublayer"))
def test_the_activation_terms_are_what_the_forward_saves(
    residual: str, overrides: dict[str, object], checkpointing: str
) -> None:
    """Per token, the plan's branches and depth state are exactly the tensors the forward saves
    (less the backward's own: the stream's gradients and, checkpointed, the recomputed branch)."""
    cfg = _saved_model(residual, overrides)
    planned = activation_tokens(cfg, checkpointing) + depth_state(cfg)  # type: ignore[arg-type]
    backward = 2 * cfg.d_model  # the working gradients
    if checkpointing == "sublayer":
        backward += 3 * cfg.d_model + 2 * cfg.mlp_hidden + 1  # the MLP branch, recomputed
    expected = planned.wide + planned.narrow - backward
    assert _saved_per_token(cfg, checkpointing) == pytest.approx(expected, rel=1e-6)


def _bf16_saved_bytes_per_token(cfg: ModelConfig) -> float:
    """Bytes a forward under CPU bfloat16 autocast (a GPU trial's bf16-mixed) saves for its
    backward per token, each storage once, outside the parameters: the count at two and at one
    sequence, differenced, so that what a step saves once (autocast's weight copies, mHC's
    concatenated maps) drops out."""
    from trainers.model.transformer import DeepTransformer

    def saved(batch: int) -> int:
        torch.manual_seed(0)
        model = DeepTransformer(cfg).train()
        weights = {t.untyped_storage().data_ptr() for t in model.parameters()}
        kept: dict[int, int] = {}

        def pack(t: torch.Tensor) -> torch.Tensor:
            s = t.untyped_storage()
            if s.data_ptr() not in weights and t.dtype.is_floating_point:
                kept[s.data_ptr()] = s.nbytes()
            return t

        idx = torch.randint(0, cfg.vocab_size, (batch, cfg.seq_len))
        hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        with hooks, torch.autocast("cpu", torch.bfloat16):
            model(idx)
        return sum(kept.values())

    return (saved(2) - saved(1)) / cfg.seq_len


# Every wiring's cells under bf16: each (residual, placement) the catalogue allows, RMSNorm (a
# norm that keeps float32 copies of half-precision inputs is what the float32 test cannot see:
# MUDD's mixed streams, sandwich's branch outputs), and the switched depth states of SAVED.
BF16 = (
    *((r, {"placement": p}) for r, p, n, sc in valid_wirings() if (n, sc) == ("rmsnorm", "none")),
    ("hyper", {"hc_dynamic": True}),
)
BF16_IDS = [r + "".join(f"-{v}" for v in o.values()) for r, o in BF16]


@pytest.mark.parametrize(("residual", "overrides"), BF16, ids=BF16_IDS)
def test_under_bf16_the_plan_is_never_below_what_the_forward_saves(
    residual: str, overrides: dict[str, object]
) -> None:
    """What a GPU trial plans with: bf16-mixed, whose float32/bfloat16 split the float32 test
    above cannot see. Per token, at a width where the rows outweigh the per-token constants
    (d_model 128), the plan's branches and depth state in bytes (less the backward's working
    gradients, two float32 rows) are at least what a forward under bfloat16 autocast saves:
    an estimate below it would pick a micro-batch that does not fit."""
    cfg = _saved_model(residual, overrides, d_model=128)
    planned = (activation_tokens(cfg, "none") + depth_state(cfg)).bytes(
        PRECISION_BYTES["bf16-mixed"]
    )
    working = 2 * cfg.d_model * PRECISION_BYTES["bf16-mixed"].wide
    assert planned - working >= _bf16_saved_bytes_per_token(cfg)


@pytest.mark.parametrize("residual", ("standard", "attnres", "mhc"))
def test_the_plan_is_within_a_quarter_of_a_measured_step_peak(residual: str) -> None:
    """A tiny float32 training step of two micro-batches, profiled on the CPU: the estimate
    lies within 25% of the measured peak (benchmarks/model/memory_plan.py measures it at scale)."""
    from benchmarks.model.memory_plan import measure_peak, run_config

    cfg = run_config(residual, 2, 2, {**TINY, "seq_len": 32}, "none")
    assert abs(measure_peak(cfg)["error"]) < 0.25


def test_auto_precision_is_bf16_mixed_on_a_gpu_and_float32_on_a_cpu() -> None:
    """'auto' resolves as trainers.training.run does; mixed precision halves the narrow activations
    and adds a half-precision copy of the weights."""
    cfg = _run("standard", micro=2)
    gpu, cpu = memory_plan(cfg, gpu=True), memory_plan(cfg, gpu=False)
    assert (gpu.precision, cpu.precision) == ("bf16-mixed", "32-true")
    assert gpu.activations < cpu.activations and gpu.weight_copies == cpu.params // 2
    f32 = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, precision="32-true"))
    assert memory_plan(f32, gpu=True) == cpu


def test_the_loss_is_taken_in_at_least_float32() -> None:
    """The loss term is float32 under every 16- and 32-bit precision and float64 under 64-true:
    trainers.model.loss raises half-precision logits to float32 and keeps float64 logits."""
    from trainers.model.loss import lm_loss

    plans = {p: memory_plan(_run(micro=2, precision=p)) for p in PRECISION_BYTES}
    assert plans["64-true"].logits == 2 * plans["32-true"].logits
    for precision in ("bf16-mixed", "16-mixed", "bf16-true"):
        assert plans[precision].logits == plans["32-true"].logits
    wide = torch.zeros(1, 2, TINY["vocab_size"], dtype=torch.float64)
    assert lm_loss(wide, torch.zeros(1, 2, dtype=torch.long)).dtype == torch.float64


def test_the_fused_path_is_planned_where_it_runs() -> None:
    """The plan counts the fused kernels' state where a trial would run them: on a GPU, in
    bfloat16, for the paper's AttnRes, pinned (train.depth_path=fused) or left to the dispatch
    in an uncompiled model; a compiled model, a CPU, float32 or a switch away from the paper's
    takes the torch path. Where it runs, the plan keeps more depth state than on the torch path
    at GPT-2's width (768, rows padded to 1024), and nothing else changes. (What the fused path
    saves is held to a measured count under Triton's interpreter, byte for byte:
    tests/trainers/test_attnres_fused.py.)"""
    import dataclasses

    from trainers.config import RunConfig, TrainConfig
    from trainers.measure.memory_plan import fused_plan

    model = ModelConfig(residual="block_attnres", d_model=768, n_heads=12, n_layers=12)

    def run(**train: object) -> RunConfig:
        return RunConfig(model=model, train=TrainConfig(**train))  # type: ignore[arg-type]

    assert fused_plan(run(depth_path="fused"), gpu=True)
    assert fused_plan(run(compile="false"), gpu=True)
    assert not fused_plan(run(), gpu=True)  # compiled by default on a GPU: the torch path
    assert not fused_plan(run(depth_path="fused"), gpu=False)
    assert not fused_plan(run(depth_path="fused", precision="32-true"), gpu=True)
    sigmoid = dataclasses.replace(model, attnres_gate="sigmoid")
    assert not fused_plan(RunConfig(model=sigmoid, train=TrainConfig(depth_path="torch")), True)
    fused = memory_plan(run(depth_path="fused", micro_batch=1, batch_size=1))
    torch_path = memory_plan(run(depth_path="torch", micro_batch=1, batch_size=1))
    assert fused.depth_state > torch_path.depth_state
    assert fused.total - fused.depth_state == torch_path.total - torch_path.depth_state
