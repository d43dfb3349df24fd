"""The budgeted built-in spaces: compute_frontier (iso-FLOP curves) and architecture_sweep (the
AttnRes paper's Fig. 7 at one budget) expand to valid cells whose lengths come from their
budgets."""

from __future__ import annotations

from search_spaces import BUILTIN, grid_cells
from trainers.budget import budget_params
from trainers.config import RunConfig
from trainers.flops import train_flops

# (wiring, n_layers, budget) -> max_steps, as README documents them
FRONTIER_STEPS = {
    ("standard", 2, 3e10): 133,
    ("standard", 8, 3e10): 40,
    ("standard", 2, 3e11): 1325,
    ("standard", 8, 3e11): 398,
    ("block_attnres", 8, 3e10): 39,
    ("block_attnres", 2, 3e11): 1293,
}


def _trained(cfg: RunConfig) -> int:
    return train_flops(cfg.model, cfg.train.max_steps, cfg.train.batch_size)


def test_compute_frontier_is_budgets_by_depths_by_two_wirings() -> None:
    """36 valid cells (3 budgets x 3 depths x 2 wirings x 2 seeds); each trains its budget to
    within one step, with the documented step counts and a 10% warm-up."""
    cells, skipped = grid_cells(BUILTIN["compute_frontier"], RunConfig())
    assert not skipped and len(cells) == 36
    seen = {}
    for cell in cells:
        m, t = cell.config.model, cell.config.train
        per_step = train_flops(m, 1, t.batch_size)
        assert t.target_flops <= _trained(cell.config) < t.target_flops + per_step
        assert t.warmup_steps == round(0.1 * t.max_steps)
        seen[(m.residual, m.n_layers, t.target_flops)] = t.max_steps
    assert {k: seen[k] for k in FRONTIER_STEPS} == FRONTIER_STEPS
    assert {k[0] for k in seen} == {"standard", "block_attnres"}
    assert {k[2] for k in seen} == {3e10, 1e11, 3e11} and {k[1] for k in seen} == {2, 4, 8}


def test_architecture_sweep_is_fig7_s_grid_at_one_budget() -> None:
    """24 valid cells: d_model/n_layers in {6, 16, 48} x n_heads/n_layers in {0.5, 1} x 2
    wirings x 2 seeds, each at the one budget and near 2e5 sublayer weights."""
    cells, skipped = grid_cells(BUILTIN["architecture_sweep"], RunConfig())
    assert not skipped and len(cells) == 24
    shapes = set()
    for cell in cells:
        m = cell.config.model
        assert cell.config.train.target_flops == 3e11
        assert 3e11 <= _trained(cell.config) < 3e11 + train_flops(m, 1, 16)
        assert 190_000 <= budget_params(m) <= 225_000
        shapes.add((m.d_model / m.n_layers, m.n_heads / m.n_layers))
        assert cell.arm.split("/")[1:] == [
            f"d_per_L={m.d_model // m.n_layers}",
            f"H_per_L={m.n_heads / m.n_layers:g}",
        ]
    assert shapes == {(r, h) for r in (6, 16, 48) for h in (0.5, 1)}
