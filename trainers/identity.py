"""Which model fields a configuration reads, and its normal form: every field it does not read at
its default. Two configurations that build the same model have the same normal form, so a sweep
gives them one trial key and one record (docs/style.md, "identity follows behaviour").

``READERS`` is the one table of who reads what: the fields the catalogue's entries own (a
wiring's, a placement's), and the few rules no entry owns (rotary's base, the scaled init under
LayerNorm Scaling, the norms of placement none); a field it does not name is read by every
configuration. A test builds the models of a field's two values where it is unread and finds
them equal (parameter shapes, and logits at one seed), which holds the catalogue's ``owns`` to
the code that reads them.

Torch-free, and below ``trainers.config`` (whose refusals it words), so it imports no
configuration, not even for its types: it reads a ``ModelConfig`` by its fields, or a plain mapping
of a model section's values (a sweep's point before it is validated).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from trainers import catalogue

if TYPE_CHECKING:
    # typeshed's name for "an instance of a dataclass": ModelConfig here, which this module
    # may not import even for its types (trainers.config imports this module)
    from _typeshed import DataclassInstance as ModelConfig


class _Run(Protocol):
    """A ``RunConfig``, by the one field read here."""

    @property
    def model(self) -> ModelConfig: ...


RunT = TypeVar("RunT", bound=_Run)


@dataclass(frozen=True)
class Reader:
    """The configurations that read one field: those whose selector fields take one of the
    ``only`` values (every one listed) and none of the ``never`` values."""

    only: Mapping[str, tuple[object, ...]] = field(default_factory=dict)
    never: Mapping[str, tuple[object, ...]] = field(default_factory=dict)

    def reads(self, model: Mapping[str, Any]) -> bool:
        return all(model.get(k) in v for k, v in self.only.items()) and not any(
            model.get(k) in v for k, v in self.never.items()
        )

    @property
    def selectors(self) -> tuple[str, ...]:
        """The fields whose values decide whether the field is read."""
        return (*self.only, *self.never)

    def who(self) -> str:
        """``residual 'hyper', 'mhc' or 'mhc_lite'``: the readers, for a refusal."""
        parts = [f"{k} {_alternatives(v)}" for k, v in self.only.items()]
        parts += [f"{k} other than {_alternatives(v)}" for k, v in self.never.items()]
        return " with ".join(parts)


def _alternatives(values: tuple[object, ...]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _owned(axis: str, entries: tuple[catalogue.Entry, ...]) -> dict[str, Reader]:
    """The fields the catalogue's entries of one axis own: each read where ``axis`` takes the
    name of an entry that owns it."""
    names: dict[str, tuple[str, ...]] = {}
    for entry in entries:
        for owned in entry.owns:
            names[owned.field] = (*names.get(owned.field, ()), entry.name)
    return {field_: Reader(only={axis: owners}) for field_, owners in names.items()}


# Who reads each field that not every configuration reads: what the catalogue's wirings,
# placements and attention variants own (``trainers.catalogue``: e.g. block_attnres's partition,
# the Table 4 switches, hyper's streams, Mix-LN's alpha), then the rules no entry owns.
READERS: dict[str, Reader] = {
    **_owned("residual", catalogue.WIRINGS),
    **_owned("placement", catalogue.PLACEMENTS),
    **_owned("attention", catalogue.ATTENTIONS),
    # A scalar query has no keys to norm (ScalarLogits builds RawKeys whatever the key norm is).
    "attnres_key_norm": Reader(
        only={"residual": catalogue.switch_owners()}, never={"attnres_query": ("scalar",)}
    ),
    # The input-dependent query's own settings.
    "attnres_query_rank": Reader(
        only={"residual": catalogue.switch_owners(), "attnres_query": ("low_rank",)}
    ),
    "attnres_query_lr": Reader(
        only={"residual": catalogue.switch_owners(), "attnres_query": catalogue.INPUT_QUERIES}
    ),
    "rope_base": Reader(only={"pos": ("rope",)}),  # Rotary; learned positions have none
    # ModelConfig.uses_scaled_init: LayerNorm Scaling turns the scaled init off.
    "scaled_init": Reader(only={"norm_scaling": ("none",)}),
    # Placement 'none' fills no norm slot and has no final norm; every wiring that builds norms
    # or reads norm_eps of its own (hyper's dynamic maps, AttnRes, mHC, MUDDFormer) is defined
    # only where a placement has norms (trainers.config.VALID_PLACEMENTS).
    "norm": Reader(never={"placement": ("none",)}),
    "norm_eps": Reader(never={"placement": ("none",)}),
    # trainers.model.parametrization: the base sizes of the rules that scale width and depth, and
    # CompleteP's exponent (Depth-muP's is fixed at 1/2); the standard parametrization reads none
    "base_width": Reader(never={"parametrization": ("sp",)}),
    "base_depth": Reader(only={"parametrization": ("depth_mup", "completep")}),
    "depth_alpha": Reader(only={"parametrization": ("completep",)}),
}


def _values(model: ModelConfig | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(model, Mapping):
        return model
    return {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}


def unread_fields(model: ModelConfig | Mapping[str, Any]) -> tuple[str, ...]:
    """The model fields this configuration does not read, in ``READERS``' order. ``model`` is
    a ``ModelConfig`` or a mapping of a model section's values by field name."""
    values = _values(model)
    return tuple(name for name, reader in READERS.items() if not reader.reads(values))


def normalized(cfg: RunT) -> RunT:
    """``cfg`` with every model field it does not read at its default (``cfg`` itself when each
    already is): the one form of the model it builds."""
    defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(cfg.model)}
    changed = {
        n: defaults[n] for n in unread_fields(cfg.model) if getattr(cfg.model, n) != defaults[n]
    }
    if not changed:
        return cfg
    run: Any = cfg  # a RunConfig: a dataclass, which the protocol cannot say
    return cast(RunT, dataclasses.replace(run, model=dataclasses.replace(cfg.model, **changed)))


def applies_to(name: str, value: Any) -> str:
    """``model.hc_streams: 2 applies to residual 'hyper', 'mhc' or 'mhc_lite' only``: the first
    half of every refusal of an unread field."""
    return f"model.{name}: {value!r} applies to {READERS[name].who()} only"


def refusal(model: ModelConfig, name: str) -> str:
    """The one line refusing a value set for a field ``model`` does not read: what reads it,
    what this configuration is, and the default to leave it at."""
    values = _values(model)
    default = next(f.default for f in dataclasses.fields(model) if f.name == name)
    this = ", ".join(f"{k} {values[k]!r}" for k in READERS[name].selectors)
    return (
        f"{applies_to(name, values[name])}; this configuration ({this}) does not read it "
        f"(leave it at {default!r})"
    )
