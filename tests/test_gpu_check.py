"""What ``benchmarks/gpu/gpu_check.sh`` runs on a lent GPU, checked without one: the memory plan's
GPU settings are the issue's and fit an H200 with margin, every stage takes a budget, and the dry
run's printout lists every stage."""

from __future__ import annotations

import functools
import inspect
import re
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.gpu import gpu_plan
from benchmarks.model import memory_plan as mp
from trainers.measure.memory_plan import memory_plan

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu" / "gpu_check.sh"
H200_BYTES = 139 * 2**30


def _stages() -> list[str]:
    found = re.search(r"^benches=\((.*)\)$", SCRIPT.read_text(), re.MULTILINE)
    assert found, "gpu_check.sh names its benchmarks in one benches=(...) line"
    return found.group(1).split()


def test_memory_plans_gpu_settings_are_the_issues() -> None:
    """d_model 1024, n_layers 32 first, seq_len 1024, a global batch of 16 in micro-batches of
    4 and 8, checkpointing none and sublayer, for standard, Block and Full AttnRes and mHC, in
    'auto' precision: bf16-mixed on a GPU."""
    s = mp.settings(False, "cuda")
    assert s["dims"]["d_model"] == 1024 and s["dims"]["seq_len"] == 1024
    assert s["depths"][0] == 32 and s["batch"] == 16 and s["micro_batches"] == [4, 8]
    assert mp.DEVICE_ARMS == ("standard", "block_attnres", "attnres", "mhc")
    assert mp.CHECKPOINTING == ("none", "sublayer")
    cfg = mp.device_config("standard", 32, 4, s, "none")
    assert cfg.train.precision == "auto" and memory_plan(cfg, gpu=True).precision == "bf16-mixed"
    assert mp.settings(True, "cpu") != s and mp.settings(False) != s  # the CPU's own


# What bf16-mixed holds per parameter between steps, as trainers.training.module trains (the
# plan assumes the same, but these figures are the optimizer's, not the plan's): the float32
# weight itself and AdamW's exp_avg and exp_avg_sq, both float32; during a step also its float32
# gradient.
WEIGHT_BYTES, ADAM_BYTES, GRAD_BYTES = 4, 2 * 4, 4


def _hand_params(arm: str, n_layers: int, dims: dict[str, int], streams: int = 4) -> int:
    """The GPU check's models' parameters, counted from the architecture (variants.md), not from
    the memory plan: a tied embedding; per block the attention's four d x d projections, the
    MLP's d x 4d and 4d x d (no biases) and two RMSNorm gains; the final norm's gain. AttnRes
    (Full and Block alike) adds a query and a key-norm gain of d at each of its 2L + 1 sites,
    (4 L + 2) d; mHC at each of its 2L sites the three maps from the flattened n d stream (to
    H_pre's n, H_post's n and H_res's n^2 logits), their three gating scalars and their biases."""
    d, vocab = dims["d_model"], dims["vocab_size"]
    block = 4 * d * d + 2 * d * 4 * d + 2 * d
    plain = vocab * d + n_layers * block + d
    n = streams
    extra = {
        "standard": 0,
        "attnres": (4 * n_layers + 2) * d,
        "block_attnres": (4 * n_layers + 2) * d,
        "mhc": 2 * n_layers * (n * d * (n + n + n * n) + 3 + n + n + n * n),
    }
    return plain + extra[arm]


def test_the_hand_count_is_the_gpu_checks_models() -> None:
    """The hand count above is each of the four wirings' model at the GPU check's width and
    depth, built on the meta device (no memory), and its arithmetic for standard is written out:
    262,144 embedding + 32 x 12,584,960 per block + 1,024 final gain."""
    from benchmarks.common import existing_path
    from trainers.model.transformer import DeepTransformer, num_params

    s = mp.settings(False, "cuda")
    assert _hand_params("standard", 32, s["dims"]) == 262_144 + 32 * 12_584_960 + 1_024
    for arm in mp.DEVICE_ARMS:
        for depth in s["depths"]:
            cfg = mp.device_config(arm, depth, s["micro_batches"][0], s, "none")
            with torch.device("meta"):
                built = num_params(existing_path(DeepTransformer(cfg.model)))
            assert built == _hand_params(arm, depth, s["dims"]), (arm, depth)


def _saved_bytes(cfg: Any) -> int:
    """Bytes one forward and loss of ``cfg``'s micro-batch save for the backward, under CPU
    bfloat16 autocast as the GPU check's step runs (``benchmarks.model.memory_plan.device_step``),
    each storage once, the parameters left out (autocast's bfloat16 weight copies counted).
    Counted by ``saved_tensors_hooks`` on the real model at the real size under
    ``FakeTensorMode``: every tensor has its shape and dtype and no memory."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.multiprocessing.reductions import StorageWeakRef

    from benchmarks.common import existing_path
    from trainers.model.checkpointing import enable_checkpointing
    from trainers.model.loss import lm_loss
    from trainers.model.transformer import DeepTransformer

    saved: dict[int, int] = {}
    with FakeTensorMode():
        model = existing_path(DeepTransformer(cfg.model).train())
        enable_checkpointing(model, cfg.train.checkpointing)
        weights = {StorageWeakRef(p.untyped_storage()).cdata for p in model.parameters()}

        def pack(t: torch.Tensor) -> torch.Tensor:
            key = StorageWeakRef(t.untyped_storage()).cdata
            if key not in weights and t.dtype.is_floating_point:
                saved[key] = t.untyped_storage().nbytes()
            return t

        idx = torch.randint(0, cfg.model.vocab_size, (cfg.train.micro_batch, cfg.model.seq_len))
        hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        with hooks, torch.autocast("cpu", torch.bfloat16):
            lm_loss(model(idx), idx)
    return sum(saved.values())


@functools.cache
def _mhc_saved(depth: int, micro: int) -> int:
    """``_saved_bytes`` of the GPU check's mHC model (no checkpointing) at a depth."""
    s = mp.settings(False, "cuda")
    return _saved_bytes(mp.device_config("mhc", depth, micro, s, "none"))


def test_every_mhc_block_after_the_first_saves_the_same() -> None:
    """What the test below reads at 32 blocks it counts at two, three and four: the blocks are
    identical and mHC keeps nothing across them but its streams, so each block after the first
    saves the same, exactly. (Counting 32 blocks directly is slow: 20 Sinkhorn iterations at
    each of 64 sites.)"""
    micro = max(mp.settings(False, "cuda")["micro_batches"])
    two, three, four = (_mhc_saved(n, micro) for n in (2, 3, 4))
    assert four - three == three - two > 0


def test_a_memory_plan_group_fits_an_h200_with_half_to_spare() -> None:
    """A (depth, micro-batch) group builds and times its wirings in sets (``timing_sets``:
    standard's two models, with and without checkpointing, beside each other wiring's two), keeps
    each set's models between their steps (parameters and AdamW's states) and runs one step at a
    time; the deepest group at the larger micro-batch holds the most (the other three hold the
    same models at fewer blocks or fewer sequences), and its set with mHC, whose models and step
    are the largest, most of all. Independent of the memory plan: what each set's models hold,
    from the hand count; what mHC's step adds at least (its gradients, held from the first
    micro-batch through the second, and every tensor its forward saves for the backward, counted
    on the model: at 32 blocks, two blocks' count and 30 more blocks at the count per block
    checked above). The set needs at least their sum, which must stay under half of an H200."""
    s = mp.settings(False, "cuda")
    depth, micro = max(s["depths"]), max(s["micro_batches"])
    mhc_set = next(arms for arms in mp.timing_sets() if "mhc" in arms)
    resident = sum(
        (WEIGHT_BYTES + ADAM_BYTES) * _hand_params(arm, depth, s["dims"])
        for arm in mhc_set
        for _ in mp.CHECKPOINTING
    )
    per_block = _mhc_saved(3, micro) - _mhc_saved(2, micro)
    saved = _mhc_saved(2, micro) + (depth - 2) * per_block
    mhc_step = GRAD_BYTES * _hand_params("mhc", depth, s["dims"]) + saved
    assert resident + mhc_step < H200_BYTES / 2


def test_every_wiring_is_timed_beside_standard_and_a_set_holds_two_wirings() -> None:
    """Every wiring of the stage is in a timing set with standard (its 'vs standard' comes from
    the same rounds), and no set holds more than two wirings' models."""
    sets = mp.timing_sets()
    assert {arm for arms in sets for arm in arms} == set(mp.DEVICE_ARMS)
    assert all(arms[0] == "standard" and len(arms) <= 2 for arms in sets)


def test_every_stage_takes_a_budget_and_a_device() -> None:
    """Each benchmark gpu_check.sh runs is budgeted (its run takes a deadline: --budget-s) and
    runs on a GPU (its run takes a device), the memory plan among them."""
    assert "model.memory_plan" in _stages()
    for name in _stages():
        params = inspect.signature(import_module(f"benchmarks.{name}").run).parameters
        assert {"deadline", "device"} <= set(params), name


def test_the_dry_runs_printout_lists_every_stage() -> None:
    """benchmarks.gpu.gpu_plan, what the dry run prints, has a line for every stage, and the memory
    plan's names its GPU settings."""
    lines = gpu_plan.plan()
    for name in (s.rsplit(".", 1)[-1] for s in _stages()):
        assert any(line.startswith(f"  {name}:") for line in lines), name
    line = next(x for x in lines if x.startswith("  memory_plan:"))
    assert "d_model 1024" in line and "n_layers 32" in line and "bf16-mixed" in line


def test_the_general_stages_keep_block_attnres_off_the_fused_kernels() -> None:
    """``existing_path`` overrides even a stream forced onto the fused path: with the two phases
    swapped for a function that fails when called, a pinned model never calls it and gives the
    unpinned existing path's logits exactly. (On a GPU with flash-attn-res, the package's
    autotuning on every new shape took the first check past each stage's budget.)"""
    from benchmarks.common import config, existing_path
    from trainers.model.transformer import DeepTransformer

    cfg = config("block_attnres", d_model=16, n_heads=2, n_layers=2, seq_len=8, vocab_size=32)
    torch.manual_seed(0)
    model = DeepTransformer(cfg)
    idx = torch.randint(0, cfg.vocab_size, (2, cfg.seq_len))
    expected = model(idx)

    def phase(*_: object) -> tuple[torch.Tensor, torch.Tensor]:
        raise AssertionError("the fused kernels ran")

    stream: Any = model.stream
    stream.fused, stream.kernels = True, (phase, phase)
    with pytest.raises(AssertionError, match="the fused kernels ran"):
        model(idx)  # forced on, it takes them
    assert torch.equal(existing_path(model)(idx), expected)  # pinned, it does not
    standard = DeepTransformer(config("standard", d_model=16, n_heads=2, n_layers=2, seq_len=8))
    assert not hasattr(existing_path(standard).stream, "fused")


def test_the_headline_table_reads_eager_then_compiled_then_fused_per_shape() -> None:
    """The table's order: each shape's eager rows, then its compiled rows, then the fused rows
    (Full and Block AttnRes, the wirings with kernels); GPT-2 small first, at its shape."""
    from benchmarks.gpu import gpu_table as gt

    order = list(gt.cells(gt.SHAPES))
    assert order[0] == ("gpt2_small", "eager", "standard")
    first = [(m, w) for s, m, w in order if s == "gpt2_small"]
    modes = [m for m, _ in first]
    assert modes == sorted(modes, key=gt.MODES.index)
    assert [w for m, w in first if m == "fused"] == ["attnres", "block_attnres"]
    assert len(order) == len(gt.SHAPES) * (2 * len(gt.WIRINGS) + 2)
    small = gt.shape_config("standard", gt.SHAPES["gpt2_small"])
    assert (small.d_model, small.n_layers, small.seq_len, small.vocab_size) == (
        768,
        12,
        1024,
        50304,
    )


def test_the_micro_batch_fits_every_wiring_of_the_shape() -> None:
    """On an H200's share, the chosen micro-batch's plan fits every wiring and the next larger
    divisor of the batch does not fit all of them (so the largest that fits was chosen)."""
    from benchmarks.gpu import gpu_table as gt
    from trainers.config import RunConfig, TrainConfig
    from trainers.measure.memory_fit import GPU_HEADROOM

    budget = GPU_HEADROOM.usable(H200_BYTES)
    for dims in gt.SHAPES.values():
        micro = gt.micro_batch(dims, budget, quick=False)

        def plans(m: int, dims: dict[str, int] = dims) -> list[float]:
            return [
                memory_plan(
                    RunConfig(model=gt.shape_config(w, dims), train=TrainConfig(batch_size=m)),
                    gpu=True,
                ).total
                for w in gt.WIRINGS
            ]

        assert max(plans(micro)) <= budget
        larger = [m for m in range(micro + 1, gt.BATCH + 1) if gt.BATCH % m == 0]
        assert not larger or max(plans(larger[0])) > budget


def test_a_table_stopped_mid_way_keeps_every_row_it_measured(tmp_path: Path) -> None:
    """The quick table on the CPU, killed (SIGKILL, as a timeout's last resort) once a few rows
    are written: the rows already measured stay on disk, each a whole JSON line with its
    figures, and the Markdown table holds the same rows."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    root = SCRIPT.parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "benchmarks.gpu.gpu_table", "--quick", "--out", str(tmp_path)]
    proc = subprocess.Popen(
        cmd, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    rows = tmp_path / "headline.jsonl"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            if rows.exists() and len(rows.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    kept = [json.loads(line) for line in rows.read_text().splitlines()]
    assert len(kept) >= 3
    assert [(r["mode"], r["wiring"]) for r in kept[:3]] == [
        ("eager", "standard"),
        ("eager", "attnres"),
        ("eager", "block_attnres"),
    ]
    assert all(r["step_s"] > 0 and r["tokens_per_s"] > 0 and r["mfu"] > 0 for r in kept)
    assert kept[0]["ratio"] == 1.0
    table = (tmp_path / "headline.md").read_text().splitlines()
    assert len(table) == 2 + len(kept)  # the header, its rule, one line per kept row


def test_rows_past_the_budget_are_written_as_skipped(tmp_path: Path) -> None:
    """A spent budget measures nothing and still writes the whole table, each row saying why;
    the fused row on a CPU gives the dispatch rule's reason."""
    from benchmarks.common import Deadline
    from benchmarks.gpu import gpu_table as gt

    rows = gt.run(True, "cpu", tmp_path, Deadline.after(-1))
    assert len(rows) == len(list(gt.cells(gt.QUICK_SHAPES)))
    assert all(r.step_s is None and r.note.startswith("skipped") for r in rows)
    assert len((tmp_path / "headline.jsonl").read_text().splitlines()) == len(rows)
    fused = gt._fused_reason(gt.shape_config("block_attnres", gt.QUICK_SHAPES["tiny"]), "cpu")
    assert "CUDA only" in fused


def test_the_script_runs_from_any_folder_and_says_what_it_skipped(tmp_path: Path) -> None:
    """The dry run of the script itself, started from another folder with a budget too small for
    any stage: it finds the checkout and this interpreter, prints the plan of every stage, and
    ends by naming each stage it skipped and why. A script that loses the checkout fails a lent
    GPU's first command at its first import."""
    import os
    import subprocess
    import sys

    out = tmp_path / "out"
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "BUDGET_S": "5",
        "OUT": str(out),
        "PYTHON": sys.executable,
    }
    env.pop("PYTHONPATH", None)
    done = subprocess.run(
        ["bash", str(SCRIPT)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert "dry run on the CPU: tiny settings; a GPU run would cover:" in lines
    assert all(line in lines for line in gpu_plan.plan())
    skipped = [line for line in lines if line.startswith("  skipped: ")]
    for name in (s.rsplit(".", 1)[-1] for s in _stages()):
        assert any(line.startswith(f"  skipped: {name} (") for line in skipped), name
    assert out.is_dir()
