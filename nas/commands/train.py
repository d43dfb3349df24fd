"""``nas train``: train one configuration and print its validation loss."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nas import package_version
from record.uri import TRACKING_URI_HELP
from trainers.budget import check_one_length, resolve_budget
from trainers.config_io import build_config, field_help, parse_overrides
from trainers.corpus.manifest import pinned
from trainers.identity import normalized, refusal, unread_fields

if TYPE_CHECKING:
    from trainers.training.paths import Paths


def add_parser(sub: Any) -> None:
    keys = "\n".join(f"  {k:<22} {h}" for k, h in field_help().items())
    p = sub.add_parser(
        "train",
        help="train one configuration and print its validation loss",
        description="Train one configuration: the defaults, then --config, then each --set.",
        epilog=f"configuration keys (for --set and --config files):\n{keys}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="YAML file with model/train/data sections")
    p.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one key, e.g. --set model.n_layers=32 (repeatable; a model field the "
        "configuration does not read is refused, e.g. model.hc_streams with residual standard)",
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default: runs/train/<time>-<arm>)")
    p.add_argument(
        "--from-run",
        metavar="RUN_ID",
        help="retrain a recorded sweep trial from its logged configuration and seed (--set "
        "applies on top)",
    )
    p.add_argument("--tracking-uri", help=f"{TRACKING_URI_HELP}; the store of --from-run")
    p.add_argument(
        "--peak-flops",
        type=float,
        metavar="FLOP/S",
        help="the peak the run's MFU is measured against (default as nas sweep: the GPU's "
        "datasheet peak, or a timed matmul)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(run=run_train)


def _default_out(cfg: Any) -> Path:
    m = cfg.model
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / "train" / f"{stamp}-{m.residual}-{m.placement}-L{m.n_layers}"
    out, n = base, 1
    while out.exists():  # two runs started in the same second
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


def _quiet_lightning() -> None:
    import logging

    for name in ("lightning.pytorch", "lightning.fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # Lightning warns about its own use of a torch API it has not caught up with.
    warnings.filterwarnings("ignore", message=r".*treespec.*LeafSpec.*")


def _recorded_overrides(run_id: str, tracking_uri: str | None) -> list[str]:
    """A recorded trial's params as --set pairs; warns when the code version differs."""
    from record.read import load_run
    from record.schema import Tag
    from record.uri import resolve_tracking_uri
    from trainers.config_io import field_help

    run = load_run(resolve_tracking_uri(tracking_uri), run_id)
    keys = field_help()
    recorded = run.tags.get(Tag.VERSION)
    current = package_version()
    if recorded and recorded != current:
        print(f"warning: run {run_id} was recorded by version {recorded}; this is {current}")
    return [f"{k}={v}" for k, v in run.params.items() if k in keys]


def configuration(args: argparse.Namespace) -> Any:
    """The run's resolved configuration (defaults, --from-run, --config, --set, budgets), every
    model field it does not read at its default; ValueError for anything the configuration
    rejects, and for a --set of a field it does not read (a recorded run or a --config file
    holds every field, so what they give such a field is dropped, not refused)."""
    recorded = _recorded_overrides(args.from_run, args.tracking_uri) if args.from_run else []
    explicit = parse_overrides(args.overrides)
    check_one_length(explicit)
    cfg = build_config(args.config, [*recorded, *args.overrides])
    _refuse_unread(cfg.model, explicit.get("model", {}))
    return pinned(resolve_budget(normalized(cfg)))


def _refuse_unread(model: Any, given: dict[str, Any]) -> None:
    """A --set of a model field this configuration does not read, away from its default, is
    refused with the one line ``trainers.identity.refusal`` words."""
    defaults = {f.name: f.default for f in dataclasses.fields(model)}
    for name in unread_fields(model):
        if name in given and given[name] != defaults[name]:
            raise ValueError(refusal(model, name))


def run_train(args: argparse.Namespace) -> int:
    cfg = configuration(args)
    out = Path(args.out) if args.out else _default_out(cfg)
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: folder exists and is not empty; choose a new one")
    from trainers.data.module import load_source
    from trainers.training.paths import refusal as path_refusal
    from trainers.training.paths import where

    if why := path_refusal(cfg, *where(cfg.train)):
        raise ValueError(why)
    from trainers.training.run import fit_micro_batch

    auto = cfg.train.micro_batch == "auto"
    cfg = fit_micro_batch(cfg)  # 'auto' resolved on this device, before anything is written
    source = load_source(cfg.data, cfg.model)  # every data error surfaces before any write
    _quiet_lightning()
    from trainers.training.outputs import save_run
    from trainers.training.run import train

    m = cfg.model
    print(
        f"training {m.residual}/{m.placement}/{m.norm}, {m.n_layers} layers, d_model "
        f"{m.d_model}, on {source.name}; outputs in {out}"
    )
    if auto:
        t = cfg.train
        print(f"micro-batch auto: {t.micro_batch} sequences, checkpointing {t.checkpointing}")
    result, model = train(
        cfg, out, source=source, progress=not args.no_progress, peak_flops=args.peak_flops
    )
    save_run(out, cfg, result, model)
    finished = result.status == "finished"
    if not finished:  # one line: what happened, where and why (the reason names the step)
        print(f"{result.status.replace('_', ' ')}: {result.reason}; no final validation")
    _print_metrics(result, "" if finished else "last finite ")
    _print_cost(result)
    _print_paths(result.paths)
    _print_dilution(result.dilution, out, "final" if finished else "last profile")
    if result.routing_alarm:  # a warning, not a failure: the run trained to its end
        print(result.routing_alarm)
    return 0 if finished else 1


def _print_metrics(result: Any, which: str) -> None:
    run = (
        f"({result.steps} steps, {result.params:,} parameters, {result.wall_s:.0f} s, "
        f"{result.tokens_per_s:,.0f} tokens/s)"
    )
    if math.isnan(result.val_loss):  # ended early before any validation came out finite
        print(f"no finite validation  {run}")
        return
    bpb = "" if result.val_bpb is None else f"  val/bpb {result.val_bpb:.4f}"
    print(f"{which}val/loss {result.val_loss:.4f}{bpb}  {run}")


def _print_cost(result: Any) -> None:
    c = result.cost
    print(
        f"cost: peak memory {c.peak_mem_mb:,.0f} MB, MFU {c.mfu:.1%} of "
        f"{c.peak_flops / 1e12:.3g} TFLOP/s ({c.peak_flops_source}), "
        f"{c.device_hours(result.wall_s):.3g} {c.device_unit}-hours"
    )


def _print_paths(paths: Paths | None) -> None:
    if paths is None:
        return
    compiled = "compiled" if paths.compiled else "eager"
    mixing = f"; depth mixing {paths.depth_mixing} ({paths.reason})" if paths.depth_mixing else ""
    versions = ", ".join(f"{k} {v}" for k, v in paths.versions.items())
    print(f"kernels: {compiled}{mixing}; {versions}")


def _print_dilution(summaries: dict[str, float], out: Path, which: str) -> None:
    if not summaries:
        return
    print(f"dilution, {which} (trainers/measure/diagnostics.py defines each):")
    for key, value in summaries.items():
        print(f"  {key:<32} {value:.4g}")
    figures = sorted((out / "dilution").glob("*.png"))
    if figures:
        print(f"per-layer profile: {figures[-1]} (and .json)")
