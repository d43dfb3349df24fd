"""The routing alarm's rule on recorded profiles (issue 38): every profile of real trials, as
their sweeps recorded them, replayed through ``RoutingAlarm``. The paper's static query (Full
and Block AttnRes and their static switches) leans on the embedding at early two-source sites
without saturating, and must never alarm; the raw input-dependent query saturates, and must
alarm in every seed.

``data/recorded_routing.json`` holds, per study, arm, seed and profile, each site's per-token
top-1 mass and logit spread and its number of sources, taken from the trials' dilution JSONs:
the `demo` sweep and a rerun of `attnres_ablation`'s static-query and input-query arms (same
space and ``--max-steps 300`` as docs/results/attnres_ablation; that study's old-rule alarms
reproduced seed for seed), made by the commands in the note of issue 38."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from stats.routing import SATURATED, RoutingAlarm
from trainers.config import TrainConfig

RECORDED = json.loads((Path(__file__).parent / "data" / "recorded_routing.json").read_text())
THRESHOLD = TrainConfig().routing_alarm
# The paper's static query, and the switches that keep it (Table 4's rows at CPU size)
STATIC = ("attnres", "attnres/query=static_input", "attnres/window=4", "block_attnres")


def _array(values: list[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _replayed(profiles: list[dict[str, Any]]) -> RoutingAlarm:
    """A run's alarm after seeing its recorded profiles in order."""
    alarm = RoutingAlarm(THRESHOLD)
    for p in profiles:
        # depth weights matter to the rule only through which sources a site has
        weights = np.array([[1.0] * n + [np.nan] * (max(p["sources"]) - n) for n in p["sources"]])
        alarm.observe(_array(p["top1"]), _array(p["spread"]), weights, p["step"])
    return alarm


def _runs(arms: tuple[str, ...]) -> list[tuple[str, str, str, list[dict[str, Any]]]]:
    return [
        (study, arm, seed, profiles)
        for study, by_arm in RECORDED.items()
        for arm, seeds in by_arm.items()
        if arm in arms
        for seed, profiles in seeds.items()
    ]


def _old_rule(profiles: list[dict[str, Any]]) -> bool:
    """The rule before issue 38: a site with two or more sources whose top-1 mass exceeded the
    threshold at any profile."""
    return any(
        n >= 2 and t is not None and t > THRESHOLD
        for p in profiles
        for t, n in zip(p["top1"], p["sources"], strict=True)
    )


def test_the_static_query_never_alarms_though_it_leans_on_the_embedding() -> None:
    """Every seed of every static-query arm, demo and Table 4: no collapsed site. The old rule
    fired on some of these same runs (the demo's 3 of 6 Block AttnRes seeds, one or two seeds
    per Table 4 arm): the leaning is in the data, the rule no longer reads it as collapse."""
    runs = _runs(STATIC)
    assert {study for study, *_ in runs} == {"demo", "attnres_ablation"}
    alarmed = [(study, arm, seed) for study, arm, seed, p in runs if _replayed(p).found]
    assert alarmed == []
    assert sum(_old_rule(p) for *_, p in runs) >= 3


def test_the_raw_input_query_alarms_in_every_seed() -> None:
    """attnres/query=input saturates: every seed alarms, on several sites."""
    runs = _runs(("attnres/query=input",))
    assert len(runs) == 3
    for study, arm, seed, profiles in runs:
        alarm = _replayed(profiles)
        assert len(alarm.found) >= 2, (study, arm, seed)


def _leaning_spreads(arms: tuple[str, ...]) -> list[float]:
    """The logit spread of every (profile, site) with two or more sources whose top-1 mass
    exceeded the threshold."""
    return [
        s
        for *_, profiles in _runs(arms)
        for p in profiles
        for t, s, n in zip(p["top1"], p["spread"], p["sources"], strict=True)
        if n >= 2 and t is not None and t > THRESHOLD and s is not None
    ]


def test_what_separates_them_is_saturation() -> None:
    """Where the static query leans past the threshold its logits stay within reach of the other
    sources (every spread below ``SATURATED``), while most of the input query's leaning sites
    are far beyond it: the line falls between the two, not at the edge of either."""
    static, raw = _leaning_spreads(STATIC), _leaning_spreads(("attnres/query=input",))
    assert static and raw
    assert max(static) < SATURATED
    assert float(np.median(raw)) > 2 * SATURATED
