"""A checkpoint's one upgrade step at load (``trainers.upgrade``): every checkpoint the module
writes names the current version, and upgrading it changes nothing; a version-1 checkpoint (the
kept one of c297def, ``data/attnres_old_layout.ckpt``) comes out as the current module would
have written the same state: its weights under the current names, its steps counted in the
manual loop. Upgrading twice is upgrading once. (That the upgraded old checkpoint resumes to
the right weights and moments is ``test_attnres_layout``'s.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainers.callbacks import SaveAtStep
from tests.trainers.data.make_attnres_old_layout import RESUMED
from trainers.config import flatten
from trainers.config_io import from_dict, nest
from trainers.training.module import LanguageModelModule
from trainers.training.run import train
from trainers.upgrade import (
    CHECKPOINT_VERSION,
    FIRST_VERSION,
    STEPS,
    VERSION_KEY,
    checkpoint_version,
    upgrade_checkpoint,
    upgrade_state_dict,
)

OLD = Path(__file__).parent / "data" / "attnres_old_layout.ckpt"
MANUAL = "epoch_loop.manual_optimization.optim_step_progress"


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same entries, each the very object (tensors are never copied)."""
    return a.keys() == b.keys() and all(a[k] is b[k] for k in a)


@pytest.fixture(scope="module")
def current(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A checkpoint the module writes today (the old one's run, 2 steps, saved at step 2)."""
    out = tmp_path_factory.mktemp("ckpt")
    run = {**RESUMED, "train": {**RESUMED["train"], "max_steps": 2, "val_every": 2}}
    train(from_dict(run), out, callbacks=[SaveAtStep(2, out / "c.ckpt")], progress=False)
    ckpt: dict[str, Any] = torch.load(out / "c.ckpt", weights_only=True)
    return ckpt


def test_every_version_below_the_current_one_has_its_step() -> None:
    """The chain reaches ``CHECKPOINT_VERSION`` from every version there has been; a version
    no harness wrote is refused in one line."""
    assert sorted(STEPS) == list(range(FIRST_VERSION, CHECKPOINT_VERSION))
    for bad in (0, "2", True):
        with pytest.raises(ValueError, match=r"^nas_checkpoint_version .*: not a checkpoint"):
            upgrade_checkpoint({VERSION_KEY: bad})


def test_the_module_writes_the_current_version_and_upgrading_it_changes_nothing(
    current: dict[str, Any],
) -> None:
    """Version and content: the upgrade of a current checkpoint holds the same entries, the
    weights the same tensors under the same names, the loops equal."""
    assert checkpoint_version(current) == CHECKPOINT_VERSION
    out = upgrade_checkpoint(current)
    assert _same(out, current)
    assert _same(upgrade_state_dict(current["state_dict"]), current["state_dict"])


def test_an_old_checkpoint_upgrades_to_the_current_shape() -> None:
    """c297def's checkpoint (no version, nested AttnRes names, the steps in the automatic
    loop): its weights under exactly the names the current module built from its own
    hyperparameters has, each tensor the one it held; the manual loop counts its 4 steps; and
    it is marked current."""
    old: dict[str, Any] = torch.load(OLD, weights_only=True)
    assert checkpoint_version(old) == FIRST_VERSION
    out = upgrade_checkpoint(old)
    module = LanguageModelModule(from_dict(nest(dict(old["hyper_parameters"]))))
    assert out["state_dict"].keys() == module.state_dict().keys()
    assert sorted(id(t) for t in out["state_dict"].values()) == sorted(
        id(t) for t in old["state_dict"].values()
    )
    assert out["loops"]["fit_loop"][MANUAL]["total"]["completed"] == old["global_step"] == 4
    assert out[VERSION_KEY] == CHECKPOINT_VERSION
    # the stored dict is not changed: upgrading is a pure function
    assert old["loops"]["fit_loop"][MANUAL]["total"]["completed"] == 0
    assert "model.stream.sites.score.queries" in old["state_dict"]


def test_an_unread_field_a_sweep_gave_an_old_checkpoint_reads_as_its_default() -> None:
    """Before unread fields took their default, a sweep's grid could give an AttnRes trial
    DenseFormer's period; its hyperparameters hold it, and a ``ModelConfig`` now refuses that.
    Upgraded, they build the model the trial trained, as the current writer records it."""
    old: dict[str, Any] = torch.load(OLD, weights_only=True)
    expected = from_dict(nest(dict(old["hyper_parameters"])))
    given = {**old, "hyper_parameters": {**old["hyper_parameters"], "model.dense_period": 2}}
    with pytest.raises(ValueError, match="dense_period"):
        from_dict(nest(dict(given["hyper_parameters"])))
    out = upgrade_checkpoint(given)
    assert from_dict(nest(dict(out["hyper_parameters"]))) == expected
    current = flatten(expected)  # what the current writer records (fields newer than it aside)
    assert out["hyper_parameters"] == {k: current[k] for k in out["hyper_parameters"]}


def test_upgrading_twice_is_upgrading_once() -> None:
    """The upgraded old checkpoint is current: a second upgrade keeps every entry."""
    once = upgrade_checkpoint(torch.load(OLD, weights_only=True))
    twice = upgrade_checkpoint(once)
    assert _same(twice, once)
    assert _same(upgrade_state_dict(once["state_dict"]), once["state_dict"])


def test_a_version_2_checkpoints_compile_switch_reads_as_the_word_it_meant() -> None:
    """Version 2 wrote ``train.compile`` as a bool; upgraded, it is 'true' or 'false' (what
    the run did), never 'auto', and the configuration builds from it."""
    for value, word in ((True, "true"), (False, "false")):
        hparams = {"train.compile": value, "train.lr": 0.001}
        out = upgrade_checkpoint({VERSION_KEY: 2, "hyper_parameters": hparams})
        assert out["hyper_parameters"] == {"train.compile": word, "train.lr": 0.001}
        assert out[VERSION_KEY] == CHECKPOINT_VERSION
        assert from_dict(nest(dict(out["hyper_parameters"]))).train.compile == word


def test_an_old_checkpoint_is_upgraded_on_disk_before_any_strategy_reads_it(
    tmp_path: Path,
) -> None:
    """``trainers.training.resume.current``: what ``train`` hands Lightning is a current
    checkpoint whatever strategy loads it (a sharded one loads the weights before the module's
    hook could rename them): the version-1 file comes back as a copy at the current version
    with the flat names, the original untouched; a current file comes back as itself."""
    from trainers.training.resume import current, version_of

    before = OLD.read_bytes()
    copy = current(OLD, tmp_path)
    assert copy != OLD and copy.parent == tmp_path and OLD.read_bytes() == before
    assert version_of(OLD) == 1 and version_of(copy) == CHECKPOINT_VERSION
    old = torch.load(OLD, weights_only=True)["state_dict"]
    new = torch.load(copy, weights_only=True)["state_dict"]
    # the renames written out by hand: nested mixing parameters flattened (issue 24)
    flat = {k.replace("score.keys.", "").replace("score.", ""): v for k, v in old.items()}
    assert new.keys() == flat.keys() and "model.stream.sites.queries" in new
    assert all(torch.equal(new[k], flat[k]) for k in flat)
    assert current(copy, tmp_path / "again") == copy and not (tmp_path / "again").exists()
