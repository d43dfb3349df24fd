"""The wiring catalogue: one entry per registry module and the reverse, the config's Literals
and rules read from it, its parameter formulas against real models, and the docs' tables
generated from it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainers.conftest import WIRINGS, tiny
from trainers import catalogue, docs_tables
from trainers.attention import ATTENTIONS
from trainers.config import (
    MODEL_DEFAULTS,
    REFUSED_UNREAD,
    ModelConfig,
)
from trainers.config_io import field_help, from_dict
from trainers.identity import READERS
from trainers.model.placement import PLACEMENTS
from trainers.model.transformer import DeepTransformer, num_params
from trainers.residual import RESIDUALS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "entries,registry",
    [
        (catalogue.WIRINGS, RESIDUALS),
        (catalogue.ATTENTIONS, ATTENTIONS),
        (catalogue.PLACEMENTS, PLACEMENTS),
    ],
    ids=["residual", "attention", "placement"],
)
def test_every_registry_module_has_an_entry_and_back(
    entries: tuple[catalogue.Entry, ...], registry: object
) -> None:
    """A module registered under a name has a catalogue entry of that name, and every entry
    names a registered module."""
    assert {e.name for e in entries} == set(registry.names())  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "axis,entries",
    [
        ("residual", catalogue.WIRINGS),
        ("attention", catalogue.ATTENTIONS),
        ("placement", catalogue.PLACEMENTS),
    ],
    ids=["residual", "attention", "placement"],
)
def test_the_config_accepts_the_catalogues_names_and_no_other(
    axis: str, entries: tuple[catalogue.Entry, ...]
) -> None:
    """A config's residual, attention and placement take exactly the catalogue's names: each
    entry's name builds (in a placement it is defined for), an unknown one is refused listing them
    all, and ``--help``'s and a file's errors list the same names."""
    for entry in entries:
        placement = entry.placements[0] if isinstance(entry, catalogue.Wiring) else None
        wiring = "standard" if axis == "placement" else None
        given = {axis: entry.name, **({"placement": placement} if placement else {})}
        if wiring and entry.name not in catalogue.wiring(wiring).placements:
            given["residual"] = next(
                w.name for w in catalogue.WIRINGS if entry.name in w.placements
            )
        assert getattr(ModelConfig(**given), axis) == entry.name  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=rf"model\.{axis}: 'nope' is not allowed") as err:
        ModelConfig(**{axis: "nope"})  # type: ignore[arg-type]
    assert str(err.value).endswith(", ".join(e.name for e in entries))
    with pytest.raises(ValueError, match="expected one of " + ", ".join(catalogue.names(entries))):
        from_dict({"model": {axis: 3}})
    assert f"one of: {', '.join(catalogue.names(entries))};" in field_help()[f"model.{axis}"]


def test_refused_unread_and_the_range_checks_are_the_catalogues() -> None:
    """The fields a ModelConfig refuses where unread are the owned fields no entry keeps (and the
    parametrization's own); a field several entries own is kept or refused by all of them; where
    read, each owned field's bounds hold, named in the refusal, and its default lies within its
    fixed bounds."""
    declared: dict[str, set[bool]] = {}
    for entry in (*catalogue.WIRINGS, *catalogue.PLACEMENTS, *catalogue.ATTENTIONS):
        for owned in entry.owns:
            declared.setdefault(owned.field, set()).add(owned.kept)
            low, high = (b if not callable(b) else None for b in (owned.low, owned.high))
            default = MODEL_DEFAULTS[owned.field]
            assert (low is None or default >= low) and (high is None or default <= high)
    assert all(len(kept) == 1 for kept in declared.values()), declared
    refused = {name for name, kept in declared.items() if kept == {False}}
    parametrization = {"base_width", "base_depth", "depth_alpha"}
    assert set(REFUSED_UNREAD) == refused | parametrization
    assert parametrization <= set(READERS)  # read by the parametrization, owned by no entry
    for entry, field, value in (
        ("laurel_lr", "laurel_rank", 17),  # at most d_model
        ("denseformer", "dense_period", 3),  # at most n_layers
        ("block_attnres", "attnres_blocks", 5),  # at most the sublayers
        ("mhc_lite", "hc_streams", 6),  # its own bound, tighter than the field's
        ("hyper", "hc_streams", 0),
    ):
        with pytest.raises(ValueError, match=rf"model\.{field}: {value} is out of range"):
            tiny(residual=entry, **{field: value})  # type: ignore[arg-type]
    tiny(residual="mhc", hc_streams=6)  # the field's own bound is wider than mhc_lite's
    with pytest.raises(ValueError, match=r"model\.laurel_rank: 17 applies to residual 'laurel_lr'"):
        tiny(residual="standard", laurel_rank=17)  # unread: refused, not range-checked
    tiny(residual="standard", attnres_blocks=5)  # unread and kept: neither


def test_owned_fields_and_label_fields_are_model_fields() -> None:
    """Every field an entry owns is a ModelConfig field and no shared axis; a label segment
    reads only fields its entry owns; every switch is owned by its wirings."""
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    for entry in (*catalogue.WIRINGS, *catalogue.PLACEMENTS, *catalogue.ATTENTIONS):
        owned = {o.field for o in entry.owns}
        assert owned <= fields - set(catalogue.AXES), entry.name
        for part in entry.label:
            assert set(part.fields) <= owned, entry.name
    assert set(catalogue.AXES) <= fields
    assert {s.field for s in catalogue.SWITCHES} <= set(catalogue.owners())
    assert catalogue.switch_owners() == ("attnres", "block_attnres")
    for wiring in catalogue.WIRINGS:
        assert set(wiring.placements) <= set(catalogue.names(catalogue.PLACEMENTS)), wiring.name


def _standard(cfg: ModelConfig) -> ModelConfig:
    """The standard model of ``cfg``'s shape and placement (every owned field at its default,
    Mix-LN's alpha aside: a placement's field)."""
    owned = {name: MODEL_DEFAULTS[name] for name in catalogue.owners() if name != "mix_ln_alpha"}
    return dataclasses.replace(cfg, residual="standard", attention="standard", **owned)


def _formula(cfg: ModelConfig) -> int:
    """What the catalogue says the residual and the attention variant add."""
    wiring, attention = catalogue.wiring(cfg.residual), catalogue.attention(cfg.attention)
    assert wiring.params is not None and attention.params is not None
    return wiring.params(cfg) + attention.params(cfg)


SWITCHED = {
    "hyper-dynamic-layernorm": dict(residual="hyper", hc_dynamic=True, norm="layernorm"),
    "hyper-dynamic-n2": dict(residual="hyper", hc_dynamic=True, hc_streams=2),
    "mhc-n3": dict(residual="mhc", hc_streams=3),
    "mhc_lite-n3": dict(residual="mhc_lite", hc_streams=3),
    "denseformer-2x2": dict(residual="denseformer", dense_dilation=2, dense_period=2),
    "laurel_lr-r4": dict(residual="laurel_lr", laurel_rank=4),
    "value_residual_learned": dict(attention="value_residual_learned", n_layers=4),
    "mudd-value_residual": dict(residual="mudd", attention="value_residual", n_layers=3),
    "mudd-layernorm": dict(residual="mudd", norm="layernorm", n_layers=4),
    "attnres-heads": dict(residual="attnres", attnres_heads=2),
    "attnres-input": dict(residual="attnres", attnres_query="input", attnres_heads=2),
    "attnres-input-raw": dict(residual="attnres", attnres_query="input", attnres_key_norm="none"),
    "attnres-static_input": dict(residual="attnres", attnres_query="static_input", attnres_heads=2),
    "attnres-low_rank-raw": dict(
        residual="attnres", attnres_query="low_rank", attnres_query_rank=3, attnres_key_norm="none"
    ),
    "block-gated-heads": dict(residual="block_attnres", attnres_query="gated", attnres_heads=2),
    "attnres-input_sqrt_d": dict(residual="attnres", attnres_query="input_sqrt_d"),
    "attnres-scalar-window": dict(residual="attnres", attnres_query="scalar", attnres_window=2),
    "block-scalar": dict(
        residual="block_attnres", n_layers=3, attnres_blocks=3, attnres_query="scalar"
    ),
    "block-raw-window": dict(residual="block_attnres", attnres_key_norm="none", attnres_window=2),
}


@pytest.mark.parametrize("n_layers", [1, 3])
def test_parameter_formulas_count_every_wiring_cell(n_layers: int) -> None:
    """Every wiring cell the contract suites run, at one and three blocks: the model has the
    standard model's parameters plus what the entry's formula says."""
    for residual, placement, norm, scaling in WIRINGS:
        cfg = tiny(
            residual=residual,
            placement=placement,
            norm=norm,
            norm_scaling=scaling,
            n_layers=n_layers,
            attnres_blocks=2,
        )
        extra = num_params(DeepTransformer(cfg)) - num_params(DeepTransformer(_standard(cfg)))
        assert extra == _formula(cfg), cfg


@pytest.mark.parametrize("overrides", SWITCHED.values(), ids=SWITCHED.keys())
def test_parameter_formulas_follow_the_owned_fields(overrides: dict[str, object]) -> None:
    """The fields that size a wiring (streams, dynamic maps, k x p, rank, the AttnRes switches,
    the attention variant, the norm type): the formula follows each."""
    cfg = tiny(**overrides)  # type: ignore[arg-type]
    extra = num_params(DeepTransformer(cfg)) - num_params(DeepTransformer(_standard(cfg)))
    assert extra == _formula(cfg)


def test_docs_carry_the_catalogue_tables() -> None:
    """docs/variants.md's residual, attention and validity tables are the catalogue's, as
    ``python -m trainers.docs_tables`` writes them."""
    text = (ROOT / "docs" / "variants.md").read_text()
    for table in docs_tables.tables():
        assert table in text, "run: python -m trainers.docs_tables"


def test_docs_tables_replace_only_their_table(tmp_path: Path) -> None:
    """The writer puts each generated table in place of the stale one and keeps the prose."""
    page = tmp_path / "variants.md"
    stale = [t.split("\n")[:3] for t in docs_tables.tables()]
    page.write_text(
        "\n\n".join(f"intro {i}\n\n" + "\n".join(t) for i, t in enumerate(stale)) + "\n"
    )
    docs_tables.main(page)
    text = page.read_text()
    assert all(table in text for table in docs_tables.tables())
    assert [line for line in text.split("\n") if line.startswith("intro")] == [
        f"intro {i}" for i in range(len(stale))
    ]


def test_readme_points_to_the_generated_tables() -> None:
    """The README's model family names no wiring list of its own: it links the residual and
    attention tables of docs/variants.md, which are the catalogue's (the test above)."""
    readme = (ROOT / "README.md").read_text()
    family = readme.split("## The model family", 1)[1].split("\n## ", 1)[0]
    variants = (ROOT / "docs" / "variants.md").read_text()
    for anchor, heading, table in (
        ("residual-wirings-modelresidual", "## Residual wirings (`model.residual`)", 0),
        ("attention-variants-modelattention", "## Attention variants (`model.attention`)", 1),
    ):
        assert f"(docs/variants.md#{anchor})" in family
        section = variants.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        assert docs_tables.tables()[table] in section


def test_catalogue_and_config_import_no_torch() -> None:
    """The catalogue, the config and the identity rule it applies load alone, without torch or
    anything else of the project but the record's schema."""
    probe = "import trainers.config, sys; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(out.stdout.split())
    assert "torch" not in loaded
    assert {m for m in loaded if m.split(".")[0] in ("trainers", "reports", "nas")} == {
        "trainers",
        "trainers.catalogue",
        "trainers.config",
        "trainers.identity",
    }
