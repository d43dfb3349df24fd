"""What the report knows about the model's configuration (from the torch-free catalogue and
config): which fields make a wiring (and so an arm's identity and its baseline matching) and
Block AttnRes's partitions."""

from __future__ import annotations

import dataclasses

from reports.ablation import WIRING_KEYS
from reports.sections import main_table
from tests.reports.frames import sweep, trial
from trainers.config import ModelConfig

# Fields that size or configure the network without choosing its wiring: an arm is compared with
# the baseline wiring at the same values of these.
CONTEXT_FIELDS = {
    "vocab_size",
    "d_model",
    "n_heads",
    "n_layers",
    "mlp_ratio",
    "seq_len",
    "dropout",
    "bias",
    "tie_embeddings",
    "pos",
    "rope_base",
    "norm_eps",
    "init_std",
    "scaled_init",
    # the parametrization and its base sizes: an arm under CompleteP is compared with the
    # baseline wiring under CompleteP at the same bases
    "parametrization",
    "base_width",
    "base_depth",
    "depth_alpha",
}


def test_every_model_field_is_wiring_or_context() -> None:
    """A new model field must be classified: a wiring field left out of WIRING_KEYS would be
    taken for context, and its arms would silently find no baseline (or the wrong one)."""
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    wiring = {k.removeprefix("model.") for k in WIRING_KEYS}
    assert wiring <= fields, f"WIRING_KEYS names no field: {sorted(wiring - fields)}"
    assert not wiring & CONTEXT_FIELDS
    assert fields == wiring | CONTEXT_FIELDS, (
        f"unclassified: {sorted(fields - wiring - CONTEXT_FIELDS)}"
    )


def test_results_name_each_block_attnres_arms_partition() -> None:
    """The results section says what N meant for each Block AttnRes arm at its depth (10 layers,
    N = 8: four AttnRes blocks of 3 sublayers then four of 2), and nothing for other wirings."""
    block = {"model__residual": "block_attnres", "model__attnres_blocks": 8}
    rows = [trial("base", s, 3.0, model__n_layers=10, model__attnres_blocks=8) for s in (0, 1)]
    rows += [trial("block", s, 2.9, model__n_layers=10, **block) for s in (0, 1)]
    rows += [trial("block16", s, 2.8, model__n_layers=16, **block) for s in (0, 1)]
    section, _ = main_table(sweep(rows), "base")
    text = " ".join(p.text for p in section.blocks if hasattr(p, "text"))
    assert "`block`: N = 8 AttnRes blocks of 3, 3, 3, 3, 2, 2, 2, 2" in text
    assert "`block16`: N = 8 AttnRes blocks of 4" in text
    assert "`base`" not in text.split("partitions")[1]
