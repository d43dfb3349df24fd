"""Figures and files for a ``DilutionProfile``: the per-layer picture next to the numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from trainers.measure.diagnostics import DilutionProfile


def plot_profile(profile: DilutionProfile, title: str = "") -> Any:
    """Four panels: output norm, stream norm (actual and running sum), gradient norm per block,
    and the depth-weight heatmap (or the update ratio where the wiring has no depth weights)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    blocks = np.arange(1, profile.n_layers + 1)
    # Fixed margins: constrained layout measured every tick label and took most of the time
    # of writing this figure, which every sweep trial does.
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    fig.subplots_adjust(left=0.1, right=0.96, bottom=0.07, top=0.9, wspace=0.3, hspace=0.35)
    ax = axes[0, 0]
    ax.plot(blocks, profile.output_norm, marker=".")
    ax.set(title="block output norm  mean ||y_attn + y_mlp||", xlabel="block", yscale="log")
    ax = axes[0, 1]
    ax.plot(blocks, profile.stream_norm, marker=".", label="input (actual)")
    ax.plot(blocks, profile.virtual_stream_norm, ls="--", label="running sum")
    ax.set(title="stream norm entering the block", xlabel="block", yscale="log")
    ax.legend()
    ax = axes[1, 0]
    if profile.grad_norm is not None:
        ax.plot(blocks, profile.grad_norm, marker=".")
    ax.set(title="parameter-gradient norm per block", xlabel="block", yscale="log")
    _last_panel(axes[1, 1], profile, blocks)
    fig.suptitle(title)
    return fig


def _last_panel(ax: Any, profile: DilutionProfile, blocks: np.ndarray) -> None:
    if profile.depth_weights is not None:
        image = ax.imshow(
            np.ma.masked_invalid(profile.depth_weights), aspect="auto", cmap="viridis"
        )
        ax.figure.colorbar(image, ax=ax)
        ax.set(title="depth weights (site x source)", xlabel="source", ylabel="site")
    else:
        ax.plot(blocks, profile.update_ratio, marker=".")
        ax.set(title="update ratio ||u|| / ||x||", xlabel="block", yscale="log")


def save_profile(
    profile: DilutionProfile, folder: Path, stem: str, title: str = "", figure: bool = True
) -> list[Path]:
    """Write ``<stem>.json`` (every array, for overlaying trials) and, with ``figure``,
    ``<stem>.png``; return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{stem}.json"
    data.write_text(json.dumps(profile.to_dict()) + "\n")
    if not figure:
        return [data]
    import matplotlib.pyplot as plt

    png = folder / f"{stem}.png"
    fig = plot_profile(profile, title)
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return [data, png]
