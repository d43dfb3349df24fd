"""``nas status``: how far a sweep has got, read from its MLflow record only (never from Ray, and
writing nothing): trials by status and not started, the measured rate and the time left at it,
and when the record was last written (``nas.sweep.progress``)."""

from __future__ import annotations

import argparse
from typing import Any

from record.uri import TRACKING_URI_HELP


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "status",
        help="a sweep's progress from its record: trials by status, rate, time left",
        description="Read a sweep's record from MLflow (never from Ray; nothing is written) "
        "and print its trials by status and how many its latest plan has not started, the rate "
        "its trials ended at and an estimate of the time the rest take at it, and when the "
        "record was last written (a sweep whose trials stopped writing has stalled).",
    )
    p.add_argument("sweep", metavar="SWEEP", help="sweep (MLflow experiment) name")
    p.add_argument("--tracking-uri", help=TRACKING_URI_HELP)
    p.set_defaults(run=run_status)


def run_status(args: argparse.Namespace) -> int:
    import time

    from nas.sweep.progress import read_progress, render
    from record.redact import redact
    from record.uri import resolve_tracking_uri

    uri = resolve_tracking_uri(args.tracking_uri)
    found = read_progress(uri, args.sweep)
    lines = render(args.sweep, redact(uri), found.invocation, found.progress, time.time())
    if found.elsewhere:
        lines.append(
            f"not counted: {found.elsewhere} trials under the sweep's other parent runs "
            "(invocations with another --storage-path)"
        )
    print("\n".join(lines))
    return 0
