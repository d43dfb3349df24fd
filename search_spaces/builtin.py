"""The built-in named spaces, as data. ``nas spaces`` lists them with their one-line
descriptions."""

from __future__ import annotations

import dataclasses
from typing import Any

from search_spaces.distributions import Choice, FloatRange, IntRange
from search_spaces.lr_stage import LrStage
from search_spaces.space import Objective, Space
from trainers import catalogue
from trainers.config import VALID_PLACEMENTS

TINY: dict[str, Any] = {
    "model.d_model": 32,
    "model.n_heads": 2,
    "model.n_layers": 2,
    "model.seq_len": 64,
    "train.batch_size": 4,
    "train.max_steps": 20,
    "train.val_every": 10,
    "train.val_batches": 2,
    "train.warmup_steps": 2,
    "train.diagnostics_batch": 2,
    "data.max_bytes": 1_000_000,
}
SMALL: dict[str, Any] = {
    "model.d_model": 64,
    "model.n_heads": 4,
    "model.seq_len": 128,
    "train.batch_size": 16,
    "train.max_steps": 150,
    "train.val_every": 50,
    "train.val_batches": 4,
    "train.warmup_steps": 15,
}
# The demo's size, chosen by measurement (docs/results/demo/findings.md): at 8 layers (16
# sublayers; Block AttnRes at N = 4 AttnRes blocks of 4) and 300 steps Block AttnRes's gain over
# PreNorm is several times its seed noise (at 150 steps, `quick`, it had not appeared yet); a
# batch of 8 keeps the gain (-0.044 against -0.044 at 16, calibration seeds) at about half the
# time.
DEMO_SIZE: dict[str, Any] = {
    "model.d_model": 64,
    "model.n_heads": 4,
    "model.n_layers": 8,
    "model.seq_len": 128,
    "model.attnres_blocks": 4,
    "train.batch_size": 8,
    "train.max_steps": 300,
    "train.val_every": 100,
    "train.val_batches": 8,
    "train.warmup_steps": 30,
    # which sources each Block AttnRes site depends on, beside the weights it gives them:
    # 56 forwards of the diagnostics batch at the end of each trial (docs/diagnostics.md)
    "train.diagnostics_importance": True,
}
ABLATION: dict[str, Any] = {
    "model.d_model": 128,
    "model.n_heads": 4,
    "model.seq_len": 128,
    "train.batch_size": 16,
    "train.max_steps": 1000,
    "train.val_every": 200,
    "train.warmup_steps": 100,
}
CORE = {
    "standard": {"model.residual": "standard"},
    "attnres": {"model.residual": "attnres"},
    "block_attnres": {"model.residual": "block_attnres"},
}


# Wirings whose paper fixes the norm type (their catalogue entry's paper_norm): their arms run
# with it instead of the model's default (RMSNorm), and say so in their names.
PAPER_NORM = {w.name: w.paper_norm for w in catalogue.WIRINGS if w.paper_norm}


def _every_wiring() -> dict[str, dict[str, Any]]:
    arms: dict[str, dict[str, Any]] = {}
    for r, placements in VALID_PLACEMENTS.items():
        for p in placements:
            arm = {"model.residual": r, "model.placement": p}
            if r in PAPER_NORM:
                arms[f"{r}/{p}/{PAPER_NORM[r]}"] = {**arm, "model.norm": PAPER_NORM[r]}
            else:
                arms[f"{r}/{p}"] = arm
    return arms


def _blocks() -> dict[str, dict[str, Any]]:
    arms: dict[str, dict[str, Any]] = {
        f"block_attnres/N={n}": {"model.residual": "block_attnres", "model.attnres_blocks": n}
        for n in (1, 2, 4, 8, 16)
    }
    arms["attnres"] = {"model.residual": "attnres"}
    return arms


# Table 4's model has 16 layers (32 sublayers) of width 1168; at CPU size: 8 layers of width 64,
# keeping the paper's AttnRes block size S = 4 sublayers (N = 4 AttnRes blocks, the paper's 8) and
# its window as a quarter of the depth
# (W = 4 of 16 sublayers; the paper's 8 of 32), and its H = 16 channel groups.
TABLE4_SIZE: dict[str, Any] = {
    "model.d_model": 64,
    "model.n_heads": 4,
    "model.n_layers": 8,
    "model.seq_len": 128,
    "model.attnres_blocks": 4,
    "train.batch_size": 16,
    "train.max_steps": 600,
    "train.val_every": 100,
    "train.val_batches": 8,
    "train.warmup_steps": 60,
}


def _table4() -> dict[str, dict[str, Any]]:
    """Table 4's rows in its order: the comparators, Full AttnRes and each of its switches,
    Block AttnRes and each of its switches (reports.published.TABLE4 holds the numbers); then
    the successor that has no Table 4 row, Delta AttnRes (arXiv 2605.18855), Full and Block."""
    full = {"model.residual": "attnres"}
    block = {"model.residual": "block_attnres"}
    return {
        "standard": {"model.residual": "standard"},
        "denseformer": {"model.residual": "denseformer"},
        "mhc": {"model.residual": "mhc"},  # Sinkhorn mHC: no Table 4 row, kept beside the row's
        "mhc_lite": {"model.residual": "mhc_lite"},  # what the paper's mHC row ran
        "attnres": full,
        # Table 4's input-dependent row: the form chosen by measurement (docs/variants.md), then
        # the raw projection and the other forms as ablations of it.
        "attnres/query=static_input": {**full, "model.attnres_query": "static_input"},
        "attnres/query=input": {**full, "model.attnres_query": "input"},
        "attnres/query=input_d": {**full, "model.attnres_query": "input_d"},
        "attnres/query=input_sqrt_d": {**full, "model.attnres_query": "input_sqrt_d"},
        "attnres/query=low_rank": {**full, "model.attnres_query": "low_rank"},
        "attnres/query=gated": {**full, "model.attnres_query": "gated"},
        "attnres/query=input,query_lr=1/64": {
            **full,
            "model.attnres_query": "input",
            "model.attnres_query_lr": 1 / 64,
        },
        "attnres/query=scalar": {**full, "model.attnres_query": "scalar"},
        "attnres/gate=sigmoid": {**full, "model.attnres_gate": "sigmoid"},
        "attnres/key_norm=none": {**full, "model.attnres_key_norm": "none"},
        "attnres/window=4": {**full, "model.attnres_window": 4},
        "block_attnres": block,
        "block_attnres/heads=16": {**block, "model.attnres_heads": 16},
        "block_attnres/key_norm=none": {**block, "model.attnres_key_norm": "none"},
        "attnres/sources=deltas": {**full, "model.attnres_sources": "deltas"},
        "block_attnres/sources=deltas": {**block, "model.attnres_sources": "deltas"},
    }


# Budgeted spaces (trainers.budget): each trial's max_steps comes from its FLOP budget and
# its own FLOPs per token, warm-up and validation keep their fraction of the 600-step schedule (10%,
# and three validations plus the last). CPU-sized: on 2 CPU cores with --concurrency 2 about 4 and 3
# minutes (README: estimated from step times), at widths where one core does 15 to 30 GFLOP/s.
BUDGETED: dict[str, Any] = {
    "model.seq_len": 64,
    "model.attnres_blocks": 4,
    "train.batch_size": 16,
    "train.warmup_steps": 60,
    "train.val_every": 200,
    "train.val_batches": 4,
}
# Three FLOP budgets about 3.3x and 3x apart: 40 to 1,325 steps over depths 2 to 8 at width 32.
FRONTIER_BUDGETS = (3e10, 1e11, 3e11)


def _architectures() -> dict[str, dict[str, Any]]:
    """Fig. 7's grid at CPU size: d_model / n_layers in {6, 16, 48} (the paper's 15 to 75 at 100x
    the width) x n_heads / n_layers in {0.5, 1} (the paper's 0.3 to 0.7), each shape near 2e5
    sublayer weights (n_layers (4 d^2 + 2 d h): 221k, 197k, 221k) as the paper holds its ~2.3e8,
    for standard and Block AttnRes (N = 4 AttnRes blocks, of 4, 2 and 1 sublayers at 8, 4 and 2
    layers)."""
    shapes = {6: (8, 48), 16: (4, 64), 48: (2, 96)}  # d_model / n_layers -> (n_layers, d_model)
    arms: dict[str, dict[str, Any]] = {}
    for wiring in ("standard", "block_attnres"):
        for ratio, (n_layers, d_model) in shapes.items():
            for heads in (0.5, 1):
                arms[f"{wiring}/d_per_L={ratio}/H_per_L={heads}"] = {
                    "model.residual": wiring,
                    "model.n_layers": n_layers,
                    "model.d_model": d_model,
                    "model.n_heads": int(heads * n_layers),
                }
    return arms


# Learning rate against depth (CompleteP's Fig. 1) at CPU size. CompleteP's base is the smallest
# depth at the model's own width, so only depth scales (m_w = 1, m_L = n_layers / 2). Depth 16
# would double the sweep's time (its trials cost as much as the three depths below together).
TRANSFER_DEPTHS = (2, 4, 8)
TRANSFER_SIZE: dict[str, Any] = {
    "model.d_model": 32,
    "model.n_heads": 2,
    "model.seq_len": 64,
    "model.attnres_blocks": 4,
    "train.batch_size": 16,
    "train.max_steps": 100,
    "train.val_every": 50,
    "train.val_batches": 4,
    "train.warmup_steps": 10,
}
# Five values a factor of 2.5 apart, 2e-3 to 8e-2: at this size standard/sp at depth 2 has its
# optimum near 1e-2 (measured at 120 steps: 2.91, 2.61, 2.69, 2.78 nats at 2e-3, 8e-3, 3.2e-2,
# 1.28e-1), so an optimum anywhere from about 3e-3 to 5e-2 stays bracketed.
TRANSFER_STAGE = LrStage("train.lr", 2e-3, 8e-2, log=True, points=5, seeds=1)


def _transfer_arms() -> dict[str, dict[str, Any]]:
    """standard and Block AttnRes, each under sp and CompleteP (base: the smallest depth)."""
    completep = {
        "model.parametrization": "completep",
        "model.base_width": TRANSFER_SIZE["model.d_model"],
        "model.base_depth": min(TRANSFER_DEPTHS),
    }
    return {
        f"{wiring}/{name}": {**CORE[wiring], **extra}
        for wiring in ("standard", "block_attnres")
        for name, extra in (("sp", {}), ("completep", completep))
    }


# The tuned variants' stage: five values a factor of 2.5 apart with the shared learning rate the
# untuned spaces train at (train.lr's default, 3e-3) in the middle, so the stage holds it.
TUNED_STAGE = LrStage("train.lr", 4.8e-4, 1.875e-2, log=True, points=5, seeds=1)


# The depth study at GPT-2 small scale (issue 40): standard pre-norm, Block AttnRes (N = 8, the
# paper's) and Full AttnRes at 12, 24 and 48 layers of width 768 (12 heads of 64), the AttnRes
# paper's design otherwise (RMSNorm pre-norm, zero-initialised static queries, RMS-normalised
# keys: the defaults). Context 1024 and the vocabulary of GPT-2's tokenizer padded to 50,304
# (FineWeb's shards, which nas data adopt reads in place, use 50,257 of it), as GPT-2 small.
# - Global batch 512 sequences, 524,288 tokens per step: nanoGPT's and modded-nanogpt's for this
#   size; the paper's 1.6M to 3.5M serve models 2 to 4 times larger.
# - 5,000 steps, 2.6B tokens for every depth: about 21 tokens per parameter at 12 layers (124M
#   with the embeddings, Chinchilla's ratio), and the same data for the deeper models, so depth
#   is the one thing that varies; a FLOP-matched comparison is the compute_frontier space's.
# - A learning-rate stage per arm and depth (3 values, 6e-4 to 2.4e-3 a factor of 2 apart, one
#   seed): GPT-2's 6e-4 at the bottom, the paper's 2-3e-3 (tuned at 3x the batch) at the top; the
#   paper tuned for its baseline and shared it, which favours the baseline; here each arm gets
#   its own. Then 3 seeds at each arm's best: the smallest count whose noise is estimated.
# - Warm-up 250 steps (5%), cosine to 10%: the harness's schedule.
# - Each cell's micro-batch is 'auto': the largest its trial's device fits, with headroom.
# `nas spaces depth_gpt2 --device-memory 80GiB --peak-flops 989e12` plans it (memory, micro-batch
# and checkpointing per cell, time per trial and the sweep's GPU-hours); it is not run here.
GPT2_DEPTHS = (12, 24, 48)
GPT2_SIZE: dict[str, Any] = {
    "model.d_model": 768,
    "model.n_heads": 12,
    "model.seq_len": 1024,
    "model.vocab_size": 50304,
    "model.attnres_blocks": 8,
    "train.batch_size": 512,
    "train.micro_batch": "auto",  # per cell, the largest its device fits (64, 32, 16 on 80 GiB)
    "train.max_steps": 5000,
    "train.warmup_steps": 250,
    "train.val_every": 500,
    "train.val_batches": 20,
}
GPT2_STAGE = LrStage("train.lr", 6e-4, 2.4e-3, log=True, points=3, seeds=1)
# Its twin at CPU size: the same arms, stage and depth ratios (4, 8, 16 layers: 1:2:4) at width 64
# (4 heads of 16) and context 64, 200 steps of 16 sequences on the built-in corpus; the stage
# scaled to the width (the harness's 3e-3 in the middle). At 4 layers N = 8 AttnRes blocks are
# one sublayer each: Block AttnRes is Full AttnRes there, as it is at any depth of 4 sublayers
# per block or fewer.
GPT2_TWIN_DEPTHS = (4, 8, 16)
GPT2_TWIN_SIZE: dict[str, Any] = {
    "model.d_model": 64,
    "model.n_heads": 4,
    "model.seq_len": 64,
    "model.attnres_blocks": 8,
    "train.batch_size": 16,
    "train.max_steps": 200,
    "train.warmup_steps": 10,
    "train.val_every": 100,
    "train.val_batches": 4,
}
GPT2_TWIN_STAGE = LrStage("train.lr", 1.5e-3, 6e-3, log=True, points=3, seeds=1)


def _tuned(space: Space, cost: str) -> Space:
    """``space`` with a learning-rate stage before its seeds (``TUNED_STAGE``): the same arms and
    seeds, each arm compared at its own best learning rate."""
    about = (
        f"{space.name} with each arm at its own best learning rate: a stage of "
        f"{TUNED_STAGE.points} learning rates per arm first ({cost})"
    )
    return dataclasses.replace(
        space, name=f"{space.name}_tuned", description=about, tune=TUNED_STAGE
    )


_PLAIN: dict[str, Space] = {
    space.name: space
    for space in (
        Space(
            name="smoke",
            description="a few tiny trials for tests: standard vs Block AttnRes (N = 2 AttnRes "
            "blocks), seconds each",
            base={**TINY, "model.attnres_blocks": 2},
            arms={"standard": CORE["standard"], "block_attnres": CORE["block_attnres"]},
        ),
        Space(
            name="demo",
            description="the demo (`make demo`): standard pre-norm against Block AttnRes at 8 "
            "layers (16 sublayers in N = 4 AttnRes blocks), 300 steps of 8 sequences, 6 seeds "
            "(about 8 minutes on 2 CPU cores at --concurrency 2)",
            base=DEMO_SIZE,
            arms={"standard": CORE["standard"], "block_attnres": CORE["block_attnres"]},
            # The 8 seeds measured in choosing the size put the paired sd at 0.023 nats: at 6
            # seeds a gain of 0.04 is resolved about 9 times in 10, at 4 (measured) 6 in 10.
            seeds=tuple(range(6)),
        ),
        Space(
            name="quick",
            description="a first look: standard/pre vs Full and Block AttnRes (N = 4 AttnRes "
            "blocks) at 4 and 8 layers, 150 steps, 2 seeds (about 6 minutes on 2 CPU cores)",
            base={**SMALL, "model.attnres_blocks": 4},
            arms=CORE,
            params={"model.n_layers": Choice((4, 8))},
            seeds=(0, 1),  # two seeds: the demo's report can show intervals and tests
        ),
        Space(
            name="residual_ablation",
            description="every residual type in each valid placement, at 4 and 16 layers (Block "
            "AttnRes at N = 8 AttnRes blocks), 3 seeds",
            base={**ABLATION, "model.attnres_blocks": 8},
            arms=_every_wiring(),
            params={"model.n_layers": Choice((4, 16))},
            seeds=(0, 1, 2),
        ),
        Space(
            name="depth_scaling",
            description="n_layers 4 to 64 for standard, Full and Block AttnRes (N = 4 AttnRes "
            "blocks) and mHC, 3 seeds",
            base={**ABLATION, "model.attnres_blocks": 4},
            arms={**CORE, "mhc": {"model.residual": "mhc"}},
            params={"model.n_layers": Choice((4, 8, 16, 32, 64))},
            seeds=(0, 1, 2),
        ),
        Space(
            name="attnres_blocks",
            description="Block AttnRes at N = 1, 2, 4, 8, 16 AttnRes blocks and Full AttnRes, "
            "at 16 layers (32 sublayers; the paper's Fig. 6), 3 seeds",
            base={**ABLATION, "model.n_layers": 16},
            arms=_blocks(),
            seeds=(0, 1, 2),
        ),
        Space(
            name="attnres_ablation",
            description="the AttnRes paper's ablation table (Table 4) at CPU size: baseline, "
            "DenseFormer, mHC-lite (the paper's mHC) and Sinkhorn mHC, Full AttnRes and each "
            "design switch, Block AttnRes and its switches, and Delta AttnRes (Full and Block), "
            "at 8 layers, Block at N = 4 AttnRes blocks (of 4 sublayers, as in the paper), 3 seeds",
            base=TABLE4_SIZE,
            arms=_table4(),
            seeds=(0, 1, 2),
        ),
        Space(
            name="compute_frontier",
            description="iso-FLOP curves: 3 FLOP budgets (3e10, 1e11, 3e11) x n_layers 2, 4, 8 "
            "at width 32 for standard and Block AttnRes (N = 4 AttnRes blocks), steps derived from "
            "each budget, 2 seeds "
            "(about 4 minutes on 2 CPU cores at --concurrency 2)",
            base={**BUDGETED, "model.d_model": 32, "model.n_heads": 2},
            arms={"standard": CORE["standard"], "block_attnres": CORE["block_attnres"]},
            params={
                "train.target_flops": Choice(FRONTIER_BUDGETS),
                "model.n_layers": Choice((2, 4, 8)),
            },
            seeds=(0, 1),
        ),
        Space(
            name="architecture_sweep",
            description="the AttnRes paper's Fig. 7 at one FLOP budget (3e11): d_model/n_layers "
            "6, 16, 48 x n_heads/n_layers 0.5, 1 for standard and Block AttnRes (N = 4 AttnRes "
            "blocks), 2 seeds (about "
            "3 minutes on 2 CPU cores at --concurrency 2)",
            base={**BUDGETED, "train.target_flops": 3e11},
            arms=_architectures(),
            seeds=(0, 1),
        ),
        Space(
            name="tune_lr",
            description="TPE search over learning rate, warm-up and width for one architecture "
            "(set it with --set model.residual=...)",
            kind="search",
            base={**ABLATION, "model.n_layers": 8},
            params={
                "train.lr": FloatRange(1e-4, 1e-2, log=True),
                "train.warmup_steps": IntRange(0, 300),
                "model.d_model": Choice((64, 128, 192, 256)),
            },
            trials=20,
        ),
        Space(
            name="lr_transfer",
            description="optimal learning rate against depth (CompleteP's Fig. 1): n_layers 2, 4, "
            "8 at width 32 for standard and Block AttnRes (N = 4 AttnRes blocks) under sp and "
            "CompleteP, a stage of 5 "
            "learning rates each, then one seed at the best (72 trials: 27 minutes measured on a "
            "busy 2-core machine at --concurrency 2 --cpus-per-trial 1)",
            base=TRANSFER_SIZE,
            arms=_transfer_arms(),
            params={"model.n_layers": Choice(TRANSFER_DEPTHS)},
            seeds=(1,),  # a second seed at each best value: the stage ran seed 0
            tune=TRANSFER_STAGE,
        ),
        Space(
            name="depth_gpt2",
            description="the depth study at GPT-2 small scale, for GPUs: standard, Block AttnRes "
            "(N = 8 AttnRes blocks) and Full AttnRes at 12, 24 and 48 layers of width 768, "
            "context 1024, 512 sequences per step for 5,000 steps (2.6B tokens), a stage of 3 "
            "learning rates per arm and depth then 3 seeds (54 trials); run it on an adopted "
            "corpus (--set data.source=shards --set data.path=DIR); plan it with --device-memory "
            "and --peak-flops",
            base=GPT2_SIZE,
            arms=CORE,
            params={"model.n_layers": Choice(GPT2_DEPTHS)},
            seeds=(0, 1, 2),
            tune=GPT2_STAGE,
        ),
        Space(
            name="depth_gpt2_cpu",
            description="depth_gpt2's twin at CPU size: the same arms (Block AttnRes at N = 8 "
            "AttnRes blocks), stage and depth ratios at 4, 8 and 16 layers of width 64, 200 "
            "steps of 16 sequences of 64 (54 trials)",
            base=GPT2_TWIN_SIZE,
            arms=CORE,
            params={"model.n_layers": Choice(GPT2_TWIN_DEPTHS)},
            seeds=(0, 1, 2),
            tune=GPT2_TWIN_STAGE,
        ),
        Space(
            name="pareto_size",
            description="multi-objective TPE: validation loss against parameter count over "
            "residual type (Block AttnRes at N = 8 AttnRes blocks), depth and width",
            kind="search",
            base=ABLATION,
            params={
                "model.residual": Choice(("standard", "attnres", "block_attnres")),
                "model.n_layers": Choice((4, 8, 16)),
                "model.d_model": Choice((64, 128, 192)),
            },
            trials=24,
            objectives=(Objective("val/loss"), Objective("params")),
        ),
        Space(
            name="pareto_decode",
            description="multi-objective TPE: validation loss against decode speed (greedy "
            "tokens per second at batch 1 with the KV cache, measured after training: "
            "trainers.measure.decode_cost) over residual type (Block AttnRes at N = 8 AttnRes "
            "blocks), depth and width",
            kind="search",
            base=ABLATION,
            params={
                "model.residual": Choice(("standard", "attnres", "block_attnres", "mhc")),
                "model.n_layers": Choice((4, 8, 16)),
                "model.d_model": Choice((64, 128, 192)),
            },
            trials=24,
            objectives=(Objective("val/loss"), Objective("decode/tokens_per_s", "max")),
        ),
    )
}

# The demo spaces a user reruns with each arm at its own learning rate: what the stage costs.
TUNED_COST = {
    "demo": "10 more trials: about 7 minutes on 2 CPU cores at --concurrency 2, estimated from "
    "the demo's 475 s for 12",
    "quick": "30 more trials: about 20 minutes on 2 CPU cores, estimated from the 6 minutes "
    "quick took in docs/results",
    "attnres_ablation": "105 more trials, each as long as one of its seeds",
}


def _with_tuned(spaces: dict[str, Space]) -> dict[str, Space]:
    """``spaces`` with each space of ``TUNED_COST`` followed by its tuned variant."""
    out: dict[str, Space] = {}
    for name, space in spaces.items():
        out[name] = space
        if name in TUNED_COST:
            tuned = _tuned(space, TUNED_COST[name])
            out[tuned.name] = tuned
    return out


BUILTIN: dict[str, Space] = _with_tuned(_PLAIN)
