"""``nas generate``: a continuation from a really trained tiny model, found by its ``nas train``
folder or its Lightning checkpoint, and one clear line for every bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import lightning as L
import pytest

from nas.cli import main
from trainers.config_io import from_dict
from trainers.training.outputs import save_run
from trainers.training.run import train

# Kept test data: a sweep trial's Lightning checkpoint written by the code of c297def
OLD_CHECKPOINT = Path(__file__).parents[1] / "trainers" / "data" / "attnres_old_layout.ckpt"

SEQ_LEN = 32


class SaveAtEnd(L.Callback):
    """The Lightning checkpoint a sweep trial leaves (``nas.trial.lightning_hooks.save_marked``)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        trainer.save_checkpoint(self.path, weights_only=False)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `nas train`-style output folder of a Block AttnRes model trained 6 steps on the
    default byte corpus, with a Lightning checkpoint of the same weights in it (last.ckpt)."""
    root = tmp_path_factory.mktemp("generate")
    cfg = from_dict(
        {
            "model": {
                "d_model": 32,
                "n_heads": 2,
                "n_layers": 2,
                "seq_len": SEQ_LEN,
                "residual": "block_attnres",
                "attnres_blocks": 3,
            },
            "train": {
                "batch_size": 4,
                "max_steps": 6,
                "val_every": 3,
                "val_batches": 1,
                "warmup_steps": 2,
                "diagnostics_every": 0,
                "accelerator": "cpu",
            },
            "data": {"max_bytes": 1_000_000, "cache_dir": str(root / "cache")},
        }
    )
    out = root / "run"
    ckpt = root / "checkpoint" / "last.ckpt"
    result, model = train(cfg, out, progress=False, callbacks=[SaveAtEnd(ckpt)])
    assert result.status == "finished"
    save_run(out, cfg, result, model)
    return root


def _generate(capsys: pytest.CaptureFixture[str], *words: str) -> tuple[int, str, str]:
    code = main(["generate", *words])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_generate_prints_the_prompt_and_its_continuation(
    trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the train folder: exit 0, the prompt then 20 bytes' text; the seed repeats it."""
    words = [str(trained / "run"), "--prompt", "def ", "--tokens", "20", "--top-k", "8"]
    code, out, err = _generate(capsys, *words, "--seed", "3")
    assert code == 0, err
    assert out.startswith("def ") and out.endswith("\n")
    assert len(out[len("def ") : -1].encode("utf-8", errors="surrogateescape")) >= 1
    assert _generate(capsys, *words, "--seed", "3")[1] == out


@pytest.mark.parametrize("which", ["run/model.pt", "checkpoint/last.ckpt", "checkpoint"])
def test_every_way_to_name_the_trial_gives_the_same_text(
    trained: Path, which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model.pt, the Lightning checkpoint and its folder hold the same trained weights:
    the same greedy continuation as the train folder's."""
    common = ["--prompt", "import ", "--tokens", "12", "--temperature", "0"]
    code, expected, err = _generate(capsys, str(trained / "run"), *common)
    assert code == 0, err
    code, out, err = _generate(capsys, str(trained / which), *common)
    assert code == 0, err
    assert out == expected


def test_a_sweep_trial_is_found_by_its_run_id(
    trained: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial's MLflow run id (a real SQLite store written as a sweep writes it) leads to its
    newest checkpoint that loads on its sweep's storage: the parent's sweep key, the trial key
    (a newer, truncated one passed over)."""
    from nas.store.tracking import TrialRun, open_sweep
    from nas.trial.checkpoints import write_mark
    from record.schema import Status

    folder = tmp_path / "storage" / "gen"
    for step in (6, 9):
        ckpt = folder / "tune-0001-abcd" / "trial_0" / f"checkpoint_{step:06d}"
        ckpt.mkdir(parents=True)
        shutil.copy(trained / "checkpoint" / "last.ckpt", ckpt / "last.ckpt")
        write_mark(ckpt, "k1", step)
    (ckpt / "last.ckpt").write_bytes(b"truncated")  # step 9's, as a kill leaves it
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    record = open_sweep(uri, "gen", str(folder), {}, {})
    trial = TrialRun(record, "k1", {}, {})
    trial.end(Status.FINISHED)
    common = ["--prompt", "class ", "--tokens", "10", "--temperature", "0"]
    code, expected, err = _generate(capsys, str(trained / "checkpoint"), *common)
    assert code == 0, err
    code, out, err = _generate(capsys, trial.run_id, "--tracking-uri", uri, *common)
    assert code == 0, err
    assert out == expected
    missing = "0" * 32
    code, out, err = _generate(capsys, missing, "--tracking-uri", uri, *common)
    assert code == 2 and "no such run" in err and err.count("\n") == 1


BAD = [
    (["missing-folder", "--prompt", "a", "--tokens", "3"], "no such file or folder"),
    (["run", "--prompt", "a", "--tokens", "0"], "--tokens 0"),
    (
        ["run", "--prompt", "x" * (SEQ_LEN + 1), "--tokens", "1"],
        "prompt's 33 tokens exceed model.seq_len=32",
    ),
    (["run", "--prompt", "x" * 30, "--tokens", "4"], "at most 3 new tokens"),
    (["run", "--prompt", "a", "--tokens", "3", "--temperature", "-1"], "--temperature"),
    (["run", "--prompt", "a", "--tokens", "3", "--top-k", "0"], "--top-k"),
    (["run", "--prompt", "", "--tokens", "3"], "--prompt is empty"),
    (["cache", "--prompt", "a", "--tokens", "3"], "holds neither"),
    (["run/config.yaml", "--prompt", "a", "--tokens", "3"], "not a checkpoint"),
]


@pytest.mark.parametrize(("words", "needle"), BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_one_line_and_exit_2(
    trained: Path, words: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bad input: exit 2, one line on stderr naming the problem, nothing on stdout."""
    code, out, err = _generate(capsys, str(trained / words[0]), *words[1:])
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and needle in err, err


def test_a_model_of_a_prepared_corpus_speaks_its_tokenizer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model trained on shards (a BPE of 300 ids) reads its prompt and writes its continuation
    through the corpus's own tokenizer: the prompt comes back whole, ids past the byte range
    included; once the corpus is prepared again, its tokenizer is no longer trusted (exit 2)."""
    from tests.corpus import VOCAB, prepared_corpus
    from trainers.corpus.codec import codec_of
    from trainers.corpus.manifest import pinned

    def document(i: int) -> str:
        return f"def f{i}(x):\n    return x + {i}\n"

    corpus = prepared_corpus(tmp_path, document)
    cfg = pinned(  # as nas train and a sweep build it: data.manifest filled in
        from_dict(
            {
                "model": {
                    "d_model": 16,
                    "n_heads": 2,
                    "n_layers": 1,
                    "seq_len": 16,
                    "vocab_size": VOCAB,
                },
                "train": {"batch_size": 4, "max_steps": 2, "val_every": 2, "val_batches": 1},
                "data": {"source": "shards", "path": str(corpus)},
            }
        )
    )
    run = tmp_path / "run"
    result, model = train(cfg, run, progress=False)
    save_run(run, cfg, result, model)
    prompt = "def f1(x):\n    return"
    assert max(codec_of(cfg.data).encode(prompt)) >= 257  # merges, not bytes
    words = [str(run), "--prompt", prompt, "--tokens", "5", "--temperature", "0"]
    code, out, err = _generate(capsys, *words)
    assert code == 0, err
    assert out.startswith(prompt) and len(out) > len(prompt) + 1
    shutil.rmtree(corpus)
    prepared_corpus(tmp_path, lambda i: "other text\n" if i == 0 else document(i))
    code, out, err = _generate(capsys, *words)
    assert code == 2 and out == "" and err.count("\n") == 1 and "data.manifest" in err, err


def test_a_checkpoint_from_before_reads_through_the_upgrade(tmp_path: Path) -> None:
    """c297def's Lightning checkpoint (nested AttnRes names), its sweep having given the trial
    a field it does not read (refused by a ModelConfig today): ``nas generate``'s loader reads
    the configuration it trained and weights that load strictly into its model."""
    import torch

    from nas.commands.generate import load_trial
    from trainers.config_io import nest
    from trainers.model.transformer import DeepTransformer

    old = torch.load(OLD_CHECKPOINT, weights_only=True)
    trained = from_dict(nest(dict(old["hyper_parameters"])))
    hparams = {**old["hyper_parameters"], "model.dense_period": 2}
    torch.save({**old, "hyper_parameters": hparams}, tmp_path / "last.ckpt")
    cfg, weights = load_trial(tmp_path / "last.ckpt")
    assert cfg == trained
    DeepTransformer(cfg.model).load_state_dict(weights)  # strict


# ---- an adopted corpus's own tokenizer file ------------------------------------------------------

# llm.c's tokenizer file of a handful of tokens: single bytes, longer pieces that greedy longest
# match prefers, 'é' as its two bytes apart (a byte-level table splits characters), and the
# end-of-text token spelled out as llm.c writes it.
LLMC_PIECES = [b"a", b"b", b"c", b" ", b"\n", b"ab", b"abc", b"\xc3", b"\xa9", b"<|endoftext|>"]
LLMC_EOT = 9
CHARS = "\n !abcé"  # a nanoGPT character-level vocabulary, 'é' two bytes in UTF-8


def _llmc_corpus(root: Path) -> Path:
    """llm.c shards (a train and a val file) and llm.c's tokenizer file, version 2."""
    import numpy as np

    from trainers.corpus.shard import HEADER_INTS, U16, write_shard

    folder = root / "llmc"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("tiny_train_000001.bin", "tiny_val_000000.bin"):
        write_shard(folder / name, rng.integers(0, len(LLMC_PIECES), size=200), U16)
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:4] = (20240328, 2, len(LLMC_PIECES), LLMC_EOT)
    body = b"".join(bytes([len(p)]) + p for p in LLMC_PIECES)
    (folder / "gpt2_tokenizer.bin").write_bytes(header.tobytes() + body)
    return folder


def _nanogpt_corpus(root: Path) -> Path:
    """nanoGPT's character-level layout: bare uint16 train.bin / val.bin, meta.pkl's tables."""
    import pickle

    import numpy as np

    folder = root / "chars"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for name in ("train.bin", "val.bin"):
        rng.integers(0, len(CHARS), size=200).astype(np.uint16).tofile(folder / name)
    itos = dict(enumerate(CHARS))
    meta = {"vocab_size": len(CHARS), "itos": itos, "stoi": {c: i for i, c in itos.items()}}
    (folder / "meta.pkl").write_bytes(pickle.dumps(meta))
    return folder


def _written_trial(root: Path, folder: Path, source: str, vocab: int) -> Path:
    """A `nas train`-style folder of a seeded, untrained model on ``folder``: the decoding is
    under test, not what the model learned."""
    import torch
    import yaml

    from trainers.config import to_dict
    from trainers.corpus.manifest import pinned
    from trainers.model.transformer import DeepTransformer

    model = {"d_model": 16, "n_heads": 2, "n_layers": 1, "seq_len": 24, "vocab_size": vocab}
    cfg = pinned(from_dict({"model": model, "data": {"source": source, "path": str(folder)}}))
    run = root / "run"
    run.mkdir()
    torch.manual_seed(0)
    torch.save(DeepTransformer(cfg.model).state_dict(), run / "model.pt")
    (run / "config.yaml").write_text(yaml.safe_dump(to_dict(cfg), sort_keys=False))
    return run


def _sampled_ids(run: Path, prompt: list[int], tokens: int, seed: int) -> list[int]:
    """The model's own continuation of ``prompt``'s ids, sampled as `nas generate --seed` samples
    (temperature 1, a CPU generator of that seed), read without any codec."""
    import torch

    from nas.commands.generate import load_trial
    from trainers.model.decoding import generate
    from trainers.model.transformer import DeepTransformer

    cfg, weights = load_trial(run)
    model = DeepTransformer(cfg.model)
    model.load_state_dict(weights)
    gen = torch.Generator().manual_seed(seed)
    out = generate(model.eval(), torch.tensor([prompt]), tokens, 1.0, None, gen)
    return [int(i) for i in out[0].tolist()]


# (the corpus, its source, its table as bytes, a prompt, its ids by greedy longest match by hand)
ADOPTED = {
    "llm.c": (_llmc_corpus, "shards", LLMC_PIECES, "abc ab é", [6, 3, 5, 3, 7, 8]),
    "nanoGPT": (
        _nanogpt_corpus,
        "shards",
        [c.encode() for c in CHARS],
        "cab é!",
        [5, 3, 4, 1, 6, 2],
    ),
    "tokens": (_nanogpt_corpus, "tokens", [c.encode() for c in CHARS], "a\nb", [3, 0, 4]),
}


@pytest.mark.parametrize("which", ADOPTED)
def test_a_model_of_an_adopted_corpus_speaks_its_tokenizer_file(
    tmp_path: Path, which: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tokenizer.json: an adopted corpus's llm.c tokenizer file or nanoGPT meta.pkl (and an
    unadopted nanoGPT 'tokens' folder's meta.pkl) encodes the prompt, by greedy longest match,
    and decodes the ids: the printed text is the table's pieces of the model's own sampled ids,
    joined by hand; --prompt-ids with those ids prints the same."""
    make, source, pieces, prompt, prompt_ids = ADOPTED[which]
    folder = make(tmp_path)
    if source == "shards":
        assert main(["data", "adopt", str(folder)]) == 0
    run = _written_trial(tmp_path, folder, source, len(pieces))
    ids = _sampled_ids(run, prompt_ids, 12, seed=4)
    expected = b"".join(pieces[i] for i in ids).decode("utf-8", errors="replace") + "\n"
    capsys.readouterr()
    common = ["--tokens", "12", "--seed", "4"]
    code, out, err = _generate(capsys, str(run), "--prompt", prompt, *common)
    assert code == 0, err
    assert out == expected and out.startswith(prompt)
    ids_text = ",".join(map(str, prompt_ids))
    assert _generate(capsys, str(run), "--prompt-ids", ids_text, *common) == (0, expected, "")


def test_a_token_table_joins_bytes_across_tokens(tmp_path: Path) -> None:
    """llm.c's table decodes by joining each id's bytes: 'é' split over two tokens comes back
    whole, the end-of-text token reads as its text, a lone half of a character and an id past
    the table read U+FFFD."""
    from trainers.config import DataConfig
    from trainers.corpus.codec import codec_of

    folder = _llmc_corpus(tmp_path)
    assert main(["data", "adopt", str(folder)]) == 0
    codec = codec_of(DataConfig(source="shards", path=str(folder)))
    assert codec.decode([6, 3, 7, 8, LLMC_EOT]) == "abc é<|endoftext|>"
    assert codec.decode([0, 7, 1, len(LLMC_PIECES)]) == "a\ufffdb\ufffd"
    assert codec.encode("cabcab<|endoftext|>") == [2, 6, 5, LLMC_EOT]


def _no_tokenizer(folder: Path) -> None:
    (folder / "gpt2_tokenizer.bin").unlink()


def _byte_counts_only(folder: Path) -> None:
    import torch

    (folder / "gpt2_tokenizer.bin").unlink()
    torch.save(torch.tensor([len(p) for p in LLMC_PIECES]), folder / "token_bytes.pt")


REFUSED = [
    (_no_tokenizer, [], "records no tokenizer, nothing that decodes its ids"),
    (_byte_counts_only, [], "records only token byte counts"),
    (None, ["--prompt", "abcd"], "'d' is no token of"),
    (None, ["--prompt-ids", "1,10"], "--prompt-ids '1,10': give token ids 0..9"),
    (None, ["--prompt-ids", "x"], "--prompt-ids 'x'"),
]


@pytest.mark.parametrize(("before", "words", "needle"), REFUSED, ids=[r[2][:24] for r in REFUSED])
def test_what_no_tokenizer_file_reads_is_one_line_and_exit_2(
    tmp_path: Path,
    before: object,
    words: list[str],
    needle: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An adopted corpus with no tokenizer, or only nanochat's byte counts, says what it reads;
    a prompt character the table lacks and ids the model lacks are named."""
    folder = _llmc_corpus(tmp_path)
    if before is not None:
        before(folder)  # type: ignore[operator]
    assert main(["data", "adopt", str(folder)]) == 0
    run = _written_trial(tmp_path, folder, "shards", len(LLMC_PIECES))
    capsys.readouterr()
    code, out, err = _generate(capsys, str(run), *(words or ["--prompt", "ab"]), "--tokens", "2")
    assert code == 2 and out == "" and err.count("\n") == 1 and needle in err, err


def test_a_tokenizer_file_changed_since_adoption_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The manifest records the tokenizer file's SHA-256: rewritten afterwards (one piece
    changed, the same size), its ids may read as other text, so it is refused in one line."""
    folder = _llmc_corpus(tmp_path)
    assert main(["data", "adopt", str(folder)]) == 0
    run = _written_trial(tmp_path, folder, "shards", len(LLMC_PIECES))
    path = folder / "gpt2_tokenizer.bin"
    path.write_bytes(path.read_bytes().replace(b"abc", b"abd"))
    capsys.readouterr()
    code, out, err = _generate(capsys, str(run), "--prompt", "ab", "--tokens", "2")
    assert code == 2 and out == "" and err.count("\n") == 1 and "changed since" in err, err


def test_a_meta_pkl_that_names_code_is_refused_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """meta.pkl is a pickle: one that names a function (here ``open``, which creates a file when
    called) is refused in one line, and the function never runs."""
    import pickle

    folder = _nanogpt_corpus(tmp_path)
    run = _written_trial(tmp_path, folder, "tokens", len(CHARS))
    planted = tmp_path / "ran"

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str, str]]:
            return (open, (str(planted), "w"))

    (folder / "meta.pkl").write_bytes(pickle.dumps({"itos": Payload()}))
    capsys.readouterr()
    code, out, err = _generate(capsys, str(run), "--prompt", "ab", "--tokens", "2")
    assert code == 2 and out == "" and err.count("\n") == 1 and "meta.pkl" in err, err
    assert not planted.exists()
