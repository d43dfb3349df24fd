"""Building a RunConfig from YAML files and ``--set section.field=value`` overrides.

Every error is a ``ValueError`` whose message names the key and what is allowed, so the CLI can
print it as one line.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from record.errors import first_line
from trainers.config import SECTIONS, RunConfig, to_dict
from trainers.corpus.vocab import vocab_from_data


def _field_types(cls: type[Any]) -> dict[str, Any]:
    """Each field's type; a field naming a catalogue entry (typed ``str``, its names in its
    ``choices``) as the ``Literal`` of those names, so its errors list them."""
    types = typing.get_type_hints(cls)
    literal: Any = Literal  # subscripted at run time with the names the catalogue gives
    for f in dataclasses.fields(cls):
        if "choices" in f.metadata:
            types[f.name] = literal[f.metadata["choices"]]
    return types


def _members(tp: Any) -> tuple[Any, ...]:
    """The types a field takes: a union's members (``train.micro_batch``: a number or 'auto'),
    else the type alone."""
    return get_args(tp) if get_origin(tp) in (typing.Union, types.UnionType) else (tp,)


def _type_name(tp: Any) -> str:
    if len(_members(tp)) > 1:
        return " or ".join(_type_name(m) for m in _members(tp))
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(str, get_args(tp)))
    return getattr(tp, "__name__", str(tp))


def _switch_word(tp: Any, value: Any) -> Any:
    """A choice field that offers 'true' and 'false' (``train.compile``, a bool before it gained
    'auto') takes a YAML bool and any case of the words, as its records and configs wrote it."""
    if get_origin(tp) is not Literal or not {"true", "false"} <= set(get_args(tp)):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    lowered = value.lower() if isinstance(value, str) else value
    return lowered if lowered in get_args(tp) else value


def _check_value(key: str, tp: Any, value: Any) -> Any:
    """Accept a YAML-typed value for a field of type ``tp`` (ints widen to floats; a union
    takes what any of its members takes)."""
    members = _members(tp)
    if len(members) > 1:
        for member in members:
            try:
                return _check_value(key, member, value)
            except ValueError:
                continue
        raise ValueError(f"{key}: {value!r} has the wrong type; expected {_type_name(tp)}")
    value = _switch_word(tp, value)
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }
    base = str if get_origin(tp) is Literal else tp
    if not ok.get(base, True):
        raise ValueError(f"{key}: {value!r} has the wrong type; expected {_type_name(tp)}")
    return float(value) if base is float else value


def _parse_text(key: str, tp: Any, text: str) -> Any:
    """Turn the text of a ``--set`` value into the field's type (a union's first member that
    reads it: a number, else one of its words)."""
    members = _members(tp)
    if len(members) > 1:
        for member in members:
            try:
                return _check_value(key, member, _parse_text(key, member, text))
            except ValueError:
                continue
        raise ValueError(f"{key}: {text!r} is not a valid {_type_name(tp)}")
    base = str if get_origin(tp) is Literal else tp
    if base is str:
        return _switch_word(tp, text.strip())
    try:
        if base is bool:
            lowered = text.strip().lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        if base is int:
            return int(text)
        if base is float:
            return float(text)
    except ValueError:
        raise ValueError(f"{key}: {text!r} is not a valid {_type_name(tp)}") from None
    return text


def _split_key(key: str) -> tuple[str, str, Any]:
    section, _, name = key.partition(".")
    if section not in SECTIONS or not name:
        raise ValueError(
            f"{key!r}: unknown key; keys look like <section>.<field> with section "
            f"one of: {', '.join(SECTIONS)}"
        )
    types = _field_types(SECTIONS[section])
    if name not in types:
        raise ValueError(f"{key!r}: unknown field; {section} fields are: {', '.join(types)}")
    return section, name, types[name]


def check_key(key: str) -> None:
    """Raise ValueError unless ``key`` names a configuration field (``model.n_layers``)."""
    _split_key(key)


def _merge(data: Mapping[str, Any], base: RunConfig | None) -> dict[str, dict[str, Any]]:
    """Check keys and value types of ``data`` and lay them over ``base`` as plain dicts."""
    if not isinstance(data, Mapping):
        raise ValueError(f"config must be a mapping of sections ({', '.join(SECTIONS)})")
    merged = to_dict(base or RunConfig())
    for section, values in data.items():
        if section not in SECTIONS:
            raise ValueError(f"{section!r}: unknown section; allowed: {', '.join(SECTIONS)}")
        if not isinstance(values, Mapping):
            raise ValueError(f"{section}: expected a mapping of fields, got {values!r}")
        for name, value in values.items():
            key = f"{section}.{name}"
            _, _, tp = _split_key(key)
            merged[section][name] = _check_value(key, tp, value)
    return merged


def from_dict(data: Mapping[str, Any], base: RunConfig | None = None) -> RunConfig:
    """A validated RunConfig from a nested mapping, over ``base`` (defaults when None)."""
    merged = _merge(data, base)
    return RunConfig(**{s: cls(**merged[s]) for s, cls in SECTIONS.items()})


def nest(flat: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"model.n_layers": 8}`` -> ``{"model": {"n_layers": 8}}``; unknown keys fail later, in
    ``from_dict``, with the list of valid fields."""
    nested: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        section, _, name = key.partition(".")
        if not name:
            raise ValueError(f"{key!r}: keys look like <section>.<field>, e.g. model.n_layers")
        nested.setdefault(section, {})[name] = value
    return nested


def parse_overrides(pairs: Iterable[str]) -> dict[str, dict[str, Any]]:
    """``["model.n_layers=32", ...]`` to a nested dict of typed values."""
    nested: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ValueError(f"--set {pair!r}: expected <section>.<field>=<value>")
        section, name, tp = _split_key(key.strip())
        nested.setdefault(section, {})[name] = _parse_text(key.strip(), tp, text.strip())
    return nested


def read_yaml(path: str | Path) -> Any:
    """A YAML file's data, read with ``yaml.safe_load`` (no tags that build objects); ValueError,
    one line without the file's name, when there is no such file or it is not YAML."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise ValueError("no such file")
    try:
        return yaml.safe_load(p.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"not valid YAML ({first_line(err)})") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a config file: a mapping of sections."""
    data = read_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"expected a mapping of sections ({', '.join(SECTIONS)})")
    return data


def build_config(config_file: str | None = None, overrides: Iterable[str] = ()) -> RunConfig:
    """Defaults, then the file, then the ``--set`` overrides; validated once at the end, so a
    file may hold a combination that only the overrides make valid. A default the data decides
    (``model.vocab_size``: a corpus's own vocabulary) is the data's where neither gave it
    (``trainers.corpus.vocab``)."""
    data: dict[str, dict[str, Any]] = {}
    if config_file:
        try:
            data = {k: dict(v) for k, v in load_yaml(config_file).items()}
            _merge(data, None)
        except (TypeError, ValueError) as err:
            raise ValueError(f"--config {config_file}: {err}") from None
    for section, values in parse_overrides(overrides).items():
        data.setdefault(section, {}).update(values)
    given = {f"{section}.{name}" for section, values in data.items() for name in values}
    return vocab_from_data(from_dict(data), given)


def field_help() -> dict[str, str]:
    """Dotted key to its help text, for ``nas train --help``; a field naming a catalogue entry
    lists the names it accepts."""
    return {
        f"{s}.{f.name}": f"{f.metadata.get('help', '')} ({_accepted(f)}default: {f.default!r})"
        for s, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
    }


def _accepted(f: dataclasses.Field[Any]) -> str:
    choices = f.metadata.get("choices")
    return f"one of: {', '.join(choices)}; " if choices else ""
