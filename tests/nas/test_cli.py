"""The ``nas`` command: a real training run, and one clear line for every bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nas.cli import main
from search_spaces import BUILTIN
from trainers.config_io import build_config
from trainers.model.transformer import DeepTransformer

TINY = [
    "--set",
    "model.d_model=32",
    "--set",
    "model.n_heads=2",
    "--set",
    "model.n_layers=2",
    "--set",
    "model.seq_len=32",
    "--set",
    "train.batch_size=4",
    "--set",
    "train.max_steps=6",
    "--set",
    "train.val_every=3",
    "--set",
    "train.val_batches=1",
    "--set",
    "train.warmup_steps=2",
    "--set",
    "data.max_bytes=1000000",
]


def test_train_end_to_end(tmp_path: Path) -> None:
    """`nas train` exits 0, prints the validation loss, and leaves a reloadable run folder."""
    out = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nas.cli",
            "train",
            *TINY,
            "--set",
            "model.residual=attnres",
            "--set",
            f"data.cache_dir={tmp_path / 'cache'}",
            "--out",
            str(out),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "val/loss" in proc.stdout and "val/bpb" in proc.stdout
    assert "dilution/stream_growth" in proc.stdout and "dilution/depth_entropy" in proc.stdout
    assert (out / "dilution" / "step-000006.png").exists()
    cfg = build_config(str(out / "config.yaml"))
    assert cfg.model.residual == "attnres" and cfg.train.max_steps == 6
    model = DeepTransformer(cfg.model)
    model.load_state_dict(torch.load(out / "model.pt", weights_only=True))
    assert (out / "result.json").exists()


BAD = [
    (["train", "--set", "model.residual=nope"], "model.residual"),
    (["train", "--set", "model.n_heads=3"], "model.n_heads"),
    (
        ["train", "--set", "model.residual=block_attnres", "--set", "model.attnres_blocks=64"],
        "model.attnres_blocks",
    ),
    (
        ["train", "--set", "model.residual=attnres", "--set", "model.placement=post"],
        "model.placement",
    ),
    (["train", "--set", "model.depth=3"], "unknown field"),
    (["train", "--set", "train.routing_alarm=0"], "train.routing_alarm"),
    (["train", "--set", "train.routing_alarm=1.5"], "train.routing_alarm"),
    (["train", "--set", "model.n_layers=many"], "not a valid int"),
    (["train", "--set", "train.micro_batch=32"], "larger than train.batch_size 16"),
    (["train", "--set", "train.micro_batch=3"], "does not divide train.batch_size 16"),
    (["train", "--set", "train.micro_batch=-1"], "train.micro_batch: -1 is negative"),
    (["train", "--set", "train.checkpointing=block"], "train.checkpointing: 'block'"),
    (["train", "--set", "train.compile=sometimes"], "train.compile: 'sometimes'"),
    # the fused kernels run on CUDA only: pinned on this CPU, the run is refused before a write
    (
        ["train", "--set", "model.residual=block_attnres", "--set", "train.depth_path=fused"],
        "train.depth_path=fused: device 'cpu'",
    ),
    (
        ["train", "--set", "train.depth_path=fused", "--set", "train.compile=true"],
        "the fused kernels run eagerly",
    ),
    (["train", "--set", "data.source=text", "--set", "data.path=/no/such/file"], "does not exist"),
    (["train", "--set", "data.source=text"], "needs a path"),
    (["train", "--config", "/no/such.yaml"], "no such file"),
    (["train", "--frobnicate"], "unrecognized arguments"),
    (["fly"], "invalid choice"),
]


@pytest.mark.parametrize("argv,match", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2_nothing_written(
    argv: list[str],
    match: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each bad input: exit status 2, one stderr line naming the problem, no files written."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_too_short_text_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A text file shorter than one sequence is refused before any output folder exists."""
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("hello")
    out = tmp_path / "out"
    code = main(
        ["train", "--set", "data.source=text", "--set", f"data.path={corpus}", "--out", str(out)]
    )
    assert code == 2 and "one sequence needs" in capsys.readouterr().err
    assert not out.exists()


def test_exit_status_from_the_console_script(tmp_path: Path) -> None:
    """The installed entry point returns 2 to the shell, with no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "nas.cli", "train", "--set", "model.norm=batchnorm"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("nas: error: model.norm")
    assert "Traceback" not in proc.stderr


def test_cli_help_does_not_import_torch() -> None:
    """`nas --help` stays fast: the CLI module imports no torch, Lightning or Ray."""
    code = "import sys, nas.cli; sys.exit(any(m in sys.modules for m in ('torch', 'lightning', 'ray')))"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_spaces_lists_and_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """`nas spaces` lists every built-in space in one line each; with a name, its trial count."""
    assert main(["spaces"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listing] == list(BUILTIN)
    assert main(["spaces", "quick"]) == 0
    assert "12 trials (6 configurations x 2 seeds)" in capsys.readouterr().out
    assert main(["spaces", "nonesuch"]) == 2
    assert "no such space" in capsys.readouterr().err


def test_spaces_says_which_cells_are_one_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nas spaces FILE` counts a grid whose cells differ only in a field their model does not
    read as one model and says so, as the sweep would run it."""
    space = tmp_path / "space.yaml"
    space.write_text(
        "name: collapse\nbase: {model.d_model: 32, model.n_heads: 2}\n"
        "arms: {standard: {model.residual: standard}, hyper: {model.residual: hyper}}\n"
        "params: {model.hc_streams: {choice: [2, 4]}}\n"
    )
    assert main(["spaces", str(space)]) == 0
    out = capsys.readouterr().out
    assert "3 trials (3 configurations x 1 seeds)" in out
    assert "standard × hc_streams 2, 4: one model, run once" in out


@pytest.mark.slow  # starts an MLflow server
def test_ui_serves_the_store_on_loopback(tmp_path: Path) -> None:
    """`nas ui` starts a real MLflow UI on 127.0.0.1 that answers for the given store; SIGINT
    stops it and its workers."""
    import signal
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nas.cli", "ui", "--tracking-uri", uri, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        assert f"http://127.0.0.1:{port}" in proc.stdout.readline()
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline and status is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                    status = r.status
            except OSError:
                time.sleep(0.5)
        assert status == 200
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)


def test_sweep_help_lists_every_exit_status_the_sweep_returns() -> None:
    """The help's list is made from the table the sweep returns from: a status added there (69,
    the store down, was missing) is listed."""
    from nas.cli import build_parser
    from nas.exits import MEANING, Exit

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    text = " ".join(sub.choices["sweep"].format_help().split())  # type: ignore[union-attr]
    for code in Exit:
        assert f"{int(code)} {MEANING[code]}" in text


def test_every_command_module_is_registered_once() -> None:
    """A command is its module in nas/commands and its name in ``nas.cli.COMMANDS``: a module
    left out would be a command no one can run."""
    from pathlib import Path

    from nas.cli import COMMANDS

    folder = Path(__file__).resolve().parents[2] / "nas" / "commands"
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__"}
    assert sorted(COMMANDS) == sorted(modules)
