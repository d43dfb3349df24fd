"""``nas data prepare``: tokenize a folder of documents into the shards ``data.source=shards``
trains on; ``nas data adopt``: make a folder of tokens another project wrote (llm.c,
modded-nanogpt, nanoGPT) such a corpus in place (``trainers.corpus``; docs/data.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "data",
        help="prepare a corpus of your own for data.source=shards",
        description="Work on corpora of your own.",
    )
    actions = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    prep = actions.add_parser(
        "prepare",
        help="tokenize documents into token shards, token_bytes and a manifest",
        description="Read SOURCE (a file, or a folder of .txt, .jsonl / .jsonl.zst with a 'text' "
        "field, or .parquet with a 'text' column), split documents into train and validation by "
        "a hash of their text, train a byte-level BPE (--vocab-size) or use --tokenizer, and "
        "write llm.c / modded-nanogpt token shards, token_bytes.npy, tokenizer.json and "
        "manifest.json into --out. Train on it with --set data.source=shards --set data.path=DIR.",
    )
    prep.add_argument("source", metavar="SOURCE", type=Path, help="a file or folder of documents")
    prep.add_argument("--out", required=True, type=Path, metavar="DIR", help="a new folder")
    how = prep.add_mutually_exclusive_group(required=True)
    how.add_argument("--vocab-size", type=int, metavar="N", help="train a byte-level BPE of N ids")
    how.add_argument("--tokenizer", type=Path, metavar="FILE", help="a Hugging Face tokenizer.json")
    prep.add_argument(
        "--separator",
        default="<|endoftext|>",
        help="the special token written before each document (default: %(default)s)",
    )
    prep.add_argument(
        "--val-fraction",
        type=float,
        default=0.01,
        help="share of documents held out for validation, by hash (default: %(default)s)",
    )
    prep.add_argument(
        "--shard-tokens",
        type=int,
        default=100_000_000,
        help="tokens per shard file (default: %(default)s)",
    )
    prep.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    prep.set_defaults(run=run_prepare)
    adopt = actions.add_parser(
        "adopt",
        help="train on a folder of llm.c / modded-nanogpt shards or nanoGPT's train.bin/val.bin",
        description="Write manifest.json (and token_bytes.npy, where the tokenizer is known) "
        "beside FOLDER's token files, copying none: llm.c / modded-nanogpt shards (*.bin, "
        "headers 20240520 and 20240801, their split in their names) or nanoGPT's train.bin and "
        "val.bin. Bits per byte needs the bytes of each token: from an llm.c tokenizer .bin, "
        "nanoGPT's meta.pkl, a tokenizer.json or nanochat's token_bytes.pt, found in FOLDER or "
        "named by --tokenizer. Train on it with --set data.source=shards --set data.path=FOLDER.",
    )
    adopt.add_argument("folder", metavar="FOLDER", type=Path, help="the folder of token files")
    adopt.add_argument(
        "--tokenizer",
        type=Path,
        metavar="FILE",
        help="where each token's bytes are read from (default: the one tokenizer file in FOLDER)",
    )
    adopt.set_defaults(run=run_adopt)


def run_prepare(args: argparse.Namespace) -> int:
    from trainers.corpus.prepare import PrepareConfig, prepare

    cfg = PrepareConfig(
        source=args.source.expanduser(),
        out=args.out.expanduser(),
        vocab_size=args.vocab_size,
        tokenizer=args.tokenizer,
        separator=args.separator,
        val_fraction=args.val_fraction,
        shard_tokens=args.shard_tokens,
        progress=not args.no_progress,
    )
    digest = prepare(cfg)
    print(f"{cfg.out}: manifest {digest}")
    return 0


def run_adopt(args: argparse.Namespace) -> int:
    from trainers.corpus.adopt import adopt
    from trainers.corpus.manifest import read_manifest

    folder = args.folder.expanduser()
    digest = adopt(folder, args.tokenizer.expanduser() if args.tokenizer else None)
    m = read_manifest(folder)
    splits = m.raw["splits"]
    bpb = (
        f"{m.val_bytes_per_token:.3f} bytes per validation token (bits per byte reported)"
        if m.val_bytes_per_token is not None
        else "tokenizer unknown: the loss is reported, not bits per byte"
    )
    print(
        f"{folder}: manifest {digest}; {m.raw['adopted']['layout']} layout, "
        f"{splits['train']['tokens']:,} train and {splits['val']['tokens']:,} validation tokens, "
        f"vocabulary {m.vocab_size:,}; {bpb}"
    )
    return 0
