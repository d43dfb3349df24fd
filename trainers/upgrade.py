"""A checkpoint as any version of the harness wrote it, brought to the current shape in one step
at load (``record.upgrade`` does the same for a run's MLflow record): ``upgrade_checkpoint``
applies the chain of small pure steps from the checkpoint's version (``VERSION_KEY``, which
``trainers.training.module`` writes into every Lightning checkpoint; none: version 1) to
``CHECKPOINT_VERSION``; ``upgrade_state_dict`` does the weights' part for a plain state dict
(``nas train``'s ``model.pt``, which has no room for a version). They are applied where
checkpoints are loaded: ``trainers.training.resume.current`` (every resume, on the file before
the fit reads it, so a sharded strategy that loads the weights before the module's hook finds
them renamed too), ``LanguageModelModule.on_load_checkpoint`` (a checkpoint handed to Lightning
another way) and ``nas generate``'s loader; the model and the
training loop then see only the current names.

Checkpoint versions:

- **1** (no ``VERSION_KEY``). The loops may count the optimizer steps in Lightning's automatic
  loop (written before the module took its steps by hand); AttnRes's plain path may hold its
  mixing parameters nested (``stream.sites.score.queries``, ``...score.keys.
  key_norm_weights``: before one parameter layout per model, issue 24); and the
  hyperparameters may hold a model field the configuration does not read at the value its
  sweep gave it (before such fields took their default: ``trainers.identity``), which a
  ``ModelConfig`` now refuses for some fields.
- **2**: the manual loop's step count, the flat names (``stream.sites.queries``), every unread
  model field at its default (``trainers.identity.normalized``'s form: the same model). Its
  hyperparameters hold ``train.compile`` as a bool.
- **3**: ``train.compile`` is one of 'auto', 'true', 'false' (issue 47 added 'auto').

Torch-free: the steps move entries between dicts and never touch a tensor.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from trainers.config import MODEL_DEFAULTS
from trainers.identity import unread_fields

CHECKPOINT_VERSION = 3
VERSION_KEY = "nas_checkpoint_version"  # a top-level entry of a Lightning checkpoint
FIRST_VERSION = 1  # a checkpoint without VERSION_KEY

_EPOCH = "epoch_loop"  # the fit loop's training epoch, as Lightning names it in a checkpoint
_AUTO = f"{_EPOCH}.automatic_optimization.optim_progress"
_MANUAL = f"{_EPOCH}.manual_optimization.optim_step_progress"
# The nested names AttnRes's plain path wrote before issue 24 -> the flat name now: the site
# parameters under ``score.`` and the key-norm gains under ``score.keys.``.
_SITES = "stream.sites."
_NESTED = {
    "score.queries": "queries",
    "score.query_proj": "query_proj",
    "score.source_logits": "source_logits",
    "score.keys.key_norm_weights": "key_norm_weights",
}


def checkpoint_version(checkpoint: Mapping[str, Any]) -> int:
    """The version a checkpoint was written with (``FIRST_VERSION`` where it names none);
    ValueError, one line, for one that names no version this harness wrote."""
    found = checkpoint.get(VERSION_KEY, FIRST_VERSION)
    if not isinstance(found, int) or isinstance(found, bool) or found < FIRST_VERSION:
        raise ValueError(f"{VERSION_KEY} {found!r}: not a checkpoint version")
    return found


def upgrade_state_dict(state: Mapping[str, Any]) -> dict[str, Any]:
    """A model's state dict with version 1's nested AttnRes names flat, under any prefix
    (``model.`` in a Lightning checkpoint); every other entry as it is (a name the old layout
    never wrote stays, to be refused under its own name)."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        head, sites, rest = key.rpartition(_SITES)
        flat = _NESTED.get(rest) if sites else None
        out[f"{head}{sites}{flat}" if flat else key] = value
    return out


def _manual_steps(loops: Mapping[str, Any]) -> dict[str, Any]:
    """The fit loop's state with the automatic loop's optimizer-step count carried over to the
    manual loop's, which ``global_step`` reads now (else a resumed trial would start again at
    step 0 and record its steps twice); as it is where the manual loop counts already."""
    fit = dict(loops.get("fit_loop", {}))
    auto = fit.get(_AUTO)
    if auto and not fit.get(_MANUAL, {}).get("total", {}).get("completed"):
        fit[_MANUAL] = copy.deepcopy(auto["optimizer"]["step"])
    return {**loops, "fit_loop": fit} if "fit_loop" in loops else dict(loops)


def _read_fields_only(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters (dotted names) with every model field the configuration does not
    read at its default, as the current harness records the same model; a field newer than the
    checkpoint stays absent (``from_dict`` lays the rest over the defaults)."""
    prefix = "model."
    model = {
        **MODEL_DEFAULTS,
        **{k[len(prefix) :]: v for k, v in hparams.items() if k.startswith(prefix)},
    }
    out = dict(hparams)
    for name in unread_fields(model):
        if f"{prefix}{name}" in out:
            out[f"{prefix}{name}"] = MODEL_DEFAULTS[name]
    return out


def _v1_to_v2(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(checkpoint)
    if "hyper_parameters" in out:
        out["hyper_parameters"] = _read_fields_only(out["hyper_parameters"])
    if "loops" in out:
        out["loops"] = _manual_steps(out["loops"])
    if "state_dict" in out:
        out["state_dict"] = upgrade_state_dict(out["state_dict"])
    return out


def _v2_to_v3(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """``train.compile`` as the word the bool meant: what it ran, not 'auto'."""
    out = dict(checkpoint)
    hparams = out.get("hyper_parameters")
    if hparams is not None and isinstance(hparams.get(_COMPILE), bool):
        out["hyper_parameters"] = {**hparams, _COMPILE: "true" if hparams[_COMPILE] else "false"}
    return out


_COMPILE = "train.compile"
# version N -> the step from N to N + 1; one entry per version below CHECKPOINT_VERSION
STEPS: dict[int, Callable[[Mapping[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def upgrade_checkpoint(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """A Lightning checkpoint (its dict) in the current shape, marked with
    ``CHECKPOINT_VERSION``; a current or newer one as it is (a shallow copy)."""
    version = checkpoint_version(checkpoint)
    out = dict(checkpoint)
    while version < CHECKPOINT_VERSION:
        out = STEPS[version](out)
        version += 1
    if checkpoint_version(out) < CHECKPOINT_VERSION:
        out[VERSION_KEY] = CHECKPOINT_VERSION
    return out
