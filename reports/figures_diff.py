"""``nas diff``'s figure: two trials' per-layer dilution profiles overlaid, drawn with the
report's figure helpers and panels."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from reports.figures import PROFILE_PANELS, _figure, _integer_ticks, _png, plain_log_labels


def draw_profile_overlay(profiles: dict[str, pd.DataFrame]) -> Any:
    """Output, stream and gradient norm against block, one line per labelled profile (rows as
    ``reports.load.run_profile`` gives them); None where no profile has a row. Depths may differ:
    each line spans its own blocks."""
    drawn = {label: p for label, p in profiles.items() if not p.empty}
    if not drawn:
        return None
    fig, axes = _figure(ncols=3, size=(14, 4.2))
    for ax, (column, title) in zip(axes[0], PROFILE_PANELS, strict=True):
        for label, profile in drawn.items():
            p = profile.sort_values("block")
            ax.plot(p["block"], p[column], marker=".", label=label)
        ax.set(xlabel="block", title=title)
        if _positive(drawn, column):  # a log axis of nothing (no gradients recorded) warns
            ax.set_yscale("log")
            plain_log_labels(ax.yaxis)
        _integer_ticks(ax)
    axes[0, 0].legend(fontsize=7)
    return fig


def profile_overlay(profiles: dict[str, pd.DataFrame]) -> bytes | None:
    """``draw_profile_overlay`` as PNG."""
    fig = draw_profile_overlay(profiles)
    return None if fig is None else _png(fig)


def _positive(profiles: dict[str, pd.DataFrame], column: str) -> bool:
    values = np.concatenate([p[column].to_numpy(float) for p in profiles.values()])
    return bool((values[np.isfinite(values)] > 0).any())
