"""The named arms the benchmark scripts compare: every wiring in its usual placement, plus the
placement and norm-scaling variants of the standard residual."""

from __future__ import annotations

from typing import Any

ARMS: dict[str, dict[str, Any]] = {
    "standard": {},
    "post": {"placement": "post"},
    "sandwich": {"placement": "sandwich"},
    "mix_ln": {"placement": "mix"},
    "lns": {"norm_scaling": "lns"},
    "rezero": {"residual": "rezero", "placement": "none"},
    "rezero_pre": {"residual": "rezero"},
    "rezero_shared": {"residual": "rezero_shared", "placement": "none"},
    "deepnorm": {"residual": "deepnorm", "placement": "post"},
    "attnres": {"residual": "attnres"},
    "block_attnres": {"residual": "block_attnres"},
    "hyper": {"residual": "hyper"},
    "hyper_dynamic": {"residual": "hyper", "hc_dynamic": True},
    "mhc": {"residual": "mhc"},
    "mhc_lite": {"residual": "mhc_lite"},
    "denseformer": {"residual": "denseformer"},
    "mudd": {"residual": "mudd"},
    "value_residual": {"attention": "value_residual"},
    "value_residual_learned": {"attention": "value_residual_learned"},
    "denseformer_2x2": {"residual": "denseformer", "dense_dilation": 2, "dense_period": 2},
    "laurel_rw": {"residual": "laurel_rw"},
    "laurel_lr": {"residual": "laurel_lr"},
}


def select(names: str) -> dict[str, dict[str, Any]]:
    """``"all"`` or a comma-separated list of arm names; 'standard' always comes first."""
    if names == "all":
        return dict(ARMS)
    wanted = ["standard", *(n for n in names.split(",") if n != "standard")]
    unknown = [n for n in wanted if n not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; choose from: {', '.join(ARMS)}")
    return {n: ARMS[n] for n in wanted}
