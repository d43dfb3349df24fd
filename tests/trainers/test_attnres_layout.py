"""One parameter layout per AttnRes model: the same names whichever code path runs it (the fast
two-phase path, the plain path of the Table 4 switches, Full or Block AttnRes's sites), and
checkpoints written with the old nested names of the plain path still load (through the one
upgrade step at load, ``trainers.upgrade``) and resume."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import lightning as L
import pytest
import torch

from tests.trainers.attnres_cases import CASES, RESIDUALS, SWITCHES, randomize_mixing
from tests.trainers.conftest import tiny
from tests.trainers.data.make_attnres_old_layout import BASE, CELLS, IDX, RESUMED
from trainers.config import ModelConfig
from trainers.config_io import from_dict
from trainers.model.transformer import DeepTransformer
from trainers.training.module import param_groups
from trainers.training.run import train
from trainers.upgrade import upgrade_state_dict

DATA = Path(__file__).parent / "data"
# Float64 through a few blocks of O(1)-conditioned operations: reordered sums (the two-phase
# online softmax against the direct one) move the logits by some 1e-15; a dropped or misplaced
# source moves them by far more than 1e-3 (checked below where it matters).
ATOL = 1e-12


def _shapes(model: torch.nn.Module) -> dict[str, torch.Size]:
    return {name: t.shape for name, t in model.state_dict().items()}


def _perturbed(cfg: ModelConfig) -> DeepTransformer:
    """A float64 model with every mixing parameter random (non-zero queries, gains off one)."""
    torch.manual_seed(0)
    model = DeepTransformer(cfg).double().eval()
    randomize_mixing(model)
    return model


def _loaded(cfg: ModelConfig, state: dict[str, torch.Tensor]) -> DeepTransformer:
    model = DeepTransformer(cfg).double().eval()
    model.load_state_dict(state)  # strict
    return model


def _logits(model: DeepTransformer) -> torch.Tensor:
    torch.manual_seed(1)
    with torch.no_grad():
        return model(torch.randint(0, 32, (2, 12)))


# The most sources a site mixes: Full, the embedding and all 2L outputs (the output site); Block,
# the embedding and N block summaries. A window keeps the embedding and the W newest, so
# W = most - 1 keeps them all (exactly Full), and W = most - 2 drops one at the output site.
def _covering_window(cfg: ModelConfig) -> int:
    most = cfg.n_sublayers + 1 if cfg.residual == "attnres" else cfg.attnres_blocks + 1
    return most - 1


@pytest.mark.parametrize("residual", RESIDUALS)
def test_default_state_dict_loads_strictly_into_the_covering_window(residual: str) -> None:
    """The paper's model and the same model with a window covering every source (both on the
    buffered path; the plain path's twin is held to it in test_attnres_buffered_switches.py)
    have one state dict: it loads strictly either way and gives the same logits; one source
    fewer is another model (so the comparison can fail)."""
    cfg = tiny(residual=residual, n_layers=3, attnres_blocks=3)
    default = _perturbed(cfg)
    assert default.stream.fast
    logits = _logits(default)
    for window in (_covering_window(cfg), _covering_window(cfg) + 1, 100):
        windowed = _loaded(dataclasses.replace(cfg, attnres_window=window), default.state_dict())
        assert windowed.stream.fast and _shapes(windowed) == _shapes(default)
        torch.testing.assert_close(_logits(windowed), logits, rtol=0, atol=ATOL)
        _loaded(cfg, windowed.state_dict())  # and back, strict
    short = dataclasses.replace(cfg, attnres_window=_covering_window(cfg) - 1)
    assert (_logits(_loaded(short, default.state_dict())) - logits).abs().max() > 1e-3


# Each switch cell's mixing parameters, flat under stream.sites.
SITE_PARAMETERS = {
    "key_norm=none": {"queries"},
    "gate=sigmoid": {"queries", "key_norm_weights"},
    "query=input": {"query_proj", "key_norm_weights"},
    "query=scalar": {"source_logits"},
    "heads=4": {"queries", "key_norm_weights"},
    "window=2": {"queries", "key_norm_weights"},
    "combined": {"query_proj"},
    "sources=deltas": {"queries", "key_norm_weights"},
    "sources=cumulative": {"queries", "key_norm_weights"},
    "deltas+combined": {"query_proj"},
}


@pytest.mark.parametrize("residual,switch", CASES)
def test_switch_cells_name_their_parameters_flat_and_stably(residual: str, switch: str) -> None:
    """Every cell holds the standard model's parameters plus its own mixing ones, flat under
    ``stream.sites.`` with the names of the table above, on Full and Block AttnRes alike."""
    cfg = tiny(residual=residual, **SWITCHES[switch])
    names = set(DeepTransformer(cfg).state_dict())
    standard = set(DeepTransformer(tiny()).state_dict())
    assert names - standard == {f"stream.sites.{n}" for n in SITE_PARAMETERS[switch]}
    assert standard <= names


@pytest.mark.parametrize("switch", ["default", *SWITCHES])
def test_block_with_one_sublayer_per_block_is_full_under_every_switch(switch: str) -> None:
    """Block AttnRes with N = 2L (a block per sublayer) is Full AttnRes whatever the switches:
    Full's state dict loads strictly into it and gives the same logits."""
    switches = SWITCHES.get(switch, {})
    full = _perturbed(tiny(residual="attnres", n_layers=3, **switches))
    block_cfg = tiny(residual="block_attnres", n_layers=3, attnres_blocks=6, **switches)
    block = _loaded(block_cfg, full.state_dict())
    assert block.stream.fast == full.stream.fast
    torch.testing.assert_close(_logits(block), _logits(full), rtol=0, atol=ATOL)


@pytest.mark.parametrize("residual,switch", [(r, "default") for r in RESIDUALS] + CASES)
def test_no_weight_decay_on_exactly_the_vectors_and_the_mixing(residual: str, switch: str) -> None:
    """The optimizer's undecayed group is exactly the norms, biases and every depth-mixing
    parameter; every other matrix is decayed (as before the layout change)."""
    cfg = tiny(residual=residual, norm="layernorm", bias=True, **SWITCHES.get(switch, {}))
    model = DeepTransformer(cfg)
    undecayed = {id(p) for p in param_groups(model, 0.1)[1]["params"]}
    for name, p in model.named_parameters():
        vector = name.endswith(".bias") or "norm" in name or name.startswith("stream.sites.")
        assert (id(p) in undecayed) == vector, name


def _old_cells() -> dict[str, dict[str, Any]]:
    cells: dict[str, dict[str, Any]] = torch.load(DATA / "attnres_old_layout.pt", weights_only=True)
    return cells


@pytest.mark.parametrize("cell", list(CELLS))
def test_old_layout_state_dict_loads_strictly_with_the_old_logits(cell: str) -> None:
    """A plain state dict (as ``model.pt`` holds) written by the code before the change, in its
    nested names (``stream.sites.score.*``, ``...score.keys.*``), upgraded as ``nas generate``
    loads it, loads strictly and computes the logits that code computed (float64, the same
    formula); the model itself knows only the current names."""
    stored = _old_cells()[cell]
    old_names = [k for k in stored["state"] if k.startswith("stream.sites.")]
    assert old_names and all(k.startswith("stream.sites.score.") for k in old_names)
    cfg = ModelConfig(**BASE, **CELLS[cell])
    with pytest.raises(RuntimeError, match=r"stream\.sites\.score\."):
        _loaded(cfg, stored["state"])
    model = _loaded(cfg, upgrade_state_dict(stored["state"]))
    with torch.no_grad():
        torch.testing.assert_close(model(IDX), stored["logits"], rtol=0, atol=ATOL)


def test_a_name_that_is_no_parameter_is_still_refused() -> None:
    """The old names are mapped only onto parameters the model has: a nested name that maps to
    nothing stays unexpected under its own name."""
    model = DeepTransformer(tiny(residual="attnres", attnres_window=1))
    state = {**model.state_dict(), "stream.sites.score.bogus": torch.zeros(1)}
    with pytest.raises(RuntimeError, match=r"stream\.sites\.score\.bogus"):
        model.load_state_dict(upgrade_state_dict(state))


class _AtStart(L.Callback):
    """What the resumed run starts from: its weights and AdamW's first moments, by name."""

    weights: dict[str, torch.Tensor]
    moments: dict[str, torch.Tensor]

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        model = pl_module.model
        self.weights = {k: v.clone() for k, v in model.state_dict().items()}
        state = trainer.optimizers[0].state
        self.moments = {n: state[p]["exp_avg"].clone() for n, p in model.named_parameters()}


def test_old_layout_lightning_checkpoint_resumes(tmp_path: Path) -> None:
    """A sweep trial's Lightning checkpoint written before the change (plain path, step 4)
    resumes: the run starts from its weights and AdamW's moments, each on the parameter it
    belonged to, and trains on to the new end."""
    ckpt = DATA / "attnres_old_layout.ckpt"
    saved = torch.load(ckpt, weights_only=True)
    old = {k.removeprefix("model."): v for k, v in saved["state_dict"].items()}
    assert "stream.sites.score.queries" in old
    run = {**RESUMED, "train": {**RESUMED["train"], "max_steps": 8}}
    start = _AtStart()
    result, model = train(
        from_dict(run), tmp_path, callbacks=[start], progress=False, ckpt_path=ckpt
    )
    assert (result.steps, result.timed_steps, result.status) == (8, 4, "finished")
    assert not list(tmp_path.rglob("upgraded-*"))  # the upgraded copy it resumed from is gone
    renamed = {k.replace("score.keys.", "").replace("score.", ""): v for k, v in old.items()}
    assert start.weights.keys() == renamed.keys()
    for name, value in renamed.items():
        assert torch.equal(start.weights[name], value), name
    # AdamW's state is kept by position in its groups (decayed first, each in the model's order
    # of the time): every name must still meet its own moments.
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in param_groups(model, 0.1)[0]["params"]}
    params = [n for n in renamed if n in start.moments]  # the old model's order
    order = [n for n in params if n in decayed] + [n for n in params if n not in decayed]
    moments = saved["optimizer_states"][0]["state"]
    assert len(order) == len(moments)
    for i, name in enumerate(order):
        assert torch.equal(start.moments[name], moments[i]["exp_avg"]), name
