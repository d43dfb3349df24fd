"""The AttnRes paper's published numbers (Kimi Team 2026, arXiv 2603.15031: §5.1 with Table 2,
§5.3 with Table 4), shown beside a user's results where the arms correspond. They come from
194M-528M-parameter MoE models trained on 38-119B tokens: a different scale from any sweep this
harness runs on a laptop, and labelled so wherever they appear."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reports.normalize import recorded
from trainers import catalogue
from trainers.config import ATTNRES_SWITCHES, balanced_partition

# The AttnRes design switches at the paper's choice, as recorded parameters (MLflow's strings).
ATTNRES_DEFAULTS = {f"model.{name}": str(value) for name, value in ATTNRES_SWITCHES.items()}
_SHORT = {f"model.{s.field}": s.short for s in catalogue.SWITCHES}


def attnres_switches(params: Mapping[str, object]) -> dict[str, str]:
    """The AttnRes design switches a configuration sets away from the paper's choice, by short
    name (``{"gate": "sigmoid"}``)."""
    out = {}
    for key, default in ATTNRES_DEFAULTS.items():
        value = str(recorded(params, key, default))  # absent, NaN, "nan", "None": the default
        if value != default:
            out[_SHORT[key]] = value
    return out


@dataclass(frozen=True)
class Published:
    label: str  # the paper's name for the arm
    val_loss: float
    residual: str = ""  # the model.residual of a matching arm
    # The one AttnRes design switch the row sets, (short name, value); "" as the value matches
    # any value (the paper's window and head count are for its 32-sublayer, d = 1168 model).
    switch: tuple[str, str] | None = None
    # A Block AttnRes row's N (AttnRes blocks): matched at any N, and the report says where a
    # sweep's N differs (``paper_arm``).
    attnres_blocks: int | None = None
    # The paper's number for the row's switch where it has one (its window W, its heads H):
    # matched at any value, and the report says where a sweep's differs (``paper_arm``).
    switch_value: int | None = None


# Table 4: the 436M model, 16 layers (Transformer blocks: 32 sublayers), identical
# hyperparameters and compute. Its Block AttnRes rows split the 32 sublayers into N = 8 AttnRes
# blocks of S = 4 (§5.3; Fig. 6 finds S = 2, 4 and 8 alike).
TABLE4_SUBLAYERS = 32
TABLE4_ATTNRES_BLOCKS = 8
TABLE4_BASELINE = 1.766
TABLE4 = (
    Published("Baseline (PreNorm)", 1.766, "standard"),
    Published("DenseFormer", 1.767, "denseformer"),
    # The paper's mHC is mHC-lite (its number is Table 2's mHC column, which is mHC-lite), not the
    # Sinkhorn mHC of arXiv 2512.24880 (model.residual "mhc"), which has no row here.
    Published("mHC", 1.747, "mhc_lite"),
    Published("AttnRes Full", 1.737, "attnres"),
    # The paper's query is "projected from the current hidden state", scale and rate unsaid; the
    # raw projection ('input') saturates the softmax at any width (docs/variants.md), so the row
    # is matched by the form chosen by measurement, the static query plus the projection / d.
    Published("Full + input-dependent query", 1.731, "attnres", ("query", "static_input")),
    Published("Full + input-independent mixing", 1.749, "attnres", ("query", "scalar")),
    Published("Full + sigmoid", 1.741, "attnres", ("gate", "sigmoid")),
    Published("Full without key RMSNorm", 1.743, "attnres", ("key_norm", "none")),
    Published("Full, sliding window (W = 1 + 8)", 1.764, "attnres", ("window", ""), None, 8),
    Published("AttnRes Block (N = 8)", 1.746, "block_attnres", None, TABLE4_ATTNRES_BLOCKS),
    Published(
        "Block + multi-head (H = 16)",
        1.752,
        "block_attnres",
        ("heads", ""),
        TABLE4_ATTNRES_BLOCKS,
        16,
    ),
    Published(
        "Block without key RMSNorm",
        1.750,
        "block_attnres",
        ("key_norm", "none"),
        TABLE4_ATTNRES_BLOCKS,
    ),
)

# Table 2: final validation loss per model size (activated params excluding embeddings).
TABLE2_COLUMNS = ("size", "tokens", "standard", "block_attnres", "attnres", "mhc_lite")
TABLE2 = (
    ("194M", "38.7B", 1.931, 1.909, 1.899, 1.906),
    ("241M", "45.4B", 1.895, 1.875, 1.874, 1.869),
    ("296M", "62.1B", 1.829, 1.809, 1.804, 1.807),
    ("436M", "87.9B", 1.766, 1.746, 1.737, 1.747),
    ("528M", "119.0B", 1.719, 1.693, 1.692, 1.694),
)

# §5.1: Block AttnRes at 5.6 PFLOP/s-days matches a baseline trained with 1.25x the compute.
COMPUTE_MULTIPLIER = 1.25

# Fig. 5, in words (the paper gives no numbers): what the per-layer profiles looked like.
FIG5 = {
    "output_growth": "the baseline's block outputs grow monotonically with depth; Block AttnRes "
    "stays bounded",
    "grad_front_load": "the baseline's gradients are disproportionately large in the earliest "
    "blocks; AttnRes spreads them more evenly",
}


def published_for(params: Mapping[str, object]) -> Published | None:
    """The Table 4 row of a configuration (flattened parameters, ``model.residual``...), where
    one corresponds: the same residual type and the same design switch, or none."""
    residual = str(params.get("model.residual", ""))
    switches = attnres_switches(params)
    return next(
        (r for r in TABLE4 if r.residual == residual and _same_switch(r.switch, switches)), None
    )


# What the report calls a switch's number: the window's W (the embedding plus the W newest
# other sources, as in the paper's "W = 1 + 8"), the heads' H.
SWITCH_SYMBOLS = {"window": "W", "heads": "H"}


def paper_arm(published: Published, params: Mapping[str, object]) -> str:
    """The paper's arm as a report names it beside a configuration: its label, and where the
    configuration's N (Block AttnRes, with the sublayers per AttnRes block, S, each has) or its
    switch's number (the window's W, the heads' H) differs from the paper's, both: "AttnRes
    Block (N = 8); sweep N = 4, paper N = 8 (S = 4 in both)", "Full, sliding window (W = 1 +
    8); sweep W = 4, paper W = 8"."""
    return _blocks_named(published, params) + _switch_named(published, params)


def _switch_named(published: Published, params: Mapping[str, object]) -> str:
    """ "; sweep W = 4, paper W = 8" where the configuration's value of the row's switch differs
    from the paper's number; "" where it matches or either has none."""
    if published.switch is None or published.switch_value is None:
        return ""
    short = published.switch[0]
    key = next(k for k, name in _SHORT.items() if name == short)
    value = _whole(recorded(params, key))
    if value is None or value == published.switch_value:
        return ""
    symbol = SWITCH_SYMBOLS[short]
    return f"; sweep {symbol} = {value}, paper {symbol} = {published.switch_value}"


def _blocks_named(published: Published, params: Mapping[str, object]) -> str:
    """The label, with both N where the configuration's differs from a Block row's."""
    paper = published.attnres_blocks
    n = _whole(recorded(params, "model.attnres_blocks"))
    layers = _whole(recorded(params, "model.n_layers"))
    if paper is None or n is None or n == paper:
        return published.label
    said = f"{published.label}; sweep N = {n}, paper N = {paper}"
    if layers is None or not 1 <= n <= 2 * layers:
        return said
    here = _sizes(balanced_partition(2 * layers, n))
    there = _sizes(balanced_partition(TABLE4_SUBLAYERS, paper))
    same = f"S = {here} in both" if here == there else f"S = {here} here, {there} in the paper"
    return f"{said} ({same})"


def _whole(value: object) -> int | None:
    """A recorded integer (int, float or MLflow's text); None where it is not one."""
    try:
        number = float(str(value))
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def _sizes(partition: tuple[int, ...]) -> str:
    """A partition's block size, or each size where they differ ("3,3,2")."""
    return str(partition[0]) if len(set(partition)) == 1 else ",".join(map(str, partition))


def _same_switch(switch: tuple[str, str] | None, switches: dict[str, str]) -> bool:
    if switch is None:
        return not switches
    name, value = switch
    return switches.keys() == {name} and value in ("", switches[name])
