"""The model: the Transformer (``transformer``), its sublayers, norms and placements, its
parametrizations and the AdamW groups they set (``optim_groups``), its loss, activation
checkpointing and decoding. Its wirings live beside it, in ``trainers.residual`` and
``trainers.attention``."""
