"""The AttnRes design switches of the paper's Table 4 as test cases, shared by the switch, layout
and buffered-path suites."""

from __future__ import annotations

from typing import Any

import torch

from trainers.model.transformer import DeepTransformer

RESIDUALS = ("attnres", "block_attnres")
SWITCHES: dict[str, dict[str, Any]] = {
    "key_norm=none": {"attnres_key_norm": "none"},
    "gate=sigmoid": {"attnres_gate": "sigmoid"},
    "query=input": {"attnres_query": "input"},
    "query=scalar": {"attnres_query": "scalar"},
    "heads=4": {"attnres_heads": 4},
    "window=2": {"attnres_window": 2},
    "combined": {
        "attnres_key_norm": "none",
        "attnres_gate": "sigmoid",
        "attnres_query": "input",
        "attnres_heads": 2,
        "attnres_window": 3,
    },
    # Delta AttnRes's additive routing (test_delta_attnres.py holds it to the paper), alone and
    # with every Table 4 switch (each changes only the weights over the routed sources).
    "sources=deltas": {"attnres_sources": "deltas"},
    "sources=cumulative": {"attnres_sources": "cumulative"},
    "deltas+combined": {
        "attnres_sources": "deltas",
        "attnres_key_norm": "none",
        "attnres_gate": "sigmoid",
        "attnres_query": "input",
        "attnres_heads": 2,
        "attnres_window": 3,
    },
}
CASES = [(r, name) for r in RESIDUALS for name in SWITCHES]
# One field away from the paper's design each, at a width of 16 with 2 heads: what the compile
# suite traces and what the fused kernels must refuse (each changes what a site computes).
DEPARTURES: dict[str, dict[str, Any]] = {
    "gate=sigmoid": {"attnres_gate": "sigmoid"},
    "key_norm=none": {"attnres_key_norm": "none"},
    "query=input": {"attnres_query": "input"},
    "query=low_rank": {"attnres_query": "low_rank"},
    "window=2": {"attnres_window": 2},
    "heads=2": {"attnres_heads": 2},
    "sources=deltas": {"attnres_sources": "deltas"},
    "sources=cumulative": {"attnres_sources": "cumulative"},
}


def randomize_mixing(model: DeepTransformer, scale: float = 1.0) -> None:
    """Every depth-mixing parameter drawn from N(0, scale²), so no switch hides behind a zero
    init."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith("stream.sites."):
                p.copy_(torch.randn_like(p) * scale)
