"""``nas diff``: two recorded trials side by side, the configuration keys that differ, the final
metrics with their change and the dilution summaries, and with ``--out`` a figure overlaying
their per-layer profiles."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from record.uri import TRACKING_URI_HELP

DIFF_FILE = "diff.md"
FIGURE_FILE = "profiles.png"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "diff",
        help="compare two trial runs: differing config keys, final metrics, dilution",
        description="Read two trial runs from MLflow and print the configuration keys whose "
        "values differ (only those), the final metrics with B - A and the relative change, and "
        "the dilution summaries side by side. A run is named by its MLflow run id or as "
        "sweep:arm:seed (the live trial of that arm and seed).",
    )
    p.add_argument("run_a", metavar="RUN_A", help="run id, or sweep:arm:seed")
    p.add_argument("run_b", metavar="RUN_B", help="run id, or sweep:arm:seed")
    p.add_argument(
        "--out",
        type=Path,
        help=f"also write {DIFF_FILE} and {FIGURE_FILE} (the two per-layer "
        "profiles overlaid) into this folder",
    )
    p.add_argument("--tracking-uri", help=TRACKING_URI_HELP)
    p.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from record.uri import resolve_tracking_uri
    from reports.diff import diff_runs, render

    uri = resolve_tracking_uri(args.tracking_uri)
    a = _trial(uri, args.run_a, "RUN_A")
    b = _trial(uri, args.run_b, "RUN_B")
    text = render(diff_runs(a, b))
    print(text, end="")
    if args.out is not None:
        for path in _write(uri, args.out, text, a, b):
            print(f"wrote {path}")
    return 0


def _trial(uri: str, text: str, flag: str) -> Any:
    """The trial run ``text`` names; ValueError (one line) for an unknown run, a run that is not
    a trial (a sweep's parent run), or a ``sweep:arm:seed`` that names no single live trial."""
    from record.read import live_trial_id, load_run
    from record.schema import ROLE_TRIAL, Tag
    from reports.diff import TrialRef, parse_ident

    ident = parse_ident(text, flag)
    if isinstance(ident, TrialRef):
        ident = live_trial_id(uri, ident.sweep, ident.arm, ident.seed)
    run = load_run(uri, ident, flag)
    role = run.tags.get(Tag.ROLE)
    if role != ROLE_TRIAL:
        what = "a sweep's parent run" if role else "not a run of nas sweep"
        raise ValueError(f"{flag} {ident}: {what} ({Tag.ROLE}={role}); name a trial run")
    return run


def _write(uri: str, out: Path, text: str, a: Any, b: Any) -> list[Path]:
    """``diff.md`` and, where either trial recorded a dilution profile, ``profiles.png``."""
    from reports.diff import describe
    from reports.figures_diff import profile_overlay
    from reports.load import run_profile

    labels = {f"A {describe(a)}": run_profile(uri, a), f"B {describe(b)}": run_profile(uri, b)}
    png = profile_overlay(labels)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = [out / DIFF_FILE]
        written[0].write_text(text)
        if png is not None:
            written.append(out / FIGURE_FILE)
            written[1].write_bytes(png)
    except OSError as err:
        raise ValueError(f"--out {out}: not a writable folder ({err.strerror})") from None
    if png is None:
        print(f"no dilution profile recorded by either run: no {FIGURE_FILE}")
    return written
