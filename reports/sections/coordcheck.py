"""The coord-check section (sweeps under a parametrization other than ``sp``): whether the
parametrization kept each module class's update the same size across widths and depths for the
models the sweep trained, from the reduced coord checks the sweep recorded before its trials
(``nas.sweep.coordcheck``): what was checked, each check's slopes and verdict per axis, and its
figure. The verdicts are ``trainers.measure.coordcheck_table``'s, read from the recorded tables, so
they are the ones ``nas coordcheck`` gives for the same numbers. A sweep of ``sp`` models has no
such section."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

from reports import figures
from reports.ablation import wiring_label
from reports.document import Figure, Paragraph, Section, Table
from reports.normalize import recorded
from reports.sweep import RecordedCoordCheck, SweepData
from trainers.measure import coordcheck_table as ct

TITLE = "Coord check"
PARAMETRIZATION_KEY = "model.parametrization"


def coordcheck_section(data: SweepData) -> Section | None:
    """The section; None where every trial ran the standard parametrization and the sweep
    recorded no check."""
    if not data.coordchecks:
        return _unchecked(data.view.configured)
    blocks: list[Any] = [Paragraph(_protocol(data.coordchecks))]
    checked = [c for c in data.coordchecks if c.table]
    if checked:
        blocks.append(_table(checked))
    blocks += [Paragraph(line, "warning") for line in _problems(data.coordchecks)]
    blocks += [_figure(c) for c in checked]
    return Section(TITLE, tuple(blocks))


def _parametrizations(trials: pd.DataFrame) -> list[str]:
    """The parametrizations the trials ran (a record from before the field ran sp)."""
    return sorted({str(recorded(row, PARAMETRIZATION_KEY)) for _, row in trials.iterrows()})


def _unchecked(trials: pd.DataFrame) -> Section | None:
    """For a sweep whose trials ran a parametrization other than sp but that recorded no
    check (it ran before sweeps recorded one): a note saying so; None for an sp sweep."""
    if trials.empty or PARAMETRIZATION_KEY not in trials:
        return None
    other = [p for p in _parametrizations(trials) if p != "sp"]
    if not other:
        return None
    text = (
        f"This sweep trained under {', '.join(f'`{p}`' for p in other)} but recorded no coord "
        "check (it ran before sweeps recorded one): nothing here shows that the "
        "parametrization kept the updates flat for its models. `nas coordcheck --set "
        f"model.parametrization={other[0]}` runs the check."
    )
    return Section(TITLE, (Paragraph(text, "warning"),))


def _protocol(checks: tuple[RecordedCoordCheck, ...]) -> str:
    """What was checked, how, and how much a verdict here can say."""
    first = checks[0].entry
    seeds = len(first["seeds"])
    low, high = ct.FLAT
    return (
        "Before its trials, the sweep ran a reduced coord check (microsoft/mup's; the full one "
        "is `nas coordcheck`) for each model it trains under a parametrization other than sp: "
        "the model with the sweep's wiring and every other field as the sweep gave it, but at "
        "the small sizes in the table (the base width and depth at the smallest, where the "
        "parametrization is sp), along each axis the parametrization claims to transfer "
        f"(width; and depth for depth_mup and completep); {_steps(first['steps'])} of the "
        f"parametrization's own optimizer groups at lr {float(first['lr']):g} on one fixed "
        f"batch of {first['batch_size']} sequences, {seeds} seed{'' if seeds == 1 else 's'}. "
        "It checks the parametrization's rules for the wiring over the multipliers the sizes "
        "span, not the sweep's own sizes. A check passes when each judged module class's "
        "mean |change since init| after the last step grows no faster than "
        f"size^{high:+.2f} and shrinks no faster than size^{low:+.2f} (across depths the "
        "embedding, the stream and the logits are judged: a sublayer's own update is meant to "
        "shrink with depth). At these sizes one seed's slopes of correct and known-bad "
        "parametrizations fall well apart, but a slope near the band's edge is weak evidence "
        "either way; `nas coordcheck` runs the full check (wider span, two seeds)."
    )


def _steps(n: int) -> str:
    return f"{n} AdamW step{'' if n == 1 else 's'}"


def _label(check: RecordedCoordCheck) -> str:
    """The checked model: its wiring label (the report's) and its parametrization."""
    model = pd.Series(dict(check.entry.get("model", {})))
    p = str(recorded(model, PARAMETRIZATION_KEY))
    alpha = f", alpha {model['model.depth_alpha']:g}" if p == "completep" else ""
    return f"{wiring_label(model)} ({p}{alpha})"


def _table(checks: list[RecordedCoordCheck]) -> Table:
    rows = []
    for c in checks:
        assert c.table is not None
        axis = c.entry["axis"]
        slopes = ct.slopes(c.table)
        judged = ct.judged(axis)
        cells = [f"{slopes[k]:+.2f}" if k in judged else f"({slopes[k]:+.2f})" for k in ct.CLASSES]
        ok = ct.verdict(c.table, axis)[0]
        sizes = ", ".join(str(int(s)) for s in ct.sizes_of(c.table))
        rows.append((_label(c), axis, sizes, *cells, "pass" if ok else "fail"))
    caption = (
        "each class's update slope s (it grows as size^s) from the smallest size to the "
        "largest; in parentheses: not judged on that axis"
    )
    return Table(("model", "axis", "sizes", *ct.CLASSES, "verdict"), tuple(rows), caption)


def _problems(checks: tuple[RecordedCoordCheck, ...]) -> list[str]:
    """One sentence per check that failed, was not run, or cannot be read."""
    out = []
    for c in checks:
        where = f"{_label(c)}, {c.entry.get('axis', '?')}"
        if c.table is not None:
            ok, line = ct.verdict(c.table, c.entry["axis"])
            if not ok:
                out.append(
                    f"{where}: the coord check fails ({line.removeprefix('fail: ')}): the "
                    "parametrization does not keep this model's updates flat along that axis, "
                    "so hyperparameters tuned at one size need not transfer to another here."
                )
        elif "error" in c.entry:
            out.append(f"{where}: not checked, its base sizes are refused ({c.entry['error']}).")
        else:
            out.append(f"{where}: its recorded table cannot be read; not checked here.")
    return out


def _figure(check: RecordedCoordCheck) -> Figure:
    assert check.table is not None
    axis = check.entry["axis"]
    title = f"{_label(check)}: {axis}"
    image = figures.coordcheck(check.table, axis, title)
    name = "coordcheck-" + re.sub(r"[^a-z0-9_-]", "-", check.name.lower())
    caption = (
        f"Coord check of {_label(check)} across {axis}: each module class's mean |activation| "
        "at each step, and its change since init at the last step (log-log)."
    )
    return Figure(name, image.png, caption, image.pdf)
