"""trainers.identity: who reads which model field, and the normal form of a configuration.

"Unread" is proved on the models themselves: where ``unread_fields`` names a field, the model
built with another value of it (forced past validation, as the model code sees it) has the same
parameters and, from the same seed, the same logits; where the field is read, another value
changes one or the other, so the first test could fail."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.callbacks import SaveAtStep
from tests.trainers.conftest import tiny
from trainers.config import ModelConfig, RunConfig, TrainConfig, valid_wirings
from trainers.config_io import from_dict
from trainers.identity import READERS, normalized, refusal, unread_fields
from trainers.model.optim_groups import optimizer_groups
from trainers.model.transformer import DeepTransformer
from trainers.training.run import train

# Another valid value for each field READERS names (valid at tiny's size: 2 blocks, 4 sublayers,
# d_model 16), differing from tiny's.
# Model fields that change the optimizer's groups, not the forward.
OPTIMIZER_FIELDS = ("attnres_query_lr",)
OTHER: dict[str, Any] = {
    "attnres_blocks": 4,
    "attnres_key_norm": "none",
    "attnres_gate": "sigmoid",
    "attnres_query": "input",
    "attnres_heads": 2,
    "attnres_window": 1,
    "attnres_sources": "deltas",
    "attnres_query_rank": 4,
    "attnres_query_lr": 0.5,
    "hc_streams": 2,
    "hc_dynamic": True,
    "mhc_sinkhorn_iters": 3,
    "laurel_rank": 4,
    "dense_dilation": 2,
    "dense_period": 2,
    "mix_ln_alpha": 0.5,
    "rope_base": 500.0,
    "scaled_init": False,
    "norm": "layernorm",
    "norm_eps": 1e-3,
    "base_width": 8,
    "base_depth": 1,
    "depth_alpha": 0.75,
}

# Every valid (residual, placement, norm scaling) with RMSNorm and rotary positions, and plain
# pre-norm with learned ones (positions meet no wiring): the cells each field's readers are
# decided over.
CELLS = [
    {"residual": r, "placement": p, "norm_scaling": sc, "pos": "rope"}
    for r, p, n, sc in valid_wirings()
    if n == "rmsnorm"
] + [{"residual": "standard", "placement": "pre", "norm_scaling": "none", "pos": "learned"}]
# Full AttnRes with an input-dependent query, the one form whose every setting is read.
CELLS += [
    {"residual": "attnres", "placement": "pre", "norm_scaling": "none", "attnres_query": "low_rank"}
]
# Plain pre-norm under each parametrization that scales (the only wiring checked with them).
CELLS += [
    {"residual": "standard", "placement": "pre", "norm_scaling": "none", "parametrization": p}
    for p in ("mup", "depth_mup", "completep")
]


def _forced(model: ModelConfig, name: str, value: Any) -> ModelConfig:
    """``model`` with ``name`` set to ``value`` past validation (which refuses some unread values):
    what the model code reads is then the only thing that decides the model."""
    forced = dataclasses.replace(model)
    object.__setattr__(forced, name, value)
    return forced


def _model(cfg: ModelConfig) -> DeepTransformer:
    """The model from seed 0, every parameter then moved by seeded noise (zero-initialized
    queries and gates would otherwise hide a difference in what multiplies them)."""
    torch.manual_seed(0)
    model = DeepTransformer(cfg).double().eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return model


def _same_model(a: ModelConfig, b: ModelConfig) -> bool:
    ma, mb = _model(a), _model(b)
    shapes = {k: v.shape for k, v in ma.state_dict().items()}
    if shapes != {k: v.shape for k, v in mb.state_dict().items()}:
        return False
    idx = torch.randint(0, a.vocab_size, (2, a.seq_len), generator=torch.Generator().manual_seed(2))
    return torch.equal(ma(idx), mb(idx))


def test_other_values_cover_the_table() -> None:
    """Every field READERS names has another value here, and the table names model fields."""
    assert set(OTHER) == set(READERS)
    assert set(READERS) <= {f.name for f in dataclasses.fields(ModelConfig)}
    for name, value in OTHER.items():
        assert value != getattr(tiny(), name), name


@pytest.mark.parametrize("cell", CELLS, ids=lambda c: "-".join(c.values()))
def test_an_unread_field_never_changes_the_model(cell: dict[str, str]) -> None:
    """In every wiring cell, each field ``unread_fields`` names builds the same model at another
    value: the same parameter names and shapes, and bitwise the same logits from one seed."""
    cfg = tiny(**cell)  # type: ignore[arg-type]
    unread = unread_fields(cfg)
    assert unread, "every cell leaves some field unread"
    for name in unread:
        assert _same_model(cfg, _forced(cfg, name, OTHER[name])), name


def _reading_cell(name: str) -> ModelConfig:
    """The first wiring cell that reads ``name`` (its other value valid there)."""
    for cell in CELLS:
        cfg = tiny(**cell)  # type: ignore[arg-type]
        if name not in unread_fields(cfg):
            return cfg
    raise AssertionError(f"no configuration reads {name}")


@pytest.mark.parametrize("name", sorted(READERS))
def test_a_read_field_changes_the_model(name: str) -> None:
    """Where ``unread_fields`` does not name a field, its other value builds another model: the
    comparison above can tell models apart for every field it is trusted with."""
    cfg = _reading_cell(name)
    other = _forced(cfg, name, OTHER[name])
    if name in OPTIMIZER_FIELDS:  # the same forward; another optimizer
        t = TrainConfig()
        rates = [
            [g["lr"] for g in optimizer_groups(_model(c), t) if "lr" in g] for c in (cfg, other)
        ]
        assert rates[0] != rates[1]
        return
    assert not _same_model(cfg, other)


@pytest.mark.parametrize("cell", CELLS[::5], ids=lambda c: "-".join(c.values()))
def test_normalized_is_idempotent_and_keeps_the_model(cell: dict[str, str]) -> None:
    """``normalized`` sets exactly the unread fields that are off their default to the default;
    applied twice it changes nothing more; the model it builds is the one the given config
    builds."""
    model = tiny(**cell)  # type: ignore[arg-type]
    lenient = {"attnres_blocks": 3, "hc_streams": 2, "hc_dynamic": True, "rope_base": 50.0}
    lenient |= {"mhc_sinkhorn_iters": 4, "mix_ln_alpha": 0.5}
    given = dataclasses.replace(
        model, **{k: v for k, v in lenient.items() if k in unread_fields(model)}
    )
    cfg = RunConfig(model=given, train=TrainConfig(seed=3))
    once = normalized(cfg)
    assert normalized(once) == once and once.train == cfg.train
    defaults = ModelConfig()
    for f in dataclasses.fields(ModelConfig):
        want = (
            getattr(defaults, f.name) if f.name in unread_fields(given) else getattr(given, f.name)
        )
        assert getattr(once.model, f.name) == want, f.name
    assert _same_model(given, once.model)
    assert normalized(RunConfig()) == RunConfig()


def test_unread_fields_reads_a_plain_mapping() -> None:
    """A model section's values not yet validated (a sweep's point) are read the same way."""
    cfg = tiny(residual="hyper", placement="sandwich", pos="learned")
    values = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
    assert unread_fields(values) == unread_fields(cfg)
    assert "hc_streams" not in unread_fields(cfg) and "rope_base" in unread_fields(cfg)
    assert "hc_dynamic" in unread_fields(tiny(residual="mhc"))
    assert "mhc_sinkhorn_iters" in unread_fields(tiny(residual="mhc_lite"))


def test_the_refusal_names_the_readers_and_the_configuration() -> None:
    """One line: the field and value, what reads it, what this configuration is, the default."""
    cfg = _forced(tiny(residual="attnres"), "attnres_key_norm", "none")
    cfg = _forced(cfg, "attnres_query", "scalar")
    assert refusal(cfg, "attnres_key_norm") == (
        "model.attnres_key_norm: 'none' applies to residual 'attnres' or 'block_attnres' with "
        "attnres_query other than 'scalar' only; this configuration (residual 'attnres', "
        "attnres_query 'scalar') does not read it (leave it at 'rmsnorm')"
    )
    standard = tiny(hc_streams=2)
    assert refusal(standard, "hc_streams") == (
        "model.hc_streams: 2 applies to residual 'hyper', 'mhc' or 'mhc_lite' only; this "
        "configuration (residual 'standard') does not read it (leave it at 4)"
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"residual": "laurel_rw", "laurel_rank": 4}, "laurel_rank"),
        ({"dense_period": 2}, "dense_period"),
        ({"attnres_gate": "sigmoid"}, "attnres_gate"),
        (
            {"residual": "attnres", "attnres_query": "scalar", "attnres_key_norm": "none"},
            "attnres_key_norm",
        ),
    ],
)
def test_model_config_refuses_by_the_same_rule(kwargs: dict[str, Any], field: str) -> None:
    """The fields a ModelConfig refuses where unread are refused with ``refusal``'s line."""
    with pytest.raises(ValueError) as err:
        tiny(**kwargs)
    forced = tiny()
    for name, value in kwargs.items():
        forced = _forced(forced, name, value)
    assert str(err.value) == refusal(forced, field)


def test_an_old_checkpoint_resumes_under_the_normal_form(tmp_path: Path) -> None:
    """A trial checkpointed before unread fields took their default (standard with hc_streams 2
    and attnres_blocks 2 in its hyperparameters) resumes under its normalized configuration,
    which a sweep now plans for its key, exactly as under the configuration it was saved with."""
    model = {"d_model": 16, "n_heads": 2, "n_layers": 2, "seq_len": 16}
    old = from_dict(
        {
            "model": {**model, "residual": "standard", "hc_streams": 2, "attnres_blocks": 2},
            "train": {
                "batch_size": 4,
                "max_steps": 6,
                "val_every": 3,
                "val_batches": 1,
                "warmup_steps": 1,
                "diagnostics_every": 0,
                "accelerator": "cpu",
            },
            "data": {"max_bytes": 1_000_000, "cache_dir": str(tmp_path / "cache")},
        }
    )
    ckpt = tmp_path / "last.ckpt"
    train(old, tmp_path / "a", callbacks=[SaveAtStep(3, ckpt)], progress=False)
    hparams = torch.load(ckpt, weights_only=True)["hyper_parameters"]
    assert (hparams["model.hc_streams"], hparams["model.attnres_blocks"]) == (2, 2)
    runs = [
        train(cfg, tmp_path / name, progress=False, ckpt_path=ckpt)[0]
        for cfg, name in ((old, "old"), (normalized(old), "normal"))
    ]
    assert normalized(old).model.hc_streams == 4
    assert [(r.status, r.steps) for r in runs] == [("finished", 6)] * 2
    assert runs[0].val_loss == runs[1].val_loss
