"""The report labels LAuReL-LR by its rank and a k x p DenseFormer by its dilation and period, so
that arms differing only there are not drawn as one wiring."""

from __future__ import annotations

import pandas as pd
import pytest

from reports.ablation import WIRING_KEYS, wiring_label

ROW = {"model.placement": "pre", "model.norm_scaling": "none"}


@pytest.mark.parametrize(
    "fields,label",
    [
        ({"model.residual": "laurel_lr", "model.laurel_rank": "8"}, "laurel_lr/pre/r=8"),
        ({"model.residual": "laurel_lr"}, "laurel_lr/pre/r=16"),  # a record from before the field
        ({"model.residual": "laurel_rw", "model.laurel_rank": 16}, "laurel_rw/pre"),
        (
            {"model.residual": "denseformer", "model.dense_dilation": 4.0, "model.dense_period": 5},
            "denseformer/pre/4x5",
        ),
        (
            {"model.residual": "denseformer", "model.dense_dilation": "1", "model.dense_period": 1},
            "denseformer/pre",
        ),
        (
            {"model.residual": "denseformer", "model.dense_dilation": float("nan")},
            "denseformer/pre",
        ),
    ],
)
def test_rank_and_kxp_in_the_wiring_label(fields: dict[str, object], label: str) -> None:
    """Values arrive as ints, floats or MLflow's strings; absent ones are the defaults."""
    assert wiring_label(pd.Series({**ROW, **fields})) == label


def test_rank_dilation_and_period_are_wiring_keys() -> None:
    """An arm that sets them is compared with the standard baseline, not taken for context."""
    assert {"model.laurel_rank", "model.dense_dilation", "model.dense_period"} <= set(WIRING_KEYS)
