"""Documentation that cannot drift: every ``nas ...`` command shown in a fenced code block of
README.md or docs/**/*.md is parsed by ``nas.cli.build_parser()`` and, unless it needs something
CI does not have, run; and the README's Layout section names the repository's top-level folders.

How a command is treated is decided by rules (``classify``), never by a list of the documents'
lines, so a new example is covered without editing this file:

- **parse only**, with the reason: a cluster (``--address``), a server or database URI
  (``http://``, ``postgresql://``...), ``nas ui`` (it serves until stopped), a GPU
  (``--gpus-per-trial`` above 0, or ``train.accelerator`` set to a GPU). Today those are the
  README's cluster command, ``nas sweep residual_ablation --address auto --tracking-uri
  http://...``, and its report over a laptop's and a server's sweeps, ``nas report quick
  quick_gpu@http://...`` (``tests/reports/test_report.py`` runs reports over several stores);
- **unclassifiable**, a failure: a placeholder the test cannot fill (``RUN_ID``, ``<name>``,
  ``...``), or a command ``build_parser()`` refuses;
- **planned**, a sweep or a training run whose code path other tests run end to end
  (``COVERED_BY`` names them): its plan or configuration is built in-process, as ``nas`` does
  before it starts anything, so that a documented option that no longer works fails here;
- **run**, everything else, on a tiny store: one ``quick`` sweep, shrunk (``tiny``) and recorded
  once for the module, because the README's report commands name the demo's sweep. A command
  that trains and is run (the store's own sweep, resumed; a kind of command added later) is
  shrunk the same way: width 16, 2 steps, seed 0, and its own run length
  (``--max-steps``, ``--set train.max_steps=...``, ``--seeds``, ``--trials``) replaced, its
  other settings kept. A sweep whose plan is still large after that (more than
  ``MAX_TRIALS`` cells, or trials trained to a FLOP budget, which no ``--set`` can shrink:
  ``compute_frontier``, ``architecture_sweep``) runs with a time budget of about a second: it
  plans, opens its record and starts Tune, then stops as documented, exit 75. A YAML file a
  command names that does not exist (``--config my.yaml``, a space ``my_space.yaml``) is
  written first, tiny. A sweep of the store's name runs in the store (a resume: nothing new to
  train); other sweeps and ``nas train`` run in a folder of their own; everything else (``nas
  report``, ``nas spaces``, subcommands added later) runs in the store's folder. A sweep runs
  as ``nas`` in a subprocess; any other command runs ``nas.cli.main`` in this process
  (``tests.cli.nas_here``), which spares an interpreter's start and imports per command.

Every command must exit 0 (75 where the test set the time budget).
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from nas.cli import UsageError, build_parser
from tests.cli import nas_here, run_nas
from tests.nas.sweeps import run_here

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# docs/results/ holds generated reports: their commands are records of how they were made
GENERATED = ROOT / "docs" / "results"
DOCUMENTS = (
    README,
    *sorted(p for p in (ROOT / "docs").rglob("*.md") if not p.is_relative_to(GENERATED)),
)

STORE_SWEEP = "quick"  # the sweep the documents' report commands name
MAX_TRIALS = 6  # cells (seed 0) a documented sweep may train in full here
TIME_BUDGET_H = "0.0003"  # about a second: plan, record and Tune start, then exit 75
TINY_STEPS = "2"
TINY = (
    "model.d_model=16",
    "model.n_heads=2",
    "model.seq_len=32",
    "train.batch_size=2",
    "train.val_every=1",
    "train.val_batches=1",
    "train.warmup_steps=0",
    "train.diagnostics_batch=1",
    "data.max_bytes=1000000",
)
LENGTH_KEYS = ("train.max_steps", "train.target_flops", "train.tokens_per_param")
BUDGET_KEYS = LENGTH_KEYS[1:]
REPLACED = ("--seeds", "--max-steps", "--trials")  # the test gives its own values
# at a word's start, or after NAME@ (``nas report SWEEP@URI``)
SERVER_SCHEMES = re.compile(r"(^|@)(https?|postgres(ql)?(\+\w+)?|mysql\S*|grpc)://")
NAS_LINE = re.compile(r"^\s*(\S*/)?nas(\s|$)")  # the program, also as .venv/bin/nas
PLACEHOLDER = re.compile(r"<[^>]*>|\.\.\.|…|^[A-Z][A-Z0-9_]{2,}$")

TINY_CONFIG = """\
model: {d_model: 16, n_heads: 2, n_layers: 2, seq_len: 32}
train: {batch_size: 2, max_steps: 2, val_every: 1, val_batches: 1, warmup_steps: 0}
data: {max_bytes: 1000000}
"""
TINY_SPACE = """\
description: a tiny space the documentation's example file stands for
base: {model.d_model: 16, model.n_heads: 2, model.n_layers: 2, model.seq_len: 32,
       train.batch_size: 2, train.max_steps: 2, train.val_every: 1, train.val_batches: 1,
       train.warmup_steps: 0, train.diagnostics_batch: 1, data.max_bytes: 1000000,
       model.attnres_blocks: 2}
arms:
  standard: {model.residual: standard}
  block_attnres: {model.residual: block_attnres}
"""


@dataclass(frozen=True)
class Command:
    where: str  # "README.md:87"
    words: tuple[str, ...]  # after "nas"
    problem: str | None = None  # the line is not one shell command

    def __str__(self) -> str:
        return f"{self.where}: nas {shlex.join(self.words)}"


# --- finding the commands -----------------------------------------------------------------


def fenced_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, logical line) inside fenced code blocks, backslash continuations joined."""
    inside, pending, start = False, "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        start = start if pending else number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def commands_in(text: str, name: str) -> list[Command]:
    """Every line of a code block whose command is ``nas`` (also as ``.venv/bin/nas``), comments
    dropped; other programs' lines (``make demo``) are not the CLI's."""
    found = []
    for number, line in fenced_lines(text):
        if not NAS_LINE.match(line):
            continue
        try:
            words = shlex.split(line, comments=True)
        except ValueError as err:
            found.append(Command(f"{name}:{number}", tuple(line.split()[1:]), str(err)))
            continue
        found.append(Command(f"{name}:{number}", tuple(words[1:])))
    return found


def documented() -> list[Command]:
    """Each distinct command once (the README and docs/ repeat some), named by every place
    that shows it."""
    found: dict[tuple[str, ...], list[Command]] = {}
    for p in DOCUMENTS:
        for c in commands_in(p.read_text(), str(p.relative_to(ROOT))):
            found.setdefault(c.words, []).append(c)
    return [
        Command(", ".join(c.where for c in same), same[0].words, same[0].problem)
        for same in found.values()
    ]


# --- deciding what to do with one ---------------------------------------------------------


def _split_equals(words: tuple[str, ...]) -> list[str]:
    """``--opt=value`` as ``--opt value``, so each rule looks at one form."""
    out: list[str] = []
    for word in words:
        opt, eq, value = word.partition("=")
        out.extend([opt, value] if word.startswith("--") and eq else [word])
    return out


def _options(words: list[str]) -> dict[str, list[str]]:
    """Each option's values, in order (``--set`` repeats)."""
    out: dict[str, list[str]] = {}
    for flag, value in zip(words, [*words[1:], ""], strict=True):
        if flag.startswith("--"):
            out.setdefault(flag, []).append(value)
    return out


def parse_only_reason(words: list[str]) -> str | None:
    """Why a command cannot run here, or None."""
    opts = _options(words)
    if words[:1] == ["ui"]:
        return "nas ui serves until stopped"
    if "--address" in opts:
        return "needs a Ray cluster (--address)"
    servers = [w for w in words if SERVER_SCHEMES.search(w)]
    if servers:
        scheme = servers[0].split("://")[0].rpartition("@")[2]
        return f"needs a server or database ({scheme}://)"
    gpus = opts.get("--gpus-per-trial", [])
    accelerator = [s for s in opts.get("--set", []) if s.startswith("train.accelerator=")]
    if any(_number(g) > 0 for g in gpus) or any(a.endswith(("gpu", "cuda")) for a in accelerator):
        return "needs a GPU"
    return None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def unclassifiable(command: Command) -> str | None:
    """A reason the test cannot run or parse this command, or None."""
    if command.problem:
        return f"not one shell command: {command.problem}"
    holes = [w for w in command.words if PLACEHOLDER.search(w)]
    if holes:
        return f"placeholder {holes[0]!r}: the test cannot fill it"
    try:
        build_parser().parse_args(list(command.words))
    except UsageError as err:
        return f"nas refuses it: {err}"
    except SystemExit as exit_:  # --help prints and exits 0
        if exit_.code not in (0, None):
            return f"nas refuses it (exit {exit_.code})"
    return None


@dataclass(frozen=True)
class SpaceSize:
    cells: int  # at one seed; a search: its one trial
    budgeted: bool  # trains to FLOP or token budgets
    search: bool


def _size(space_name: str, cwd: Path) -> SpaceSize:
    from search_spaces import get_space
    from search_spaces.builtin import BUILTIN

    space = get_space(space_name if space_name in BUILTIN else str(cwd / space_name))
    budgeted = any(k in space.base or k in space.params for k in BUDGET_KEYS)
    if space.kind == "search":
        return SpaceSize(1, budgeted, True)
    cells = len(space.arms or {"": {}}) * math.prod(len(d.grid()) for d in space.params.values())
    return SpaceSize(cells, budgeted, False)


def tiny(words: list[str], cwd: Path = ROOT) -> tuple[list[str], int]:
    """A training command shrunk (see the module docstring), and the exit status expected."""
    kept: list[str] = []
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
            continue
        value = words[i + 1] if i + 1 < len(words) else ""
        if word in REPLACED or (word == "--set" and value.partition("=")[0] in LENGTH_KEYS):
            skip = True
            continue
        kept.append(word)
    sets = [x for s in TINY for x in ("--set", s)]
    command, rest = kept[:1], kept[1:]
    if command == ["train"]:
        return [*command, *sets, "--set", f"train.max_steps={TINY_STEPS}", *rest], 0
    size = _size(rest[0], cwd)
    own_budget = any(s.partition("=")[0] in BUDGET_KEYS for s in _options(rest).get("--set", []))
    budgeted = size.budgeted or own_budget
    length = [] if budgeted else ["--max-steps", TINY_STEPS]
    trials = ["--trials", "1"] if size.search else []
    shrunk = [*command, rest[0], *sets, *length, "--seeds", "0", *trials, *rest[1:]]
    if budgeted or size.cells > MAX_TRIALS:
        return [*shrunk, "--time-budget", TIME_BUDGET_H], 75
    return shrunk, 0


def _write_named_files(words: list[str], cwd: Path) -> None:
    """The YAML files a command names that do not exist: a configuration for ``--config``, a
    space for ``nas sweep``."""
    opts = _options(words)
    for path in opts.get("--config", []):
        if not (cwd / path).exists():
            (cwd / path).write_text(TINY_CONFIG)
    space = words[1] if words[:1] == ["sweep"] else ""
    if space.endswith((".yaml", ".yml")) and not (cwd / space).exists():
        (cwd / space).write_text(TINY_SPACE)


def _sweep_name(words: list[str]) -> str:
    names = _options(words).get("--name")
    return names[-1] if names else Path(words[1]).stem


# --- the tiny store -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose ./mlflow.db holds one shrunk ``quick`` sweep (6 trials of 2 steps), run
    by the command with its trials trained in this process (``tests.nas.sweeps.run_here``: what
    Ray adds, the real sweeps of tests/nas show), its Tune folder where the command keeps it."""
    folder = tmp_path_factory.mktemp("store")
    words, _ = tiny(["sweep", STORE_SWEEP])
    code, _ = run_here(folder, [*words[1:], "--storage-path", str(folder / "ray_results")])
    assert code == 0
    return folder


# --- the tests ----------------------------------------------------------------------------

COMMANDS = documented()


def test_the_documents_show_commands_of_every_kind() -> None:
    """The extraction finds the README's and docs/'s examples (a silent zero would pass every
    parametrized test), including the cluster command that is only parsed."""
    where = {w.split(":")[0] for c in COMMANDS for w in c.where.split(", ")}
    assert {"README.md", "docs/report.md"} <= where
    subcommands = {c.words[0] for c in COMMANDS if c.words}
    assert {"train", "spaces", "sweep", "report"} <= subcommands
    assert any(parse_only_reason(_split_equals(c.words)) for c in COMMANDS)


# What runs a documented command's training end to end, so that here it is only planned: the
# plan (the space, its cells, every option's value) or the configuration is built in-process,
# which is where a documented option that stopped working fails, without Ray or training.
COVERED_BY = {
    "sweep": "tests/nas/test_sweep.py (grid and search sweeps, a time budget and exit 75, resume, "
    "SIGTERM, SIGKILL) and tests/nas/test_campaign.py (YAML spaces, --seeds, --set, extension)",
    "train": "tests/nas/test_cli.py::test_train_end_to_end (training, its outputs, --set, "
    "--config round trip)",
}


def planned_reason(words: list[str]) -> str | None:
    """Why a command is planned instead of run (``COVERED_BY``), or None. A sweep of the
    store's name runs: it resumes the store's sweep (nothing to train), a path no other test
    takes with the documented options."""
    if "--help" in words or words[0] not in COVERED_BY:
        return None
    if words[0] == "sweep" and _sweep_name(words) == STORE_SWEEP:
        return None
    return COVERED_BY[words[0]]


def _plan(words: list[str], cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Build what the command would run, as ``nas`` does before it starts anything."""
    from nas.commands import sweep as sweep_cmd
    from nas.commands import train as train_cmd
    from nas.sweep.plan import plan

    monkeypatch.chdir(cwd)  # relative paths (--config, a space file, storage) as typed
    args = build_parser().parse_args(words)
    if words[0] == "sweep":
        planned = plan(sweep_cmd.options(args))
        assert planned.specs or planned.space.kind == "search", "a grid with no cell"
    else:
        train_cmd.configuration(args)


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_documented_command(
    command: Command, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parsed by ``nas``; a sweep or training whose code path other tests run is planned
    (``COVERED_BY``); anything else is run on the tiny store unless it needs a cluster, a
    server or a GPU."""
    problem = unclassifiable(command)
    assert problem is None, f"{command}: {problem}"
    words = _split_equals(command.words)
    reason = parse_only_reason(words)
    if reason:
        print(f"parsed only ({reason}): {command}")
        return
    covered = planned_reason(words)
    if covered:
        _write_named_files(words, tmp_path)
        _plan(words, tmp_path, monkeypatch)
        print(f"planned (run end to end by {covered}): {command}")
        return
    cwd = store
    if words[0] == "train" or (words[0] == "sweep" and _sweep_name(words) != STORE_SWEEP):
        cwd = tmp_path
        # a copy of the store: a new SQLite store's schema migrations cost seconds per command
        shutil.copy(store / "mlflow.db", tmp_path / "mlflow.db")
    if words[0] in ("train", "sweep") and "--help" not in words:
        _write_named_files(words, cwd)
        words, expected = tiny(words, cwd)
    else:
        expected = 0
    print(f"runs: nas {shlex.join(words)}")
    out = run_nas(cwd, *words) if words[0] == "sweep" else nas_here(cwd, *words)
    assert out.returncode == expected, f"{command}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"


def test_a_documented_option_that_no_longer_plans_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning is a real check, not a pass: a sweep or training a documented line could show
    with a value the configuration rejects raises where ``nas`` would exit 2."""
    (tmp_path / "my.yaml").write_text(TINY_CONFIG)
    for words in (
        ["sweep", "smoke", "--set", "model.n_heads=3"],
        ["sweep", "no_such_space"],
        ["train", "--config", "my.yaml", "--set", "model.residual=nonesuch"],
    ):
        with pytest.raises(ValueError):
            _plan(words, tmp_path, monkeypatch)
    assert planned_reason(["sweep", "smoke"]) and planned_reason(["train"])
    assert planned_reason(["sweep", STORE_SWEEP, "--concurrency", "2"]) is None
    assert planned_reason(["train", "--help"]) is None
    assert planned_reason(["report", STORE_SWEEP]) is None


def test_rules_classify_new_examples_without_editing_this_file() -> None:
    """A new example is found (continuations joined, comments dropped, other programs left
    out), shrunk, parsed only where it needs a cluster, a server or a GPU, and a placeholder or
    an option ``nas`` does not have is unclassifiable."""
    text = (
        "```bash\n"
        ".venv/bin/nas sweep smoke --seeds 0,1 \\\n  --set train.max_steps=500  # tiny\n"
        "make demo\n"
        "nas sweep quick --address auto\n"
        "nas report quick --tracking-uri postgresql://u@h:5432/db\n"
        "nas train --set train.accelerator=gpu\n"
        "nas ui\n"
        "nas train --from-run RUN_ID\n"
        "nas sweep smoke --no-such-option\n"
        "```\nnas sweep outside_a_block\n"
    )
    found = commands_in(text, "x.md")
    assert [c.where for c in found] == [f"x.md:{n}" for n in (2, 5, 6, 7, 8, 9, 10)]
    first = _split_equals(found[0].words)
    assert first == ["sweep", "smoke", "--seeds", "0,1", "--set", "train.max_steps=500"]
    shrunk, expected = tiny(first)
    assert expected == 0 and "train.max_steps=500" not in shrunk and "0,1" not in shrunk
    assert shrunk[shrunk.index("--max-steps") + 1] == TINY_STEPS
    reasons = [parse_only_reason(_split_equals(c.words)) for c in found]
    assert reasons[0] is None and all(reasons[1:5])
    assert [bool(unclassifiable(c)) for c in found] == [False] * 5 + [True, True]
    _, frontier = tiny(["sweep", "compute_frontier", "--concurrency", "2"])
    assert frontier == 75  # budgeted: shrunk by the time budget, not by steps


# --- the Layout section -------------------------------------------------------------------


def _layout_folders() -> set[str]:
    text = README.read_text()
    start = text.index("\n## Layout\n")
    section = text[start : text.index("\n## ", start + 1)]
    return {m.group(1) for m in re.finditer(r"^(\.?[\w-]+)/\s", section, re.M)}


def _tracked_top_level_folders() -> set[str]:
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout: {err}")
    return {p.split("/")[0] for p in listed.splitlines() if "/" in p}


def test_layout_names_every_top_level_folder_and_only_existing_ones() -> None:
    """Every folder git tracks at the top level (hidden ones aside) is described in the Layout
    section, and every folder the section describes exists."""
    described = _layout_folders()
    tracked = {f for f in _tracked_top_level_folders() if not f.startswith(".")}
    assert tracked - described == set(), "folders the Layout section leaves out"
    assert {f for f in described if not (ROOT / f).is_dir()} == set(), "folders that are gone"
