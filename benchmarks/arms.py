"""The named arms the benchmark scripts compare: every wiring in its usual placement, plus the
placement and norm-scaling variants of the standard residual and every attention variant."""

from __future__ import annotations

from typing import Any

from trainers import catalogue

# Each catalogue entry names its arms (trainers/catalogue.py), in catalogue order: wirings, then
# attention variants.
ARMS: dict[str, dict[str, Any]] = catalogue.arms()


def select(names: str) -> dict[str, dict[str, Any]]:
    """``"all"`` or a comma-separated list of arm names; 'standard' always comes first."""
    if names == "all":
        return dict(ARMS)
    wanted = ["standard", *(n for n in names.split(",") if n != "standard")]
    unknown = [n for n in wanted if n not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {', '.join(unknown)}; choose from: {', '.join(ARMS)}")
    return {n: ARMS[n] for n in wanted}
