"""The report tells an attention variant (model.attention) from the standard baseline."""

from __future__ import annotations

import pandas as pd

from reports.ablation import is_baseline, wiring_label


def test_value_residual_arm_is_not_a_baseline_and_is_labelled() -> None:
    """A standard/pre arm with ResFormer's value residual is an arm, not the baseline; a record
    from before the field existed (no value) ran the standard attention."""
    row = {"model.residual": "standard", "model.placement": "pre", "model.norm_scaling": "none"}
    resformer = pd.Series({**row, "model.attention": "value_residual"})
    assert not is_baseline(resformer)
    assert wiring_label(resformer) == "standard/pre/value_residual"
    for value in ("standard", float("nan")):
        assert is_baseline(pd.Series({**row, "model.attention": value}))
    assert is_baseline(pd.Series(row))
    assert wiring_label(pd.Series({**row, "model.attention": "standard"})) == "standard/pre"
