"""Activation checkpointing (``train.checkpointing``): which parts of the model a training
step recomputes in its backward instead of keeping their activations from the forward.

``sublayer`` checkpoints every sublayer's branch (input norm, attention or MLP, output norm:
``trainers.model.transformer.Branch``), which holds most of a block's activations (the attention's
queries, keys, values and scores, the MLP's hidden layer). The wiring's own state (the running sum,
the sources of a depth softmax, parallel streams) stays outside: sites append to it as the forward
goes, so a recomputed block would see it grown, and the buffered AttnRes path writes it into
preallocated buffers outside autograd. What that state costs is the memory plan's depth term.
"""

from __future__ import annotations

from torch import nn

from trainers.config import Checkpointing


def enable_checkpointing(model: nn.Module, how: Checkpointing) -> int:
    """Mark the branches ``how`` names for recomputation; return how many were marked."""
    from trainers.model.transformer import Branch

    if how == "none":
        return 0
    branches = [m for m in model.modules() if isinstance(m, Branch)]
    for branch in branches:
        branch.checkpointed = True
    return len(branches)
