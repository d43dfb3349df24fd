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
    from nas.campaign.plan_check import conflicts
    from nas.store.tracking import RecordedTrial, StoredSweep, SweepRecord
    from nas.sweep.plan import SweepOptions, plan
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


TINY = [
    "model.d_model=32",
    "model.n_heads=2",
    "model.n_layers=2",
    "model.seq_len=8",
    "train.batch_size=4",
    "train.max_steps=3",
    "train.val_every=3",
    "train.val_batches=1",
    "train.warmup_steps=1",
]


def _sets(*pairs: str) -> list[str]:
    return [a for s in pairs for a in ("--set", s)]


def test_train_takes_the_vocabulary_from_the_corpus(
    prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nas train` on shards with model.vocab_size unset trains with the manifest's
    vocabulary and records it: the resolved config, Lightning's hparams and the weights; its
    validation gives bits per byte from the corpus's token bytes."""
    import json

    import torch
    import yaml

    from trainers.config_io import build_config
    from trainers.corpus.manifest import read_manifest

    named = read_manifest(prepared).vocab_size
    out = tmp_path / "run"
    data = ("data.source=shards", f"data.path={prepared}")
    assert main(["train", *_sets(*data, *TINY), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "val/loss" in printed and "val/bpb" in printed
    assert json.loads((out / "result.json").read_text())["val_bpb"] > 0
    assert build_config(str(out / "config.yaml")).model.vocab_size == named
    assert yaml.safe_load((out / "hparams.yaml").read_text())["model.vocab_size"] == named
    weights = torch.load(out / "model.pt", weights_only=True)
    assert weights["tok_emb.weight"].shape[0] == named


@pytest.mark.slow  # a sweep's record (no Ray): out of test-fast's budget, as its sweep was
def test_a_sweep_on_shards_records_the_manifest_hash(prepared: Path, tmp_path: Path) -> None:
    """A sweep on a prepared corpus (``tests.nas.sweeps.play``: the plan and the record as
    ``nas sweep`` makes them, without Ray): every trial's run records the corpus's manifest hash
    as its ``data.manifest`` param (what keeps trials on other data apart) and its source.
    (That a trial on shards trains and gives bits per byte: the `nas train` test above, and the
    real grid sweep of test_sweep.py logging every metric a trial's result holds.)"""
    from tests.nas import sweeps
    from trainers.corpus.manifest import manifest_hash

    sets = _sets("data.source=shards", f"data.path={prepared}")
    losses = {("standard", 0): 3.0, ("block_attnres", 0): 2.9}
    handed = sweeps.play(tmp_path, ["smoke", *sets], losses)
    assert {s.config.data.manifest for s in handed} == {manifest_hash(prepared)}
    runs, _ = sweeps.runs(tmp_path, "smoke")
    children = [r for r in runs if r.data.tags.get("nas.role") == "trial"]
    assert len(children) == 2
    for child in children:
        assert child.data.params["data.manifest"] == manifest_hash(prepared)
        assert child.data.params["data.source"] == "shards"


def _space(tmp_path: Path, corpus: Path, arms: str) -> str:
    """A space file over ``corpus`` whose base leaves model.vocab_size unset."""
    base = ", ".join(f"{k}: {v}" for k, v in (s.split("=") for s in TINY))
    path = tmp_path / "vocab.yaml"
    path.write_text(
        f"name: vocab\nbase: {{{base}, data.source: shards, data.path: '{corpus}'}}\n"
        f"seeds: [0, 1]\narms: {arms}\n"
    )
    return str(path)


def test_a_sweep_takes_the_vocabulary_from_the_corpus_once(
    prepared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep's base is resolved against its corpus before launch: the base the parent run
    records and every trial take the manifest's vocabulary (data given by --set, or by the
    space's base), and an arm that gives a larger one keeps it."""
    from nas.sweep.plan import SweepOptions, plan
    from trainers.config import flatten
    from trainers.corpus.manifest import read_manifest

    monkeypatch.chdir(tmp_path)
    named = read_manifest(prepared).vocab_size
    ray = str(tmp_path / "ray")
    sets = ("data.source=shards", f"data.path={prepared}")
    p = plan(SweepOptions(space="smoke", storage_path=ray, overrides=sets))
    assert flatten(p.base)["model.vocab_size"] == named
    assert {s.config.model.vocab_size for s in p.specs} == {named}
    arms = f"{{data: {{model.residual: standard}}, wide: {{model.vocab_size: {named + 64}}}}}"
    p = plan(SweepOptions(space=_space(tmp_path, prepared, arms), storage_path=ray))
    assert p.base.model.vocab_size == named
    by_arm = {(s.arm, s.config.model.vocab_size) for s in p.specs}
    assert by_arm == {("data", named), ("wide", named + 64)}


def test_a_given_vocabulary_too_small_is_refused(
    prepared: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A model.vocab_size given below the corpus's is refused in the same one line, exit 2,
    nothing written, by nas train and by a sweep's plan (given by --set, or by an arm)."""
    from nas.sweep.plan import SweepOptions, plan
    from trainers.corpus.manifest import read_manifest

    monkeypatch.chdir(tmp_path)
    named = read_manifest(prepared).vocab_size
    line = (
        f"model.vocab_size: 256 is too small for data.source 'shards', whose tokens need at "
        f"least {named}"
    )
    sets = ("data.source=shards", f"data.path={prepared}", "model.vocab_size=256")
    ray = tmp_path / "ray"
    with pytest.raises(ValueError) as refused:  # before `nas sweep` below could launch anything
        plan(SweepOptions(space="smoke", storage_path=str(ray), overrides=sets))
    assert str(refused.value) == line
    small = _space(tmp_path, prepared, "{data: {}, small: {model.vocab_size: 256}}")
    with pytest.raises(ValueError) as refused:
        plan(SweepOptions(space=small, storage_path=str(ray)))
    assert str(refused.value) == f"{line} (arm 'small')"
    out, store = tmp_path / "run", tmp_path / "mlflow.db"
    before = set(tmp_path.iterdir())
    _one_line_exit_2(["train", *_sets(*sets, *TINY), "--out", str(out)], line, capsys)
    uri = f"sqlite:///{store}"
    for space in ("smoke", small):
        argv = ["sweep", space, "--storage-path", str(ray), "--tracking-uri", uri]
        _one_line_exit_2([*argv, *(_sets(*sets) if space == "smoke" else [])], line, capsys)
    assert set(tmp_path.iterdir()) == before
