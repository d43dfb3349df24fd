"""``nas generate``: a trained trial's continuation of a prompt, to look at what it learned.

A trial is found by what it left on disk: a ``nas train`` output folder (``config.yaml`` and
``model.pt``) or its ``model.pt``, or a Lightning checkpoint (a sweep trial's ``last.ckpt``,
which carries its configuration as hyperparameters, or the checkpoint folder holding it); or by
a sweep trial's MLflow run id, whose newest checkpoint is found on the sweep's storage as a
resumed trial finds it (``nas.trial.checkpoints``). Every file loads with
``torch.load(..., weights_only=True)``. Text goes in and out as the trial's corpus tokenized
it (``trainers.corpus.codec``): UTF-8 bytes for the byte corpora (``stdlib``, ``text``), the
corpus's own tokenizer for ``shards`` (a prepared corpus's ``tokenizer.json``, or the tokenizer
file an adopted one recorded), nanoGPT's ``meta.pkl`` for ``tokens``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from nas.trial.checkpoints import CKPT_NAME
from record.uri import TRACKING_URI_HELP

MODEL_NAME, CONFIG_NAME = (
    "model.pt",
    "config.yaml",
)  # what nas train writes (trainers.training.outputs)
RUN_ID = re.compile(r"[0-9a-f]{32}")  # MLflow's run ids


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "generate",
        help="print a trained model's continuation of a prompt",
        description="Sample a continuation of --prompt from a trained model with its KV cache, "
        "tokenized as its corpus was: one byte a token for stdlib and text, the corpus's "
        "tokenizer.json for a prepared one (shards), the tokenizer file an adopted one recorded "
        "(llm.c's tokenizer .bin, nanoGPT's meta.pkl), a tokens folder's meta.pkl. Prints the "
        "prompt followed by the continuation.",
    )
    p.add_argument(
        "trial",
        metavar="RUN_OR_CHECKPOINT",
        help=f"a nas train output folder ({CONFIG_NAME} and {MODEL_NAME}), its {MODEL_NAME}, "
        f"a Lightning checkpoint (a sweep trial's {CKPT_NAME}, or the folder holding it), or a "
        "sweep trial's MLflow run id (its newest checkpoint on the sweep's storage)",
    )
    p.add_argument(
        "--tracking-uri",
        help=f"{TRACKING_URI_HELP}; the store of a run id",
    )
    prompt = p.add_mutually_exclusive_group(required=True)
    prompt.add_argument(
        "--prompt",
        help="the text to continue (UTF-8); through llm.c's tokenizer file, which holds no "
        "merges, it is read by greedy longest match, not GPT-2's BPE",
    )
    prompt.add_argument(
        "--prompt-ids",
        metavar="IDS",
        help="the prompt as token ids, comma-separated (464,3290): exactly the ids training saw",
    )
    p.add_argument("--tokens", type=int, required=True, help="how many tokens to sample")
    p.add_argument(
        "--temperature", type=float, default=1.0, help="softmax temperature; 0 is greedy (1.0)"
    )
    p.add_argument("--top-k", type=int, help="sample among the k likeliest tokens only (all)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (0)")
    p.add_argument("--device", default="cpu", help="torch device to run on (cpu)")
    p.set_defaults(run=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    _check_sampling(args)
    target = _trial_path(args.trial, args.tracking_uri)
    cfg, weights = load_trial(target)
    from trainers.corpus.codec import codec_of
    from trainers.model.decoding import check_length

    try:
        codec = codec_of(cfg.data)
    except ValueError as err:
        raise ValueError(f"{target}: {err}") from None
    prompt = (
        codec.encode(args.prompt)
        if args.prompt is not None
        else _prompt_ids(args.prompt_ids, cfg.model.vocab_size)
    )
    check_length(len(prompt), args.tokens, cfg.model.seq_len)
    ids = _continue(cfg, weights, prompt, args)
    sys.stdout.write(codec.decode(ids) + "\n")
    return 0


def _check_sampling(args: argparse.Namespace) -> None:
    """The sampling arguments, before anything loads."""
    if args.tokens < 1:
        raise ValueError(f"--tokens {args.tokens}: generate at least 1")
    if not args.temperature >= 0:  # NaN too
        raise ValueError(f"--temperature {args.temperature}: must be >= 0 (0 is greedy)")
    if args.top_k is not None and args.top_k < 1:
        raise ValueError(f"--top-k {args.top_k}: must be >= 1")
    if args.prompt is not None and not args.prompt:
        raise ValueError("--prompt is empty; give at least one character")


def _prompt_ids(text: str, vocab_size: int) -> list[int]:
    """``--prompt-ids``'s ids, each one the model has; ValueError, one line, otherwise."""
    words = [w for w in re.split(r"[,\s]+", text) if w]
    bad = next(
        (w for w in words if not (w.isascii() and w.isdigit()) or int(w) >= vocab_size), None
    )
    if bad is not None or not words:
        raise ValueError(
            f"--prompt-ids {text!r}: give token ids 0..{vocab_size - 1} (the model's "
            "vocabulary), comma-separated"
        )
    return [int(w) for w in words]


def _continue(cfg: Any, weights: dict[str, Any], prompt: list[int], args: Any) -> list[int]:
    """The prompt's ids and the ``args.tokens`` sampled after them."""
    import torch

    from trainers.model.decoding import generate
    from trainers.model.transformer import DeepTransformer

    device = torch.device(args.device)
    model = DeepTransformer(cfg.model)
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:  # the weights are not this configuration's model
        raise ValueError(
            f"{args.trial}: weights do not fit its configuration ({_line(err)})"
        ) from None
    model.to(device).eval()
    idx = torch.tensor([prompt], device=device)
    gen = torch.Generator(device=device).manual_seed(args.seed)
    out = generate(model, idx, args.tokens, args.temperature, args.top_k, gen)
    return [int(i) for i in out[0].tolist()]


def _trial_path(trial: str, tracking_uri: str | None) -> Path:
    """The path named, or, for what is no path but looks like an MLflow run id, that trial's
    newest checkpoint that loads."""
    if Path(trial).exists() or not RUN_ID.fullmatch(trial):
        return Path(trial)
    from record.uri import resolve_tracking_uri

    candidates = trial_checkpoints(resolve_tracking_uri(tracking_uri), trial)
    for path in candidates:
        try:
            _load(path)
        except ValueError:  # a kill can leave the newest truncated
            continue
        return path
    raise ValueError(
        f"run {trial}: none of its checkpoints loads ({', '.join(map(str, candidates))})"
    )


def trial_checkpoints(uri: str, run_id: str) -> list[Path]:
    """The sweep trial ``run_id``'s newest checkpoints, highest step first: its trial key on its
    parent's storage folder (the parent's sweep key); ValueError, one line, when there are none."""
    from nas.trial.checkpoints import latest_checkpoints
    from record.read import load_run
    from record.schema import Tag

    tags = load_run(uri, run_id, "nas generate").tags
    key, parent = tags.get(Tag.TRIAL_KEY), tags.get(Tag.PARENT)
    if not key or not parent:
        raise ValueError(f"run {run_id}: not a sweep trial; give a checkpoint or nas train folder")
    folder = Path(load_run(uri, parent, "nas generate").tags.get(Tag.SWEEP_KEY, ""))
    found = latest_checkpoints(folder).get(key, [])
    if not found:
        raise ValueError(
            f"run {run_id}: no checkpoint of its trial under {folder} (moved, or the trial never "
            "reached a validation)"
        )
    return found


def load_trial(target: Path) -> tuple[Any, dict[str, Any]]:
    """(the RunConfig, the model's state dict) of the trial at ``target``, in the current shape
    whatever version wrote it (``trainers.upgrade``); ValueError, one line, for anything that
    is not a trial this command can read."""
    from trainers.upgrade import upgrade_checkpoint, upgrade_state_dict

    path = _weights_file(target)
    state = _load(path)
    if isinstance(state, dict) and "state_dict" in state and "hyper_parameters" in state:
        cfg, weights = _from_lightning(path, upgrade_checkpoint(state))
    else:
        cfg = _from_train_folder(path)
        weights = upgrade_state_dict(state) if isinstance(state, dict) else state
    return cfg, weights


def _weights_file(target: Path) -> Path:
    if target.is_dir():
        found = [target / n for n in (MODEL_NAME, CKPT_NAME) if (target / n).is_file()]
        if not found:
            raise ValueError(
                f"{target}: holds neither {MODEL_NAME} (nas train) nor {CKPT_NAME} (a sweep "
                f"checkpoint)"
            )
        return found[0]
    if not target.is_file():
        raise ValueError(f"{target}: no such file or folder")
    return target


def _load(path: Path) -> Any:
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle, zip and OS errors alike: not a checkpoint
        raise ValueError(f"{path}: not a checkpoint torch can load ({_line(err)})") from None


def _from_lightning(path: Path, ckpt: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A Lightning checkpoint of ``trainers.training.module.LanguageModelModule``: the configuration
    its hyperparameters record (dotted names), the model's weights under ``model.``."""
    from trainers.config_io import from_dict, nest

    try:
        cfg = from_dict(nest(dict(ckpt["hyper_parameters"])))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{path}: its hyperparameters are no configuration ({err})") from None
    prefix = "model."
    weights = {k[len(prefix) :]: v for k, v in ckpt["state_dict"].items() if k.startswith(prefix)}
    return cfg, weights


def _from_train_folder(path: Path) -> Any:
    """The configuration ``nas train`` wrote beside the weights."""
    from trainers.config_io import build_config

    config = path.parent / CONFIG_NAME
    if not config.is_file():
        raise ValueError(f"{path}: no {CONFIG_NAME} beside it (nas train writes both)")
    return build_config(str(config))


def _line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
