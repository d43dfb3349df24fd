"""The GPU check's cell of the depth study (``benchmarks.gpu.fused_block.study_config`` and
``study_cell``): depth_gpt2's largest cell at the micro-batch the 80 GiB plan picks, measured
standard, Block AttnRes unfused and Block AttnRes as the dispatch rule has it; on the CPU dry run
the same at tiny sizes, never fused."""

from __future__ import annotations

import dataclasses

from benchmarks.gpu.fused_block import STUDY_DEVICE_BYTES, study_cell, study_config
from search_spaces import BUILTIN
from trainers.measure.memory_fit import GPU_HEADROOM
from trainers.measure.memory_plan import memory_plan


def test_the_cell_is_the_studys_largest_at_the_micro_batch_that_fits() -> None:
    space = BUILTIN["depth_gpt2"]
    cfg = study_config("block_attnres", quick=False)
    assert cfg.model.n_layers == max(space.params["model.n_layers"].values)
    assert (cfg.model.d_model, cfg.model.seq_len) == (768, 1024)
    assert cfg.train.batch_size == 2 * cfg.train.micro_batch  # two micro-batches per step
    usable = GPU_HEADROOM.usable(STUDY_DEVICE_BYTES)
    assert memory_plan(cfg, gpu=True).total <= usable
    # the next larger micro-batch would not fit: the largest that does
    bigger = cfg.train.micro_batch * 2
    wider = dataclasses.replace(
        cfg, train=dataclasses.replace(cfg.train, batch_size=2 * bigger, micro_batch=bigger)
    )
    assert memory_plan(wider, gpu=True).total > usable


def test_the_dry_run_measures_all_three_and_never_fuses_on_a_cpu() -> None:
    """On a CPU the rule keeps the Block AttnRes arm left to it on the existing path, and that
    arm is then the pinned existing arm's computation exactly: its model took the buffered path
    for the rule's reason, and from the same weights and tokens it gives the same loss at every
    timed step and the same measured peak, bit for bit. A CPU arm that fell onto another path
    (its bookkeeping, its dtype) would differ in both; the kernels' own check is the
    interpreter's (tests/trainers/test_attnres_fused.py)."""
    out = study_cell("cpu", quick=True)
    assert out["dispatch"]["fused"] is False and "CUDA only" in out["dispatch"]["reason"]
    cells = out["cells"]
    assert set(cells) == {"standard", "block", "block_fused"}
    for cell in cells.values():
        assert cell["measured"] > 0 and cell["step_s"] is not None
    block, rule = cells["block"], cells["block_fused"]
    assert block["path"][0] == rule["path"][0] == "buffered"
    assert "pinned off" in block["path"][1] and "CUDA only" in rule["path"][1]
    assert len(rule["losses"]) == len(block["losses"]) > 0
    assert rule["losses"] == block["losses"]
    assert rule["measured"] == block["measured"]
    # the three arms are not one computation: standard, another wiring, trains otherwise
    assert cells["standard"]["losses"] != block["losses"]
