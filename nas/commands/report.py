"""``nas report``: a sweep's ablation report (HTML and Markdown; LaTeX and tidy CSV on request)
from its MLflow record, also logged to the sweep's parent run."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from record.redact import redact
from record.uri import TRACKING_URI_HELP
from reports.plans import PLAN_CHOICES
from reports.power import DEFAULT_EFFECT
from reports.write import FORMATS

DEFAULT_FORMATS = "html,md"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "report",
        help="write a sweep's ablation report (HTML + Markdown); no sweep: list them",
        description="Read a sweep's runs from MLflow and write a self-contained HTML page and "
        "a Markdown twin with PNG figures, then log both to the sweep's parent run. Several "
        "sweeps make one report over all their trials, arms matched by configuration (it is "
        "logged to no parent run). Without a sweep name, list the sweeps the store holds.",
    )
    p.add_argument(
        "sweeps",
        nargs="*",
        metavar="SWEEP",
        help="sweep (MLflow experiment) names; NAME@URI reads one from another store",
    )
    p.add_argument(
        "--out", type=Path, help="output folder (default nas-reports/SWEEP, or SWEEP+SWEEP…)"
    )
    p.add_argument(
        "--baseline",
        help="what every arm is compared with: one arm (e.g. standard/n_layers=4), or a wiring "
        "(e.g. standard, or standard/pre), meaning that wiring's arm in each arm's context "
        "(default: the standard/pre arm in each context)",
    )
    p.add_argument(
        "--format",
        default=DEFAULT_FORMATS,
        help="comma-separated: html (one page), md (Markdown + PNG figures), tex (LaTeX + PDF "
        "figures), csv (trials.csv and arms.csv); default html,md",
    )
    p.add_argument(
        "--plan",
        choices=PLAN_CHOICES,
        default="all",
        help="whose trials: every invocation's plan (all, the default), or only the latest "
        "invocation's plan (latest; refused for a sweep that recorded no plans)",
    )
    p.add_argument(
        "--effect",
        type=effect,
        help="the difference in final validation loss (nats, > 0) the report sizes seeds for: "
        "how many seeds per arm would detect it with 80%% power (default: the effect a "
        f"`--seeds auto` sweep was sized for, else {DEFAULT_EFFECT}, the smallest gain of "
        "Block AttnRes over PreNorm that the AttnRes paper reports)",
    )
    p.add_argument(
        "--tracking-uri",
        action="append",
        help=f"{TRACKING_URI_HELP}; once for every sweep, or once per sweep in the same order",
    )
    p.set_defaults(run=run_report)


def effect(text: str) -> float:
    """``--effect``: a finite number of nats above 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"{text!r}: give a difference in nats above 0 (e.g. {DEFAULT_EFFECT})"
        )
    return value


def _formats(text: str) -> list[str]:
    chosen = [f.strip() for f in text.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise ValueError(f"--format {text!r}: choose from {', '.join(FORMATS)} (comma-separated)")
    return chosen


def sources(sweeps: list[str], uris: list[str] | None) -> list[tuple[str, str]]:
    """(sweep name, store URI) per sweep named: ``NAME@URI``, else the i-th ``--tracking-uri``
    when one is given per sweep, else the one given (or the default store)."""
    from record.uri import resolve_tracking_uri

    given = uris or []
    if len(given) > 1 and len(given) != len(sweeps):
        raise ValueError(
            f"--tracking-uri given {len(given)} times for {len(sweeps)} sweeps: give it once "
            "for all of them, once per sweep in order, or name stores as SWEEP@URI"
        )
    out = []
    for i, sweep in enumerate(sweeps):
        name, at, uri = sweep.partition("@")
        if at and "://" in uri:
            out.append((name, uri))
        else:
            one = given[i] if len(given) > 1 else (given[0] if given else None)
            out.append((sweep, resolve_tracking_uri(one)))
    return out


def run_report(args: argparse.Namespace) -> int:
    from record.read import list_sweeps
    from record.uri import resolve_tracking_uri
    from reports.load import load_sweep

    formats = _formats(args.format)
    if not args.sweeps:
        if args.tracking_uri and len(args.tracking_uri) > 1:
            raise ValueError("--tracking-uri: give one store to list its sweeps")
        uri = resolve_tracking_uri(args.tracking_uri[0] if args.tracking_uri else None)
        sweeps = list_sweeps(uri)
        if not sweeps:
            print(f"no sweeps in {redact(uri)}; run `nas sweep quick` first")
        for name, trials in sweeps:
            print(f"{name:<32} {trials} trial runs")
        return 0
    from reports.merge import merge_sweeps
    from reports.plans import select_plan

    where = sources(args.sweeps, args.tracking_uri)
    data = merge_sweeps([select_plan(load_sweep(uri, name), args.plan) for name, uri in where])
    from reports.build import build_report
    from reports.write import write_report

    document = build_report(data, args.baseline, args.effect)
    default = Path("nas-reports") / "+".join(dict.fromkeys(name for name, _ in where))
    out = (args.out or default).resolve()
    written = write_report(document, out, formats)
    if len(where) == 1:
        _log(where[0][1], data, out)
    for path in written:
        if path.suffix in (".html", ".md", ".tex", ".csv"):
            print(f"wrote {path}")
    for uri in dict.fromkeys(uri for _, uri in where):
        store = "" if uri == resolve_tracking_uri(None) else f" --tracking-uri {redact(uri)}"
        print(f"browse the runs: nas ui{store}")
    return 0


def _log(uri: str, data: Any, out: Path) -> None:
    """Attach the report to the latest invocation's parent run; a store that refuses it costs
    the copy in MLflow, not the report on disk."""
    from nas.store.tracking import log_report
    from record.errors import first_line

    try:
        log_report(uri, str(data.parents["run_id"].iloc[-1]), out)
    except Exception as err:  # MLflow's own, OSError, HTTP errors from a server
        print(f"warning: the report was not logged to MLflow ({first_line(err)})")
