"""The published Table 4 beside a sweep names each Block AttnRes row's N as the paper ran it
(N = 8 AttnRes blocks of S = 4 sublayers over 16 layers), and where the sweep's N differs, the
row says both."""

from __future__ import annotations

from typing import Any

from reports.ablation import arm_rows
from reports.document import Paragraph, Table
from reports.published import TABLE4, TABLE4_SUBLAYERS, paper_arm, published_for
from reports.sections.reference import reference_section
from tests.reports.frames import sweep, trial

DEMO = {"model.residual": "block_attnres", "model.n_layers": 8, "model.attnres_blocks": 4}


def test_the_papers_block_rows_ran_n_8_of_4_sublayers() -> None:
    """Table 4's Block rows (docs/variants.md: "AttnRes Block (S = 4 -> N = 8)") are matched by
    what they are, Block AttnRes and its switch, at any N, and carry the paper's N = 8 over its
    32 sublayers."""
    rows = [r for r in TABLE4 if r.residual == "block_attnres"]
    assert len(rows) == 3 and {r.attnres_blocks for r in rows} == {8}
    assert TABLE4_SUBLAYERS // 8 == 4
    for n in (1, 4, 8, 16):
        found = published_for({**DEMO, "model.attnres_blocks": n})
        assert found is not None and found.label == "AttnRes Block (N = 8)"


def test_a_different_n_is_said_in_the_row() -> None:
    """The demo's N = 4 at 8 layers (S = 4, the paper's block size) and N = 3 at 4 layers
    (unequal blocks) each say the sweep's N beside the paper's; at the paper's N the label is
    the paper's alone. Rows other than Block AttnRes's never change."""
    block = published_for(DEMO)
    assert block is not None
    assert paper_arm(block, DEMO) == (
        "AttnRes Block (N = 8); sweep N = 4, paper N = 8 (S = 4 in both)"
    )
    uneven = {**DEMO, "model.n_layers": 4, "model.attnres_blocks": 3}
    assert paper_arm(block, uneven) == (
        "AttnRes Block (N = 8); sweep N = 3, paper N = 8 (S = 3,3,2 here, 4 in the paper)"
    )
    assert paper_arm(block, {**DEMO, "model.attnres_blocks": 8}) == "AttnRes Block (N = 8)"
    mlflow = {k: str(v) for k, v in DEMO.items()}  # as a store returns params: text
    assert paper_arm(block, mlflow) == paper_arm(block, DEMO)
    standard = published_for({"model.residual": "standard"})
    assert standard is not None
    assert paper_arm(standard, {"model.residual": "standard", "model.n_layers": 8}) == (
        "Baseline (PreNorm)"
    )


def test_a_different_window_or_head_count_is_said_in_the_row() -> None:
    """Table 4's window row ran W = 1 + 8 and its multi-head row H = 16: a sweep's W = 4 (the
    Table 4 ablation's) or H = 4 is named beside the paper's; at the paper's numbers the label
    is the paper's alone. A multi-head Block row at another N says both differences."""
    full = {"model.residual": "attnres", "model.n_layers": 8}
    window = published_for({**full, "model.attnres_window": 4})
    assert window is not None and window.label == "Full, sliding window (W = 1 + 8)"
    assert paper_arm(window, {**full, "model.attnres_window": "4"}) == (
        "Full, sliding window (W = 1 + 8); sweep W = 4, paper W = 8"
    )
    assert paper_arm(window, {**full, "model.attnres_window": 8}) == window.label
    heads = published_for({**DEMO, "model.attnres_heads": 4})
    assert heads is not None and heads.label == "Block + multi-head (H = 16)"
    assert paper_arm(heads, {**DEMO, "model.attnres_heads": 4}) == (
        "Block + multi-head (H = 16); sweep N = 4, paper N = 8 (S = 4 in both); "
        "sweep H = 4, paper H = 16"
    )


def _demo(**block: Any) -> list[dict[str, Any]]:
    config = {"model__n_layers": 8, "model__attnres_blocks": 8}
    return [
        *[trial("standard", s, 3.0 + s / 100, **config) for s in range(3)],
        *[
            trial(
                "block_attnres",
                s,
                2.9 + s / 100,
                **{**config, "model__residual": "block_attnres", **block},
            )
            for s in range(3)
        ],
    ]


def _beside(rows: list[dict[str, Any]]) -> tuple[dict[str, str], str]:
    data = sweep(rows)
    section = reference_section(data, arm_rows(data.view))
    (table,) = [b for b in section.blocks if isinstance(b, Table) and "beside" in b.caption]
    text = " ".join(b.text for b in section.blocks if isinstance(b, Paragraph))
    return {r[0]: r[1] for r in table.rows}, text


def test_the_report_row_says_the_sweeps_n_where_it_differs() -> None:
    """The demo's shape (8 layers, Block AttnRes at N = 4): its row of the published table says
    "sweep N = 4, paper N = 8", and a note says that N counts AttnRes blocks, not Transformer
    blocks; at N = 8 neither appears."""
    paper, text = _beside(_demo(model__attnres_blocks=4))
    assert paper["block_attnres"] == (
        "AttnRes Block (N = 8); sweep N = 4, paper N = 8 (S = 4 in both)"
    )
    assert paper["standard"] == "Baseline (PreNorm)"
    assert "N counts AttnRes blocks (`model.attnres_blocks`), not Transformer blocks" in text
    same, text = _beside(_demo())
    assert same["block_attnres"] == "AttnRes Block (N = 8)"
    assert "N counts AttnRes blocks" not in text
