"""The cluster deployment files in deploy/ and the README's "Run on a cluster" section: they
parse, they turn on Ray token authentication everywhere, and every `nas sweep` command they
show is one `nas sweep` accepts. Fast: nothing here starts Ray or imports torch."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from nas.cli import UsageError, build_parser

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
RAY_UP = DEPLOY / "ray-cluster.yaml"
RAYJOB = DEPLOY / "rayjob.yaml"
SLURM = DEPLOY / "slurm.sh"
README = ROOT / "README.md"

# "nas sweep" followed by an argument (prose such as "`nas sweep` takes ..." is not a command).
COMMAND = re.compile(r"(?<![\w/.-])nas sweep(?=[ \t]+[^\s`])")
PLACEHOLDER = "PLACEHOLDER"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _cluster_section() -> str:
    text = README.read_text()
    start = text.index("\n## Run on a cluster\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _logical_line(text: str, start: int) -> str:
    """From ``start`` to the end of its line, joining backslash continuations (also inside
    comments, whose continuation lines start with ``#``)."""
    lines = text[start:].split("\n")
    out = lines[0]
    i = 1
    while out.rstrip().endswith("\\") and i < len(lines):
        out = out.rstrip()[:-1] + " " + lines[i].strip().lstrip("#").strip()
        i += 1
    return out


def _substitute(command: str) -> str:
    """Shell and Kubernetes variables become placeholders, the script's "$@" a space name."""
    command = command.replace('"$@"', "quick")
    command = re.sub(r"\$\([A-Za-z_]\w*\)", PLACEHOLDER, command)  # Kubernetes $(VAR)
    command = re.sub(r"\$\{[^}]*\}", PLACEHOLDER, command)
    return re.sub(r"\$[A-Za-z_]\w*", PLACEHOLDER, command)


def _sweep_args(text: str, start: int) -> list[str]:
    """The arguments after ``nas sweep`` of the command starting at ``start``: up to the end of
    the enclosing quotes (as in ``ray exec cluster.yaml 'nas sweep ...'``) or the first shell
    operator."""
    line = _logical_line(text, start)
    quote = text[start - 1] if start > 0 and text[start - 1] in "'\"" else None
    if quote:
        line = line[: line.index(quote)]
    lexer = shlex.shlex(_substitute(line), posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set(";&|"):
            break
        words.append(word)
    assert words[:2] == ["nas", "sweep"], line
    return words[2:]


def _commands(text: str) -> list[list[str]]:
    return [_sweep_args(text, m.start()) for m in COMMAND.finditer(text)]


def _sources() -> list[tuple[str, str]]:
    files = sorted(p for p in DEPLOY.iterdir() if p.is_file())
    return [(p.name, p.read_text()) for p in files] + [("README.md", _cluster_section())]


def _check_sweep_args(where: str, args: list[str]) -> None:
    from search_spaces.builtin import BUILTIN

    try:
        ns = build_parser().parse_args(["sweep", *args])
    except UsageError as err:
        pytest.fail(f"{where}: `nas sweep {shlex.join(args)}` is refused: {err}")
    assert ns.space in BUILTIN, f"{where}: {ns.space!r} is not a built-in space"
    assert ns.address, f"{where}: a cluster command without --address or RAY_ADDRESS"


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- every file parses --------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(DEPLOY.glob("*.y*ml")), ids=lambda p: p.name)
def test_yaml_files_load(path: Path) -> None:
    assert isinstance(_load(path), dict)


def test_slurm_script_is_valid_bash() -> None:
    bash = shutil.which("bash")
    assert bash, "bash is needed to check deploy/slurm.sh"
    out = subprocess.run([bash, "-n", str(SLURM)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    text = SLURM.read_text()
    assert "set -euo pipefail" in text
    assert re.search(r"^trap cleanup EXIT$", text, re.M)


# --- token authentication everywhere ------------------------------------------------------


def test_rayjob_shape_and_token_auth() -> None:
    job = _load(RAYJOB)
    assert job["apiVersion"] == "ray.io/v1"
    assert job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["entrypoint"].startswith("nas sweep ")
    cluster = spec["rayClusterSpec"]
    pods = [("head", cluster["headGroupSpec"]["template"])]
    pods += [(g["groupName"], g["template"]) for g in cluster["workerGroupSpecs"]]
    # The submitter runs `ray job submit` against the head, so it needs the token as well.
    pods.append(("submitter", spec["submitterPodTemplate"]))
    assert len(cluster["workerGroupSpecs"]) >= 1
    for name, template in pods:
        for container in template["spec"]["containers"]:
            env = _env(container)
            assert env.get("RAY_AUTH_MODE") == "token", name
            assert "secretKeyRef" in env.get("RAY_AUTH_TOKEN", {}), name
    for name, template in pods[:-1]:
        mounts = {m["mountPath"] for c in template["spec"]["containers"] for m in c["volumeMounts"]}
        claims = [v for v in template["spec"]["volumes"] if "persistentVolumeClaim" in v]
        assert "/mnt/shared" in mounts and claims, name
        assert all("requests" in c["resources"] for c in template["spec"]["containers"]), name


def test_ray_up_sets_token_auth_on_head_and_workers() -> None:
    cfg = _load(RAY_UP)
    setup = " ".join(cfg["setup_commands"])  # run on the head and on every worker
    assert "export RAY_AUTH_MODE=token" in setup
    assert "~/.ray/auth_token" in cfg["file_mounts"]
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        starts = [c for c in cfg[key] if "ray start" in c]
        assert starts, key
        assert all("RAY_AUTH_MODE=token" in c for c in starts), key
    mlflow = [c for c in cfg["head_start_ray_commands"] if "mlflow server" in c]
    assert mlflow and "MLFLOW_HOST=127.0.0.1" in mlflow[0]


def test_ray_up_matches_rays_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    spec = importlib.util.find_spec("ray")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("ray is not installed")
    schema = Path(next(iter(spec.submodule_search_locations))) / "autoscaler" / "ray-schema.json"
    if not schema.is_file():
        pytest.skip("this Ray has no cluster config schema")
    jsonschema.validate(_load(RAY_UP), json.loads(schema.read_text()))


def test_slurm_script_sets_token_auth() -> None:
    text = SLURM.read_text()
    assert re.search(r"^export RAY_AUTH_MODE=token$", text, re.M)
    assert "umask 077" in text
    assert re.search(r"^export RAY_AUTH_TOKEN_PATH=", text, re.M)


# --- every `nas sweep` command shown is one nas sweep accepts -----------------------------


def test_every_file_shows_a_sweep_command() -> None:
    found = {name for name, text in _sources() if _commands(text)}
    assert found >= {"ray-cluster.yaml", "rayjob.yaml", "slurm.sh", "README.md"}


@pytest.mark.parametrize("name,text", _sources(), ids=[n for n, _ in _sources()])
def test_sweep_commands_use_only_accepted_options(name: str, text: str) -> None:
    for args in _commands(text):
        _check_sweep_args(name, args)


def test_slurm_usage_line_passes_sweep_options() -> None:
    """`sbatch deploy/slurm.sh ARGS` hands ARGS to `nas sweep`, which gets --address from the
    script."""
    lines = re.findall(r"^#\s+sbatch deploy/slurm\.sh (.+)$", SLURM.read_text(), re.M)
    assert lines
    for line in lines:
        _check_sweep_args("slurm.sh usage", [*shlex.split(line), "--address", "h:6379"])


def test_extraction_handles_quotes_operators_and_continuations() -> None:
    text = (
        "ray exec c.yaml 'nas sweep quick --address auto --concurrency 2' --tmux\n"
        'nas sweep "$@" --address "$head_ip:6379" || status=$?\n'
        "# nas sweep quick --address auto \\\n#   --storage-path ${X}/r\n"
        "prose about `nas sweep` and nas sweep.\n"
    )
    assert _commands(text) == [
        ["quick", "--address", "auto", "--concurrency", "2"],
        ["quick", "--address", f"{PLACEHOLDER}:6379"],
        ["quick", "--address", "auto", "--storage-path", f"{PLACEHOLDER}/r"],
    ]
    with pytest.raises(pytest.fail.Exception):
        _check_sweep_args("bad", ["quick", "--address", "auto", "--no-such-option"])
