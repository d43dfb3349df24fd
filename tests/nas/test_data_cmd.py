"""``nas data prepare`` and training on what it wrote: every bad input is one line on stderr,
exit status 2, and nothing is left half-written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from nas.cli import main


def _docs(folder: Path, n: int = 30) -> Path:
    folder.mkdir()
    for i in range(n):
        (folder / f"d{i}.txt").write_text(f"document {i}: some words, and some more words {i}\n")
    return folder


def _one_line_exit_2(argv: list[str], match: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and match in err and "Traceback" not in err, err


def _prepare(src: Path, out: Path, *more: str) -> list[str]:
    return ["data", "prepare", str(src), "--out", str(out), "--no-progress", *more]


@pytest.mark.parametrize(
    "make,more,match",
    [
        (lambda d: d.mkdir(), ["--vocab-size", "300"], "holds no .txt"),
        (lambda d: None, ["--vocab-size", "300"], "does not exist"),
        (
            lambda d: (d.mkdir(), (d / "a.jsonl").write_text('{"text": "a"}\n{"body": "b"}\n')),
            ["--vocab-size", "300"],
            "a.jsonl:2: no 'text' field",
        ),
        (
            lambda d: (d.mkdir(), (d / "a.jsonl").write_text("{not json\n")),
            ["--vocab-size", "300"],
            "a.jsonl:1: not JSON",
        ),
        (lambda d: _docs(d), ["--vocab-size", "100"], "--vocab-size: 100"),
        (lambda d: _docs(d), [], "one of the arguments"),
        (lambda d: _docs(d, 1), ["--vocab-size", "300"], "no document fell in the"),
        (lambda d: _docs(d), ["--tokenizer", "/no/such.json"], "--tokenizer"),
    ],
    ids=[
        "empty folder",
        "missing",
        "no text field",
        "not json",
        "small vocab",
        "no tokenizer",
        "one document",
        "no tokenizer file",
    ],
)
def test_prepare_bad_input(
    make: Callable[[Path], object],
    more: list[str],
    match: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An empty folder, a missing source, a record without 'text', bad JSON, a vocabulary too
    small, no tokenizer, a corpus too small to split: one line, exit 2, nothing written."""
    src = tmp_path / "src"
    make(src)
    before = set(tmp_path.iterdir())
    _one_line_exit_2(_prepare(src, tmp_path / "out", *more), match, capsys)
    assert set(tmp_path.iterdir()) == before


def test_prepare_refuses_a_folder_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--out naming a folder that holds anything is refused, untouched."""
    src, out = _docs(tmp_path / "src"), tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    _one_line_exit_2(_prepare(src, out, "--vocab-size", "300"), "--out", capsys)
    assert [p.name for p in out.iterdir()] == ["keep"]


@pytest.fixture
def prepared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "corpus"
    assert (
        main(_prepare(_docs(tmp_path / "src"), out, "--vocab-size", "300", "--val-fraction", "0.3"))
        == 0
    )
    assert "manifest" in capsys.readouterr().out
    return out


def _train(corpus: Path, out: Path) -> list[str]:
    sets = ["data.source=shards", f"data.path={corpus}", "model.seq_len=8", "model.vocab_size=300"]
    return ["train", *(a for s in sets for a in ("--set", s)), "--out", str(out)]


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "missing", "manifest"])
def test_training_on_a_damaged_corpus(
    prepared: Path, damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated shard, a corrupt header, a missing shard or no manifest: nas train says so
    in one line, exit 2, before any output folder exists."""
    shard = prepared / "train_000000.bin"
    if damage == "truncated":
        shard.write_bytes(shard.read_bytes()[:-7])
    elif damage == "corrupt":
        shard.write_bytes(b"\xff" * 8 + shard.read_bytes()[8:])
    elif damage == "missing":
        shard.unlink()
    else:
        (prepared / "manifest.json").unlink()
    match = {
        "truncated": "truncated",
        "corrupt": "is not a shard",
        "missing": "train_000000.bin",
        "manifest": "no manifest.json",
    }[damage]
    out = tmp_path / "run"
    _one_line_exit_2(_train(prepared, out), match, capsys)
    assert not out.exists()


def test_a_sweep_over_a_corpus_prepared_again_is_refused(prepared: Path, tmp_path: Path) -> None:
    """A sweep's recorded trials name the manifest they trained on: continuing the sweep after
    the folder was prepared again is a changed plan (refused), not a mix of two corpora."""
    from nas.plan_check import conflicts
    from nas.sweep_plan import SweepOptions, plan
    from nas.tracking import RecordedTrial, StoredSweep, SweepRecord
    from record.schema import Status
    from trainers.config import flatten
    from trainers.corpus.manifest import manifest_hash

    sets = ("data.source=shards", f"data.path={prepared}", "model.vocab_size=300")
    p = plan(SweepOptions(space="smoke", storage_path=str(tmp_path / "ray"), overrides=sets))
    now = manifest_hash(prepared)
    assert {s.config.data.manifest for s in p.specs} == {now}

    def recorded(manifest: str) -> StoredSweep:
        trials = {
            s.key: RecordedTrial(
                s.key,
                s.key,
                s.arm,
                s.seed,
                Status.FINISHED,
                "FINISHED",
                "",
                {k: str(v) for k, v in {**flatten(s.config), "data.manifest": manifest}.items()},
                {},
            )
            for s in p.specs
        }
        base = {k: str(v) for k, v in flatten(p.base).items()}
        return StoredSweep(SweepRecord("sqlite:///nowhere", "1", "p", "smoke"), base, trials)

    assert conflicts(recorded(now), flatten(p.base), p.specs) == ""
    refused = conflicts(recorded("0123456789abcdef"), flatten(p.base), p.specs)
    assert f"data.manifest: 0123456789abcdef -> {now}" in refused
