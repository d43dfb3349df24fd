"""The validation loss does not depend on ``train.micro_batch`` for any wiring: every residual x
placement cell (``tests.trainers.conftest.WIRINGS``), the attention variants and the AttnRes
switches that change what a source is, in float64, on a pass whose sequences keep 0 to 12 of
their targets and whose last batch is short (``tests.trainers.token_cases.VAL_KEEP``).

The oracle is the pass's token mean written out (``token_mean``, the whole pass in one forward);
the subject is ``loss_total``, what ``LanguageModelModule.validation_step`` adds up batch by
batch in micro-batches (``test_token_losses`` checks that the module does exactly that, through
a real Lightning ``validate``)."""

from __future__ import annotations

import dataclasses
import functools
import operator

import pytest
import torch

from tests.trainers.conftest import tiny
from tests.trainers.token_cases import VAL_KEEP, perturbed_model, token_mean, uneven_batch
from trainers.training.accumulate import loss_total

# The goal's bound (float64, relative). The round-off bound ``token_cases.tolerance`` derives
# for these shapes is of the same order; the differences seen are far below both.
REL = 1e-12
BATCH = 4  # 11 sequences: batches of 4, 4 and 3; micro-batches of 2 cut the last 2 + 1
MICROS = (1, 2, 3, 0)  # 0: the whole batch at once

# Switches that change what a wiring's sources or attention are, beyond residual x placement.
VARIANTS = {
    "value_residual": {"attention": "value_residual"},
    "value_residual_learned": {"attention": "value_residual_learned"},
    "attnres_deltas": {"residual": "attnres", "attnres_sources": "deltas"},
    "block_attnres_cumulative": {"residual": "block_attnres", "attnres_sources": "cumulative"},
    "attnres_input_query": {"residual": "attnres", "attnres_query": "input"},
    "attnres_window": {"residual": "attnres", "attnres_window": 2},
    "attnres_heads": {"residual": "block_attnres", "attnres_heads": 2},
    "hyper_dynamic": {"residual": "hyper", "hc_dynamic": True},
}


def _pass_means(overrides: dict[str, object]) -> tuple[float, dict[int, float]]:
    """The oracle's pass mean, and the subject's at each micro-batch size."""
    cfg = dataclasses.replace(tiny(n_layers=4), **overrides)
    model = perturbed_model(cfg=cfg).eval()
    vx, vy = uneven_batch(VAL_KEEP, seed=2, cfg=cfg)
    with torch.no_grad():
        want = token_mean(model(vx), vy).item()
        got = {}
        for micro in MICROS:
            totals = [
                loss_total(model, vx[i : i + BATCH], vy[i : i + BATCH], micro)
                for i in range(0, len(vx), BATCH)
            ]
            got[micro] = functools.reduce(operator.add, totals).mean(1).item()
    return want, got


def _assert_same(want: float, got: dict[int, float]) -> None:
    for micro, loss in got.items():
        assert abs(loss - want) <= REL * want, f"micro_batch {micro}: {loss!r} != {want!r}"


def test_every_wiring_validates_the_same_at_every_micro_batch(wiring: dict[str, str]) -> None:
    """Each residual x placement cell (norms and scalings as ``covering`` picks them)."""
    _assert_same(*_pass_means(dict(wiring)))


@pytest.mark.parametrize("overrides", VARIANTS.values(), ids=VARIANTS.keys())
def test_every_variant_validates_the_same_at_every_micro_batch(
    overrides: dict[str, object],
) -> None:
    """The attention variants and the AttnRes and HC switches that change the sources."""
    _assert_same(*_pass_means(overrides))


def test_the_pass_has_teeth() -> None:
    """On this pass a mean of the batches' means (the rule token weighting replaced) misses the
    token mean by far more than the bound: the check could fail."""
    cfg = tiny(n_layers=4)
    model = perturbed_model(cfg=cfg).eval()
    vx, vy = uneven_batch(VAL_KEEP, seed=2, cfg=cfg)
    with torch.no_grad():
        want = token_mean(model(vx), vy).item()
        means = [
            token_mean(model(vx[i : i + BATCH]), vy[i : i + BATCH])
            for i in range(0, len(vx), BATCH)
        ]
    assert abs(torch.stack(means).mean().item() - want) > 1e6 * REL * want
