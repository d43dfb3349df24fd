"""The figures section: validation curves, the depth-scaling figure, per-layer dilution
profiles and AttnRes depth-weight heatmaps."""

from __future__ import annotations

from typing import Any

from reports import figures
from reports.document import Figure, Paragraph, Section
from reports.sweep import SweepData
from stats.routing import ALARM_PREFIX, COLLAPSED_SHARE, SATURATED


def figure_section(data: SweepData) -> Section | None:
    blocks: list[Any] = []
    done = data.view.comparable
    spread = figures.spread_caption(done)
    curves = figures.loss_curves(done, data.curves)
    if curves:
        blocks.append(
            Figure(
                "loss_curves",
                curves.png,
                f"Validation loss per arm over training (finished trials). {spread}"
                + figures.seed_lines_caption(done),
                curves.pdf,
            )
        )
    depth = figures.depth_scaling(data.view)
    if depth:
        blocks.append(
            Figure(
                "depth_scaling",
                depth.png,
                "Final validation loss against depth over the finished trials (left), and the "
                "fraction of each depth's trials that diverged, of those that trained to an "
                f"outcome (right). {spread}",
                depth.pdf,
            )
        )
    profile = figures.dilution_profiles(done, data.profiles)
    if profile:
        blocks.append(
            Figure(
                "dilution_profiles",
                profile.png,
                "Per-layer profiles at the end of training, deepest setting: block output "
                "norm, stream norm entering each block, parameter-gradient norm per block. "
                f"{spread}",
                profile.pdf,
            )
        )
    heatmaps = figures.depth_weight_heatmaps(
        done,
        data.depth_weights,
        data.routing_top1,
        data.routing_spread,
        data.source_importance,
        data.routing_collapsed,
    )
    # A record from before the routing statistics has nothing to frame: its caption stays.
    framed = (
        " Framed in red: a site that collapsed in at least one seed (on over "
        f"{COLLAPSED_SHARE:.0%} of its tokens, top-1 mass above train.routing_alarm with the "
        f"runner-up more than {SATURATED:g} nats below the top; a profile recorded before "
        "that share was measured, by its token-averaged top-1 mass and logit spread)."
        if data.routing_spread
        else ""
    )
    for i, (arm, image, with_importance) in enumerate(heatmaps):
        measured = (
            " Below: each source's causal importance, the validation loss change on the "
            "diagnostics batch when it is left out of that site (the rest renormalized), mean "
            "over seeds."
            if with_importance
            else ""
        )
        blocks.append(
            Figure(
                f"depth_weights_{i}",
                image.png,
                f"{arm}: depth-attention weights (rows: blocks' sites, columns: sources; "
                f"mean over tokens and seeds).{framed}{measured}",
                image.pdf,
            )
        )
    alarms = _routing_alarms(done)
    if alarms:
        blocks.append(Paragraph("Routing alarms: " + "; ".join(alarms) + ".", "warning"))
    return Section("Figures", tuple(blocks)) if blocks else None


def _routing_alarms(done: Any) -> list[str]:
    """Each finished trial's routing alarm (the reason it carries: ``stats.routing``), as
    "arm seed s: site j collapsed onto ... by step t"."""
    out = []
    for _, row in done.iterrows():
        reason = row.get("reason")
        if isinstance(reason, str) and reason.startswith(ALARM_PREFIX):
            out.append(f"{row['arm']} seed {row['seed']}: {reason}")
    return out
