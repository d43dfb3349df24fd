"""Configuration: registries in sync with the Literals (the residual, attention and placement
ones in tests/trainers/test_catalogue.py), validation, and the YAML/--set path."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args

import pytest
import yaml

from trainers.config import (
    ATTNRES_SWITCHES,
    PLACEMENT_NAMES,
    RESIDUAL_NAMES,
    VALID_PLACEMENTS,
    DataSource,
    GateName,
    KeyNormName,
    ModelConfig,
    NormName,
    QueryName,
    RunConfig,
    SourcesName,
    flatten,
    to_dict,
    validity_matrix_markdown,
)
from trainers.config_io import build_config, from_dict, parse_overrides
from trainers.data import SOURCES
from trainers.model.norms import NORMS
from trainers.residual.attnres.delta import SOURCE_KINDS
from trainers.residual.attnres.depth_mixing import GATES, KEY_NORMS, QUERIES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "literal,registry",
    [
        (NormName, NORMS),
        (DataSource, SOURCES),
        (KeyNormName, KEY_NORMS),
        (GateName, GATES),
        (QueryName, QUERIES),
    ],
)
def test_literals_match_registries(literal: object, registry: object) -> None:
    """Every name a config field accepts has an implementation, and no implementation hides."""
    assert set(get_args(literal)) == set(registry.names())  # type: ignore[attr-defined]


def test_attnres_sources_match_their_implementations() -> None:
    """'outputs' is AttnRes's own replacement routing; every other source kind has its block
    source in Delta AttnRes's registry, and no registered kind hides."""
    assert set(get_args(SourcesName)) == {"outputs", *SOURCE_KINDS.names()}


def test_validity_matrix_covers_every_residual() -> None:
    """The validity matrix has a row per residual type, each naming known placements."""
    assert set(VALID_PLACEMENTS) == set(RESIDUAL_NAMES)
    for placements in VALID_PLACEMENTS.values():
        assert set(placements) <= set(PLACEMENT_NAMES)


def test_docs_show_the_validity_matrix_from_the_code() -> None:
    """docs/variants.md carries the table the code generates, so the two cannot drift."""
    assert validity_matrix_markdown() in (ROOT / "docs" / "variants.md").read_text()


INVALID = [(r, p) for r in RESIDUAL_NAMES for p in PLACEMENT_NAMES if p not in VALID_PLACEMENTS[r]]


@pytest.mark.parametrize("residual,placement", INVALID)
def test_invalid_combinations_name_the_field_and_the_choices(residual: str, placement: str) -> None:
    """An undefined wiring raises ValueError naming model.placement and every valid choice."""
    with pytest.raises(ValueError, match="model.placement") as err:
        ModelConfig(residual=residual, placement=placement)  # type: ignore[arg-type]
    for ok in VALID_PLACEMENTS[residual]:
        assert ok in str(err.value)


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"residual": "nope"}, "model.residual"),
        ({"placement": "nope"}, "model.placement"),
        ({"norm": "batchnorm"}, "model.norm"),
        ({"d_model": 96, "n_heads": 5}, "model.n_heads"),
        ({"residual": "block_attnres", "n_layers": 2, "attnres_blocks": 5}, "model.attnres_blocks"),
        ({"residual": "block_attnres", "attnres_blocks": 0}, "model.attnres_blocks"),
        ({"n_layers": 0}, "model.n_layers"),
        ({"d_model": 12, "n_heads": 4, "pos": "rope"}, "model.pos"),
        ({"residual": "attnres", "attnres_gate": "tanh"}, "model.attnres_gate"),
        ({"residual": "attnres", "attnres_key_norm": "l2"}, "model.attnres_key_norm"),
        ({"residual": "attnres", "attnres_query": "mlp"}, "model.attnres_query"),
        ({"residual": "attnres", "d_model": 96, "attnres_heads": 5}, "model.attnres_heads"),
        ({"residual": "attnres", "attnres_heads": 0}, "model.attnres_heads"),
        ({"residual": "attnres", "attnres_window": -1}, "model.attnres_window"),
        ({"residual": "attnres", "attnres_sources": "states"}, "model.attnres_sources"),
        # the coord check measured replacement routing only
        (
            {"residual": "attnres", "attnres_sources": "deltas", "parametrization": "mup"},
            "model.parametrization",
        ),
        (
            {"residual": "attnres", "attnres_query": "scalar", "attnres_key_norm": "none"},
            "model.attnres_key_norm",
        ),
    ],
)
def test_bad_values_raise_naming_the_field(kwargs: dict[str, object], field: str) -> None:
    """Each bad value is rejected at construction with a message that names its field."""
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        ModelConfig(**kwargs)  # type: ignore[arg-type]


def test_attnres_blocks_is_free_for_other_residuals() -> None:
    """attnres_blocks only constrains Block AttnRes, so depth sweeps of others need no care."""
    ModelConfig(residual="standard", n_layers=1, attnres_blocks=8)
    ModelConfig(residual="block_attnres", n_layers=4, attnres_blocks=8)


SWITCHED = {
    "attnres_key_norm": "none",
    "attnres_gate": "sigmoid",
    "attnres_query": "input",
    "attnres_heads": 2,
    "attnres_window": 4,
    "attnres_sources": "deltas",
    "attnres_query_rank": 4,
    "attnres_query_lr": 0.5,
}
# What the input-dependent query's settings need to be read.
NEEDS = {"attnres_query_rank": {"attnres_query": "low_rank"}}
NEEDS["attnres_query_lr"] = NEEDS["attnres_query_rank"]


@pytest.mark.parametrize("residual", sorted(set(RESIDUAL_NAMES) - {"attnres", "block_attnres"}))
def test_attnres_switches_are_refused_where_there_is_no_depth_mixing(residual: str) -> None:
    """Each Table 4 switch set away from its default, on a wiring without AttnRes's depth
    mixing, raises naming that field; at its default it is accepted everywhere."""
    assert set(SWITCHED) == set(ATTNRES_SWITCHES)
    placement = VALID_PLACEMENTS[residual][0]
    ModelConfig(residual=residual, placement=placement, **ATTNRES_SWITCHES)  # type: ignore[arg-type]
    for name, value in SWITCHED.items():
        with pytest.raises(ValueError, match=rf"model\.{name}: .*residual {residual!r}"):
            ModelConfig(residual=residual, placement=placement, **{name: value})  # type: ignore[arg-type]
        for ok in ("attnres", "block_attnres"):
            ModelConfig(residual=ok, **NEEDS.get(name, {}), **{name: value})  # type: ignore[arg-type]


def test_configs_are_frozen() -> None:
    """A logged config cannot be mutated; derive a new one with dataclasses.replace."""
    cfg = ModelConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_layers = 3  # type: ignore[misc]
    assert dataclasses.replace(cfg, n_layers=3).n_layers == 3


def test_flatten_uses_dotted_section_names() -> None:
    """MLflow parameter names are <section>.<field>, one per field."""
    flat = flatten(RunConfig())
    assert flat["model.residual"] == "standard" and "train.lr" in flat and "data.source" in flat
    assert len(flat) == sum(len(v) for v in to_dict(RunConfig()).values())


def test_yaml_round_trip(tmp_path: Path) -> None:
    """A config written as YAML reads back equal."""
    cfg = from_dict({"model": {"residual": "attnres", "n_layers": 12}, "train": {"lr": 1e-3}})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(to_dict(cfg)))
    assert build_config(str(path)) == cfg


def test_overrides_are_typed_and_applied_after_the_file(tmp_path: Path) -> None:
    """--set values take the field's type and win over the file."""
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  n_layers: 8\n  residual: attnres\n")
    cfg = build_config(
        str(path),
        ["model.n_layers=32", "train.lr=2e-4", "model.tie_embeddings=false", "model.pos=learned"],
    )
    assert cfg.model.n_layers == 32 and cfg.model.residual == "attnres"
    assert cfg.train.lr == 2e-4 and cfg.model.tie_embeddings is False and cfg.model.pos == "learned"


def test_validation_sees_the_file_and_overrides_together(tmp_path: Path) -> None:
    """A file that is only valid with its overrides is accepted (validated once, at the end)."""
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  residual: attnres\n  placement: post\n")
    assert build_config(str(path), ["model.placement=pre"]).model.placement == "pre"


@pytest.mark.parametrize(
    "pair,match",
    [
        ("model.nope=1", "unknown field"),
        ("nope.x=1", "unknown key"),
        ("model.n_layers=3.5", "not a valid int"),
        ("model.bias=maybe", "not a valid bool"),
        ("model.n_layers", "expected <section>.<field>=<value>"),
    ],
)
def test_bad_overrides(pair: str, match: str) -> None:
    """Unknown keys and mistyped values are rejected with what is allowed."""
    with pytest.raises(ValueError, match=match):
        parse_overrides([pair])


@pytest.mark.parametrize(
    "text,match",
    [
        ("model:\n  n_layers: deep\n", "model.n_layers: 'deep' has the wrong type"),
        ("model:\n  depth: 3\n", "unknown field"),
        ("- a\n- b\n", "expected a mapping"),
        ("model: [1, 2\n", "not valid YAML"),
        ("!!python/object:os.system\n", "not valid YAML"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, text: str, match: str) -> None:
    """File errors name the file and the key; YAML is loaded safely (no object tags)."""
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=match) as err:
        build_config(str(path))
    assert str(path) in str(err.value)
