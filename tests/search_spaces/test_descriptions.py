"""The built-in spaces' one-line descriptions (what ``nas spaces`` lists) keep the two kinds of
block apart: a count of Transformer blocks is "layers" (``n_layers``), a count of AttnRes blocks
is "N = ... AttnRes blocks", and a space that runs Block AttnRes states the N it runs."""

from __future__ import annotations

import re

import pytest

from search_spaces import BUILTIN, Space
from search_spaces.distributions import Choice
from trainers.config import MODEL_DEFAULTS

BLOCK = "block_attnres"
N_KEY = "model.attnres_blocks"
QUALIFIERS = ("AttnRes", "Transformer")  # the only words a description may put before "blocks"
STATED_N = re.compile(r"\bN = (\d+(?:, \d+)*)")


def _derived(space: Space) -> bool:
    """A tuned variant, described by the name of the space it reruns (whose line states N)."""
    base = space.name.removesuffix("_tuned")
    return base != space.name and base in BUILTIN


def _runs_block(space: Space) -> bool:
    residual = space.params.get("model.residual")
    sampled = isinstance(residual, Choice) and BLOCK in residual.values
    arms = [{**space.base, **a} for a in space.arms.values()] or [dict(space.base)]
    return sampled or any(a.get("model.residual") == BLOCK for a in arms)


def _n_run(space: Space) -> set[int]:
    """The N of every Block AttnRes configuration the space runs."""
    base = space.base.get(N_KEY, MODEL_DEFAULTS["attnres_blocks"])
    arms = [{**space.base, **a} for a in space.arms.values()]
    found = {int(a.get(N_KEY, base)) for a in arms if a.get("model.residual") == BLOCK}
    residual = space.params.get("model.residual")
    if isinstance(residual, Choice) and BLOCK in residual.values:
        found.add(int(base))
    return found


@pytest.mark.parametrize("name", list(BUILTIN))
def test_no_description_counts_unqualified_blocks(name: str) -> None:
    """Every "block"/"blocks" a description writes in lower case is an "AttnRes block" or a
    "Transformer block": "Block AttnRes at 8 blocks" could mean either."""
    description = BUILTIN[name].description
    for before in re.findall(r"(\S+) blocks?\b", description):
        assert before in QUALIFIERS, (name, before, description)


@pytest.mark.parametrize("name", [n for n, s in BUILTIN.items() if _runs_block(s)])
def test_a_space_running_block_attnres_states_its_n(name: str) -> None:
    """A space with Block AttnRes arms (or sampling it) says the N it runs, as "N = 4" or
    "N = 1, 2, 4", and the N it says is the N its configurations have; a tuned variant names
    the space it reruns, whose description does."""
    space = BUILTIN[name]
    if _derived(space):
        assert space.name.removesuffix("_tuned") in space.description
        space = BUILTIN[space.name.removesuffix("_tuned")]
    stated = {int(n) for group in STATED_N.findall(space.description) for n in group.split(", ")}
    assert stated == _n_run(space), (name, space.description)
    assert "AttnRes blocks" in space.description, name
