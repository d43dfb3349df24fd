"""The results gallery (``docs/results/``): the studies this project has run at CPU scale, each
as its committed Markdown report with figures, and an index giving the exact command, the commit
and the hardware.

``make results`` runs this: each study's sweep into one MLflow store under ``gallery/`` (kept
between runs and ignored by git: a study whose sweep is settled there is only reported again),
then ``nas report`` into ``docs/results/<study>/``. ``--only quick`` limits it to some studies.
The sweeps run from the repository root with relative paths, so the reports' provenance names
no local folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from record.machine import cpu_words

ROOT = Path(__file__).resolve().parents[2]
STORE = "gallery"  # relative to ROOT: the studies' MLflow store and Tune state
OUT = Path("docs") / "results"
MADE = "made.json"  # beside each study's report: its commands, commit, hardware and date
# beside a study's report, written by hand after reading it: what the study shows at this scale,
# with its uncertainty. The index quotes it under the study's heading; a rerun keeps it, and
# whoever reruns the study rereads the report and revises it.
FINDINGS = "findings.md"


Trials = frozenset[tuple[str, str, int | None]] | None  # (run id, status, end time) per trial


@dataclass(frozen=True)
class Study:
    name: str  # the built-in space, and the sweep's name
    about: str  # what it asks, in one line
    sweep_args: tuple[str, ...] = ()
    report_args: tuple[str, ...] = ()


STUDIES = (
    Study(
        "demo",
        "the demo (`make demo`): standard pre-norm against Block AttnRes at 8 blocks, 6 seeds",
        ("--concurrency", "2"),
    ),
    Study("quick", "a first look: standard/pre against Full and Block AttnRes at 4 and 8 blocks"),
    Study(
        "compute_frontier",
        "iso-FLOP curves: depth at three FLOP budgets, standard against Block AttnRes",
        ("--concurrency", "2", "--cpus-per-trial", "1"),
    ),
    Study(
        "attnres_ablation",
        "the AttnRes paper's Table 4 ablation at CPU size (8 blocks, 300 steps, 3 seeds)",
        ("--concurrency", "2", "--cpus-per-trial", "1", "--max-steps", "300"),
    ),
    Study(
        "lr_transfer",
        "the optimal learning rate against depth (CompleteP's Fig. 1 at CPU size): standard and "
        "Block AttnRes under sp and CompleteP",
        ("--concurrency", "2", "--cpus-per-trial", "1"),
    ),
    Study(
        "depth_gpt2_cpu",
        "the GPT-2-scale depth study's CPU twin: standard, Block and Full AttnRes at 4, 8 and 16 "
        "layers, each arm and depth at its own learning rate (its GPU plan in its findings)",
        ("--concurrency", "2", "--cpus-per-trial", "1"),
    ),
)


def _torch_version() -> str:
    """The installed torch, without importing it (a CPU build names itself: 2.13.0+cpu)."""
    return version("torch")


def _nas(*args: str) -> list[str]:
    return [sys.executable, "-m", "nas.cli", *args]


def _run(cmd: list[str]) -> float:
    """Run from the repository root; the seconds it took. Exits with the command's status."""
    start = time.monotonic()
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
    if proc.returncode != 0:
        sys.exit(f"gallery: `{' '.join(cmd)}` exited {proc.returncode}")
    return time.monotonic() - start


def _shown(cmd: list[str]) -> str:
    """The command as a reader types it."""
    return " ".join(["nas", *cmd[3:]])


def study(s: Study) -> None:
    """Sweep (a settled sweep runs nothing) and report one study; how it was made goes
    beside its report (``MADE``), for the index."""
    store = [f"--tracking-uri=sqlite:///{STORE}/mlflow.db", f"--storage-path={STORE}/ray"]
    sweep = _nas("sweep", s.name, *s.sweep_args, *store)
    report = _nas("report", s.name, "--format", "md", "--out", str(OUT / s.name),
                  *s.report_args, store[0])  # fmt: skip
    before = trial_runs(s.name)
    seconds = _run(sweep)
    ran = trial_runs(s.name) != before
    folder = ROOT / OUT / s.name
    kept = _set_aside(folder)
    _run(report)
    if FINDINGS in kept:
        (folder / FINDINGS).write_text(kept[FINDINGS])
    made = {
        "sweep": _shown(sweep),
        "report": _shown(report),
        "sweep_seconds": round(seconds),
        "commit": _commit(),
        "hardware": f"{cpu_words()}, torch {_torch_version()}",
        "date": time.strftime("%Y-%m-%d"),
    }
    (ROOT / OUT / s.name / MADE).write_text(
        json.dumps(made_record(made, kept, ran), indent=1) + "\n"
    )


def made_record(fresh: dict[str, Any], kept: dict[str, str], ran: bool) -> dict[str, Any]:
    """What ``MADE`` says of a study: ``fresh``, this run's commands, sweep time, commit,
    hardware and date; but where the sweep trained nothing (``ran`` false) and the earlier
    ``MADE`` was kept (``kept``, from ``_set_aside``), the report was only made again from the
    kept store, so the sweep's time, commit, machine and date are still those of the run that
    trained it: the kept record, with this run's commit and date as ``reported``."""
    if ran or MADE not in kept:
        return fresh
    return {
        **json.loads(kept[MADE]),
        "reported": {"commit": fresh["commit"], "date": fresh["date"]},
    }


def trial_runs(name: str, db: Path = ROOT / STORE / "mlflow.db") -> Trials:
    """Each trial run of sweep ``name`` in the store ``db`` (the gallery's), with its status and
    end time (None when the store holds no such sweep): what a sweep that trained anything
    changes, and a settled one, which only opens and closes its parent run again, does not."""
    from record.read import live_sweep

    if not db.is_file():
        return None
    try:  # the same store the sweep's relative URI names, by its absolute path
        _, _, _, trials = live_sweep(f"sqlite:///{db}", name)
    except ValueError:  # no such sweep yet
        return None
    return frozenset((r.info.run_id, r.info.status, r.info.end_time) for r in trials)


def _set_aside(folder: Path) -> dict[str, str]:
    """The gallery's own files beside a report (``MADE``, ``FINDINGS``), read and removed:
    ``nas report`` replaces only a folder that holds nothing but an earlier report."""
    kept = {}
    for name in (MADE, FINDINGS):
        path = folder / name
        if path.is_file():
            kept[name] = path.read_text()
            path.unlink()
    return kept


def _commit() -> str:
    out = subprocess.run(
        ["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def index() -> str:
    """``docs/results/README.md``: every study the folder holds, with how it was made."""
    lines = [
        "# Results gallery",
        "",
        "What the harness produces, and what it shows at small scale: the studies below ran on "
        "the CPU of a 2-core machine, with the reports exactly as `nas report` wrote them. At "
        "this scale the runs are short and the models tiny: read each report's intervals, "
        "verdicts and notes, not only its means; a published effect appears here only where "
        "the report's own statistics show it. Regenerate with `make results` (each study's "
        "sweep time is under its heading; `python -m benchmarks.harness.gallery --only demo` for the "
        "demo alone, about 8 minutes).",
        "",
    ]
    for s in STUDIES:
        folder = ROOT / OUT / s.name
        if not (folder / "report.md").is_file() or not (folder / MADE).is_file():
            continue
        made = json.loads((folder / MADE).read_text())
        findings = folder / FINDINGS
        lines += [
            f"## [{s.name}]({s.name}/report.md)",
            "",
            s.about + ".",
            "",
            *([findings.read_text().strip(), ""] if findings.is_file() else []),
            "```bash",
            made["sweep"],
            made["report"],
            "```",
            "",
            f"Commit `{made['commit']}`, {made['hardware']}, {made['date']}; the sweep command "
            f"took {made['sweep_seconds']} s in the run that trained it"
            + (
                f"; reported again at commit `{made['reported']['commit']}` on "
                f"{made['reported']['date']}."
                if "reported" in made
                else "."
            ),
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only", help="comma-separated studies: " + ", ".join(s.name for s in STUDIES)
    )
    args = parser.parse_args()
    names = [s.name for s in STUDIES]
    chosen = args.only.split(",") if args.only else names
    unknown = [n for n in chosen if n not in names]
    if unknown:
        sys.exit(f"gallery: unknown studies {unknown}; choose from {', '.join(names)}")
    (ROOT / STORE).mkdir(exist_ok=True)
    for s in STUDIES:
        if s.name in chosen:
            study(s)
    (ROOT / OUT / "README.md").write_text(index())
    print(f"wrote {OUT / 'README.md'}")


if __name__ == "__main__":
    main()
