"""Shared tiny configurations for the model tests."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainers.config import LNS_PLACEMENTS, ModelConfig, valid_wirings


def covering(wirings: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str, str]]:
    """The cells the per-wiring suites run: every (residual, placement) with each norm and each
    norm scaling it allows, but the norm x scaling product only for ``standard``. A wiring meets
    the norm type only through the norm modules it builds, and the scaling only through its
    branches' input factor, so each value once per wiring covers what the wiring does with it
    (RMSNorm plain, and LayerNorm with LayerNorm Scaling where the placement allows it); the
    product is the norms' own interaction, which ``standard`` covers. This keeps the suites near
    one cell per (residual, placement, norm) as wirings are added."""

    def kept(r: str, p: str, n: str, sc: str) -> bool:
        paired = "lns" if p in LNS_PLACEMENTS else "none"
        return r == "standard" or (n, sc) in (("rmsnorm", "none"), ("layernorm", paired))

    return [w for w in wirings if kept(*w)]


WIRINGS = covering(valid_wirings())


def tiny(**overrides: object) -> ModelConfig:
    """A model small enough that depth 64 runs in well under a second on a CPU."""
    base = ModelConfig(
        vocab_size=32, d_model=16, n_heads=2, n_layers=2, seq_len=12, attnres_blocks=2
    )
    return dataclasses.replace(base, **overrides)


def _quick(w: tuple[str, str, str, str]) -> bool:
    """One cell per (residual, placement), RMSNorm plain, in ``make test-fast``; the others (the
    norms and scalings ``covering`` adds) run with ``make test``."""
    return w[2:] == ("rmsnorm", "none")


@pytest.fixture(
    params=[pytest.param(w, marks=() if _quick(w) else pytest.mark.slow) for w in WIRINGS],
    ids=["-".join(w) for w in WIRINGS],
)
def wiring(request: pytest.FixtureRequest) -> dict[str, str]:
    residual, placement, norm, scaling = request.param
    return {"residual": residual, "placement": placement, "norm": norm, "norm_scaling": scaling}


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def assert_causal(model: torch.nn.Module) -> None:
    """Changing the tokens from position 7 on leaves the logits before it bit for bit and
    changes those after (a double-precision model in eval mode, vocabulary 32, length 12)."""
    idx = torch.randint(0, 32, (2, 12))
    changed = idx.clone()
    changed[:, 7:] = (changed[:, 7:] + 1) % 32
    a, b = model(idx), model(changed)
    assert torch.equal(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])
