"""``nas coordcheck``: does a configuration's parametrization keep every module class's update
the same size across widths and depths? The measurement is ``trainers.measure.coordcheck``'s; this
module parses the command, validates every size before anything is written, writes the tables
and the figure, and prints the verdict (exit 1 when it fails).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

from trainers.measure.coordcheck_table import DEPTHS, WIDTHS

# CPU-sized defaults (seconds on two cores: widths 32-256 at depth 2, depths 2-32 at width 32); the
# model is the configuration's, with a short context unless --set says otherwise.
DEFAULTS = ("model.d_model=32", "model.n_layers=2", "model.seq_len=32")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "coordcheck",
        help="check that a parametrization keeps activations' updates flat across sizes",
        description="Train a configuration for a few AdamW steps on one fixed batch at several "
        "widths (d_model) and/or depths (n_layers) and compare each module class's mean "
        "|activation| and |change since init| (microsoft/mup's coord check). Writes a CSV, a "
        "Markdown table and a log-log PNG per axis; prints a verdict; exit 1 if it fails.",
    )
    p.add_argument("--config", metavar="FILE", help="YAML file with model/train sections")
    p.add_argument(
        "--set",
        dest="overrides",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override one key (after the CPU-sized defaults "
        f"{', '.join(DEFAULTS)}), e.g. --set model.parametrization=completep; unless set, "
        "base_width and base_depth are the smallest size checked (and the fixed other size)",
    )
    p.add_argument("--widths", type=_sizes, help=f"d_model values (default {_show(WIDTHS)})")
    p.add_argument("--depths", type=_sizes, help=f"n_layers values (default {_show(DEPTHS)})")
    p.add_argument("--steps", type=_positive, default=4, help="AdamW steps (default 4)")
    p.add_argument("--seeds", type=_seeds, default=(0, 1), help="seeds (default 0,1)")
    p.add_argument("--batch-size", type=_positive, default=4, help="sequences (default 4)")
    p.add_argument("--out", metavar="DIR", help="output folder (default runs/coordcheck/<time>)")
    p.set_defaults(run=run_coordcheck)


def _show(sizes: tuple[int, ...]) -> str:
    return ",".join(map(str, sizes))


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{what} {text!r}: expected comma-separated integers"
        ) from None


def _sizes(text: str) -> tuple[int, ...]:
    sizes = _ints(text, "sizes")
    if len(sizes) < 2 or min(sizes) < 1 or len(set(sizes)) < len(sizes):
        raise argparse.ArgumentTypeError(f"sizes {text!r}: two or more distinct integers >= 1")
    return sizes


def _seeds(text: str) -> tuple[int, ...]:
    return _ints(text, "seeds")


def _positive(text: str) -> int:
    value = _ints(text, "value")
    if len(value) != 1 or value[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected one integer >= 1")
    return value[0]


def _based(model: Any, axis: str, sizes: tuple[int, ...], given: dict[str, Any]) -> Any:
    """The model with its base sizes where it reads them and --set leaves them: the smallest
    size checked (the width or depth an sp learning rate is tuned at, so the check starts from
    sp there) and the fixed other size."""
    from trainers.identity import unread_fields

    unread = unread_fields(model)
    base = {
        "base_width": min(sizes) if axis == "width" else model.d_model,
        "base_depth": min(sizes) if axis == "depth" else model.n_layers,
    }
    chosen = {k: v for k, v in base.items() if k not in unread and k not in given}
    return dataclasses.replace(model, **chosen)


def _checks(args: argparse.Namespace) -> list[Any]:
    """The coord checks asked for, every size's configuration validated (ValueError: exit 2)."""
    from trainers.config_io import build_config, parse_overrides
    from trainers.measure.coordcheck import CoordCheck

    cfg = build_config(args.config, [*DEFAULTS, *args.overrides])
    given = parse_overrides(args.overrides).get("model", {})
    axes = {"width": args.widths, "depth": args.depths}
    if not any(axes.values()):
        axes = {"width": WIDTHS, "depth": DEPTHS}
    checks = []
    for axis, sizes in axes.items():
        if sizes:
            check = CoordCheck(
                model=_based(cfg.model, axis, tuple(sizes), given),
                train=cfg.train,
                axis=axis,  # type: ignore[arg-type]
                sizes=tuple(sizes),
                steps=args.steps,
                seeds=tuple(args.seeds),
                batch_size=args.batch_size,
            )
            for size in check.sizes:
                check.config_at(size)
            checks.append(check)
    return checks


def run_coordcheck(args: argparse.Namespace) -> int:
    checks = _checks(args)
    m = checks[0].model
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = (
        Path(args.out) if args.out else Path("runs") / "coordcheck" / f"{stamp}-{m.parametrization}"
    )
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"--out {out}: folder exists and is not empty; choose a new one")
    import torch

    from trainers.measure import coordcheck as cc

    torch.set_num_threads(1)  # small matrices: one thread measured faster than two
    out.mkdir(parents=True, exist_ok=True)
    passed = True
    for check in checks:
        rows = cc.run(check)
        title = f"{m.parametrization}, {m.residual}/{m.placement}: {check.axis}"
        cc.write_csv(rows, out / f"coordcheck-{check.axis}.csv")
        (out / f"coordcheck-{check.axis}.md").write_text(cc.markdown(rows, check.axis) + "\n")
        cc.write_figure(rows, check.axis, out / f"coordcheck-{check.axis}.png", title)
        ok, line = cc.verdict(rows, check.axis)
        passed &= ok
        print(f"{title}\n{cc.markdown(rows, check.axis)}\n{line}\n")
    print(f"outputs in {out}")
    return 0 if passed else 1
