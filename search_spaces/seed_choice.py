"""Seeds chosen by the data, validly (``nas sweep --seeds auto``): from a pilot's paired
differences (each arm minus its baseline, seed by seed), the seeds each comparison needs to detect
an effect at the target power, capped, and the sweep's seed count, the largest need.

A two-stage design sized on the pilot's **variance only**: the choice reads the standard
deviation of each comparison's differences, never their mean nor a p-value (stopping or growing
a sweep on its Δ inflates false positives). Each comparison is sized at Holm's first-step level
(alpha / m over the m comparisons sized), the level the report's most stringent test faces.
Pure functions of numbers; torch-free, numpy-free.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stats.power import MIN_SEEDS, POWER, first_step_alpha, seeds_needed

DEFAULT_MAX_SEEDS = 12  # --max-seeds: beyond it a sweep's cost grows faster than its answer


@dataclass(frozen=True, kw_only=True)
class SeedRule:
    """What ``--seeds auto`` sizes for; validated at construction."""

    effect: float  # nats of final validation loss the comparisons must detect
    cap: int = DEFAULT_MAX_SEEDS  # the most seeds any arm gets (--max-seeds)
    power: float = POWER  # the chance of detecting a real effect of that size
    alpha: float = 0.05  # the family's level, before Holm's first step divides it

    def __post_init__(self) -> None:
        if not (math.isfinite(self.effect) and self.effect > 0):
            raise ValueError(f"--effect {self.effect}: give a positive number of nats")
        if self.cap < MIN_SEEDS:
            raise ValueError(f"--max-seeds {self.cap}: at least {MIN_SEEDS}")

    def check_pilot(self, seeds: Sequence[int]) -> None:
        """A pilot of at least ``MIN_SEEDS`` seeds (fewer do not estimate the noise), no more
        than the cap."""
        if len(seeds) < MIN_SEEDS:
            raise ValueError(
                f"--seeds auto: the pilot (the space's seeds, {len(seeds)}) needs at least "
                f"{MIN_SEEDS} seeds to estimate the noise; give the space more seeds"
            )
        if self.cap < len(seeds):
            raise ValueError(
                f"--max-seeds {self.cap}: below the pilot's {len(seeds)} seeds; give at least "
                f"{len(seeds)}"
            )


@dataclass(frozen=True)
class Need:
    """One comparison's sizing: its pilot pairs, their sd, the seeds it needs (None: more than
    the cap, or the noise not estimated: fewer than ``MIN_SEEDS`` pairs finished)."""

    baseline: str
    n: int
    sd: float | None
    needed: int | None

    @property
    def over_cap(self) -> bool:
        return self.sd is not None and self.needed is None


@dataclass(frozen=True)
class SeedChoice:
    """The decision: each comparison's need, the level each was sized at, the seed count."""

    rule: SeedRule
    needs: Mapping[str, Need] = field(default_factory=dict)  # arm -> its comparison's sizing
    alpha_each: float = math.nan
    seeds: int = 0  # seeds per arm in all, pilot included

    def data(self) -> dict[str, object]:
        """As the parent run keeps it (JSON)."""
        r = self.rule
        return {
            "effect": r.effect,
            "power": r.power,
            "alpha": r.alpha,
            "alpha_each": self.alpha_each,
            "max_seeds": r.cap,
            "seeds": self.seeds,
            "comparisons": {
                arm: {"baseline": n.baseline, "n": n.n, "sd": n.sd, "needed": n.needed}
                for arm, n in self.needs.items()
            },
        }


def paired_sd(differences: Sequence[float]) -> tuple[float | None, int]:
    """The sample sd of the finite differences (pairs where both trials finished), None for
    fewer than ``MIN_SEEDS``; and how many there are."""
    kept = [d for d in differences if math.isfinite(d)]
    return (statistics.stdev(kept) if len(kept) >= MIN_SEEDS else None), len(kept)


def choose(
    differences: Mapping[str, tuple[str, Sequence[float]]], rule: SeedRule, pilot: int
) -> SeedChoice:
    """The seeds per arm: the largest need over the comparisons (arm -> (baseline, its paired
    differences)), a need over the cap counting as the cap, and never fewer than the ``pilot``
    already run. Reads each comparison's sd, not its mean."""
    sds = {arm: (base, *paired_sd(d)) for arm, (base, d) in differences.items()}
    m = sum(sd is not None for _, sd, _ in sds.values())
    alpha_each = first_step_alpha(rule.alpha, m)
    needs = {}
    for arm, (base, sd, n) in sds.items():
        needed = None
        if sd is not None:
            needed = seeds_needed(sd, rule.effect, alpha_each, rule.power, cap=rule.cap)
        needs[arm] = Need(base, n, sd, needed)
    wanted = [rule.cap if n.over_cap else (n.needed or 0) for n in needs.values()]
    return SeedChoice(rule, needs, alpha_each, max([pilot, *wanted]))


def lines(choice: SeedChoice) -> list[str]:
    """The decision for the console, one line per comparison and one for the count."""
    r, out = choice.rule, []
    for arm, n in choice.needs.items():
        if n.sd is None:
            out.append(f"{arm} vs {n.baseline}: {n.n} pilot pairs, noise not estimated")
            continue
        need = f"more than {r.cap}" if n.over_cap else str(n.needed)
        out.append(f"{arm} vs {n.baseline}: pilot sd {n.sd:.4g} over {n.n} pairs, {need} seeds")
    out.append(
        f"--seeds auto: {choice.seeds} seeds per arm to detect {r.effect:g} nats at "
        f"{r.power:.0%} power, alpha {choice.alpha_each:.3g} each (Holm's first step), "
        f"at most {r.cap}"
    )
    return out
