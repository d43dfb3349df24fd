"""The reference section's Table 4 comparison: each AttnRes arm that sets a design switch against
the unswitched arm of its own residual (Full or Block), paired by seed, with the paper's Δ for the
row beside it and whether the two agree."""

from __future__ import annotations

from reports.ablation import arm_rows
from reports.document import Table
from reports.sections.reference import reference_section
from tests.reports.frames import sweep, trial

SEEDS = (0, 1, 2)


def _arm(arm: str, losses: tuple[float, ...], **config: object) -> list[dict[str, object]]:
    return [trial(arm, s, loss, **config) for s, loss in zip(SEEDS, losses, strict=True)]


def _table(rows: list[dict[str, object]]) -> Table:
    data = sweep(rows)
    section = reference_section(data, arm_rows(data.view))
    (table,) = [b for b in section.blocks if isinstance(b, Table) and "own unswitched" in b.caption]
    return table


def test_each_switched_arm_is_compared_with_its_own_wirings_unswitched_arm() -> None:
    """static_input (Table 4's input-dependent row) resolves lower than Full on every seed: it
    agrees with the paper's -0.006; the raw input query resolves higher, which has no row; the
    Block arm with heads is compared with Block, not Full, and is unresolved."""
    full = {"model__residual": "attnres"}
    block = {"model__residual": "block_attnres"}
    rows = (
        _arm("standard", (2.10, 2.12, 2.11))
        + _arm("attnres", (2.00, 2.05, 2.02), **full)
        + _arm(
            "attnres/query=static_input",
            (1.95, 2.01, 1.97),
            **full,
            model__attnres_query="static_input",
        )
        + _arm("attnres/query=input", (2.50, 2.60, 2.55), **full, model__attnres_query="input")
        + _arm("block_attnres", (2.03, 2.06, 2.04), **block)
        + _arm("block_attnres/heads=16", (2.02, 2.08, 2.03), **block, model__attnres_heads=16)
    )
    by_arm = {r[0]: r for r in _table(rows).rows}
    assert set(by_arm) == {
        "attnres/query=static_input",
        "attnres/query=input",
        "block_attnres/heads=16",
    }
    chosen = by_arm["attnres/query=static_input"]
    assert chosen[1:4] == ("attnres", "Full + input-dependent query", "-0.006")
    assert chosen[4].startswith("-0.0467 [")
    assert chosen[5:] == ("better", "agrees")
    assert by_arm["attnres/query=input"][2:4] == ("—", "—")
    assert by_arm["attnres/query=input"][5:] == ("worse", "—")
    heads = by_arm["block_attnres/heads=16"]
    assert heads[1:4] == ("block_attnres", "Block + multi-head (H = 16)", "+0.006")
    assert heads[5:] == ("not significant", "unresolved")
