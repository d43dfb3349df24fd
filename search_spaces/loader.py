"""Finding a space: a built-in name, or a user YAML file with the same schema::

    name: my_ablation              # default: the file's stem
    description: one line
    kind: grid                     # grid (every cell) or search (sampled)
    base: {model.d_model: 64}      # dotted keys (or model:/train:/data: sections) under every cell
    arms:                          # named configurations without their seed
      standard: {model.residual: standard}
      block: {model.residual: block_attnres, model.attnres_blocks: 4}
    params:                        # dotted key -> a list, {choice: [...]}, {int: [lo, hi]},
      model.n_layers: [4, 8]       #   {float: [lo, hi], log: true}, or a fixed value
    seeds: [0, 1, 2]
    trials: 20                     # search only
    sampler: tpe                   # search only: tpe or random
    objectives: [{metric: val/loss, mode: min}]
    tune: {train.lr: {float: [1e-4, 3e-2], log: true}, points: 7, seeds: 1}
                                   # grid only: each arm's learning rate, picked before its seeds

Files are read with ``yaml.safe_load``; every error names the file, the key and what is allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from search_spaces.builtin import BUILTIN
from search_spaces.lr_stage import stage_from_data
from search_spaces.space import Kind, Objective, Sampler, Space, parse_params
from trainers.config_io import check_key, read_yaml

KEYS = (
    "name",
    "description",
    "kind",
    "base",
    "arms",
    "params",
    "seeds",
    "trials",
    "sampler",
    "objectives",
    "tune",
)


def get_space(name_or_path: str) -> Space:
    """A built-in space by name, else a YAML file."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path]
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return load_space(path)
    raise ValueError(
        f"{name_or_path!r}: no such space; give a YAML file or one of: {', '.join(BUILTIN)}"
    )


def load_space(path: Path) -> Space:
    try:
        data = read_yaml(path)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    try:
        return space_from_data(data, default_name=path.stem)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path}: {err}") from None


def _flat(where: str, data: Any) -> dict[str, Any]:
    """Dotted keys, accepting ``{model: {n_layers: 8}}`` as ``{model.n_layers: 8}``; each key
    checked against the configuration's fields."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a mapping of config keys, got {data!r}")
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if "." not in str(key) and isinstance(value, Mapping):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[str(key)] = value
    for key in flat:
        try:
            check_key(key)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
    return flat


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> Any:
    if value not in allowed:
        raise ValueError(f"{key}: {value!r} is not allowed; choose one of: {', '.join(allowed)}")
    return value


def _int(key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    return value


def _seeds(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if not isinstance(value, list):
        raise ValueError(f"seeds: expected a list of integers, got {value!r}")
    return tuple(_int("seeds", v) for v in value)


def _objectives(value: Any) -> tuple[Objective, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError("objectives: expected a non-empty list of {metric, mode}")
    out = []
    for item in value:
        if not isinstance(item, Mapping) or set(item) - {"metric", "mode"} or "metric" not in item:
            raise ValueError(f"objectives: expected {{metric: NAME, mode: min|max}}, got {item!r}")
        out.append(
            Objective(
                str(item["metric"]),
                _choice("objectives.mode", item.get("mode", "min"), ("min", "max")),
            )
        )
    return tuple(out)


def space_from_data(data: Any, default_name: str) -> Space:
    if not isinstance(data, Mapping):
        raise ValueError(f"expected a mapping with keys: {', '.join(KEYS)}")
    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise ValueError(f"{unknown[0]!r}: unknown key; allowed: {', '.join(KEYS)}")
    arms = data.get("arms") or {}
    if not isinstance(arms, Mapping):
        raise ValueError("arms: expected a mapping of arm name to config keys")
    return Space(
        name=str(data.get("name", default_name)),
        description=str(data.get("description", "")),
        kind=_choice("kind", data.get("kind", "grid"), get_args(Kind)),
        base=_flat("base", data.get("base")),
        arms={str(name): _flat(f"arms.{name}", keys) for name, keys in arms.items()},
        params=parse_params(_flat("params", data.get("params"))),
        seeds=_seeds(data.get("seeds", [0])),
        trials=_int("trials", data.get("trials", 0)),
        sampler=_choice("sampler", data.get("sampler", "tpe"), get_args(Sampler)),
        objectives=_objectives(data.get("objectives", [{"metric": "val/loss"}])),
        tune=None if data.get("tune") is None else stage_from_data(data["tune"]),
    )


def space_to_data(space: Space) -> dict[str, Any]:
    """The inverse of ``space_from_data``: what a sweep records, and a file ``nas sweep`` takes."""
    return {
        "name": space.name,
        "description": space.description,
        "kind": space.kind,
        "base": dict(space.base),
        "arms": {name: dict(keys) for name, keys in space.arms.items()},
        "params": {key: dist.to_data() for key, dist in space.params.items()},
        "seeds": list(space.seeds),
        "trials": space.trials,
        "sampler": space.sampler,
        "objectives": [{"metric": o.metric, "mode": o.mode} for o in space.objectives],
        **({} if space.tune is None else {"tune": space.tune.to_data()}),
    }
