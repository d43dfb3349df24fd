"""``nas report``: a sweep's ablation report (HTML and Markdown) from its MLflow record, also
logged to the sweep's parent run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from reports.plans import PLAN_CHOICES
from reports.redact import redact

FORMATS = ("html", "md")


def add_report_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write a sweep's ablation report (HTML + Markdown); no sweep: list them",
        description="Read a sweep's runs from MLflow and write a self-contained HTML page and "
        "a Markdown twin with PNG figures, then log both to the sweep's parent run. Without a "
        "sweep name, list the sweeps the store holds.",
    )
    p.add_argument("sweep", nargs="?", help="the sweep (MLflow experiment) name")
    p.add_argument("--out", type=Path, help="output folder (default nas-reports/SWEEP)")
    p.add_argument(
        "--baseline",
        help="what every arm is compared with: one arm (e.g. standard/n_layers=4), or a wiring "
        "(e.g. standard, or standard/pre), meaning that wiring's arm in each arm's context "
        "(default: the standard/pre arm in each context)",
    )
    p.add_argument("--format", default="html,md", help="comma-separated: html, md (default both)")
    p.add_argument(
        "--plan",
        choices=PLAN_CHOICES,
        default="all",
        help="whose trials: every invocation's plan (all, the default), or only the latest "
        "invocation's plan (latest; refused for a sweep that recorded no plans)",
    )
    p.add_argument(
        "--tracking-uri", help="MLflow store (default: MLFLOW_TRACKING_URI or ./mlflow.db)"
    )
    p.set_defaults(run=run_report)


def _formats(text: str) -> list[str]:
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise ValueError(f"--format {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return chosen


def run_report(args: argparse.Namespace) -> int:
    from nas.tracking import resolve_tracking_uri
    from reports.load import list_sweeps, load_sweep

    uri = resolve_tracking_uri(args.tracking_uri)
    formats = _formats(args.format)
    if not args.sweep:
        sweeps = list_sweeps(uri)
        if not sweeps:
            print(f"no sweeps in {redact(uri)}; run `nas sweep quick` first")
        for name, trials in sweeps:
            print(f"{name:<32} {trials} trial runs")
        return 0
    from reports.plans import select_plan

    data = select_plan(load_sweep(uri, args.sweep), args.plan)
    from reports.build import build_report
    from reports.write import write_report

    document = build_report(data, args.baseline)
    out = (args.out or Path("nas-reports") / args.sweep).resolve()
    written = write_report(document, out, formats)
    _log(uri, data, out)
    for path in written:
        if path.suffix in (".html", ".md"):
            print(f"wrote {path}")
    store = "" if args.tracking_uri is None else f" --tracking-uri {redact(uri)}"
    print(f"browse the runs: nas ui{store}")
    return 0


def _log(uri: str, data: Any, out: Path) -> None:
    """Attach the report to the latest invocation's parent run; a store that refuses it costs
    the copy in MLflow, not the report on disk."""
    from nas.tracking import log_report
    from reports.load import first_line

    try:
        log_report(uri, str(data.parents["run_id"].iloc[-1]), out)
    except Exception as err:  # MLflow's own, OSError, HTTP errors from a server
        print(f"warning: the report was not logged to MLflow ({first_line(err)})")
