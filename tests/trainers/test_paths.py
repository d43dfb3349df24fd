"""Which kernels a run takes (``trainers.training.paths``, ``train.compile``, ``train.depth_path``):
'auto' compiles on a GPU only, a pinned path is what the forward runs or a one-line refusal, and
the record names the path the forward took."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from tests.trainers.conftest import tiny
from trainers.config import RunConfig, TrainConfig
from trainers.config_io import from_dict, parse_overrides
from trainers.model.transformer import DeepTransformer
from trainers.residual.attnres import fused as fused_attnres
from trainers.residual.attnres.depth_buffer import BufferedSources
from trainers.residual.attnres.fused import FusedSources
from trainers.training.paths import pin, refusal, taken, torch_dtype
from trainers.training.run import resolve_compile

BLOCK = tiny(residual="block_attnres", n_layers=2, attnres_blocks=2)


def _run(model: object = BLOCK, **train: object) -> RunConfig:
    return RunConfig(model=model, train=TrainConfig(**train))  # type: ignore[arg-type]


def test_auto_compiles_on_a_gpu_only() -> None:
    cuda = torch.cuda.is_available()
    assert resolve_compile(TrainConfig()) == cuda
    assert not resolve_compile(TrainConfig(accelerator="cpu"))
    assert resolve_compile(TrainConfig(compile="true", accelerator="cpu"))
    assert not resolve_compile(TrainConfig(compile="false"))
    # the fused kernels run eagerly: pinning them keeps 'auto' from compiling
    assert not resolve_compile(TrainConfig(depth_path="fused"))


def test_compile_reads_the_words_and_bools_it_always_took() -> None:
    """A configuration or record from before 'auto' wrote a bool (YAML) or its words."""
    for value, read in ((True, "true"), (False, "false"), ("True", "true"), ("auto", "auto")):
        assert from_dict({"train": {"compile": value}}).train.compile == read
    assert parse_overrides(["train.compile=FALSE"])["train"]["compile"] == "false"
    with pytest.raises(ValueError, match="one of: auto, true, false"):
        from_dict({"train": {"compile": "sometimes"}})


def test_fused_and_compiled_at_once_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match="run eagerly") as err:
        TrainConfig(depth_path="fused", compile="true")
    assert "\n" not in str(err.value)


def test_a_pinned_fused_path_where_the_kernels_cannot_run_is_refused() -> None:
    """On a CPU, or for a switch the kernels do not compute, the refusal is the rule's reason."""
    assert "CUDA only" in refusal(_run(depth_path="fused"), "cpu", "float32")
    assert refusal(_run(depth_path="auto"), "cpu", "float32") == ""
    # nothing to fuse: a campaign pins every arm alike, standard's included
    assert refusal(_run(tiny(), depth_path="fused"), "cpu", "float32") == ""
    with pytest.raises(ValueError, match="depth_path=fused"):
        pin(DeepTransformer(BLOCK), _run(depth_path="fused"), "cpu", "float32")


def _begin(model: DeepTransformer) -> object:
    emb = torch.zeros(1, BLOCK.seq_len, BLOCK.d_model)
    return model.stream.begin(emb).summaries  # type: ignore[operator, union-attr]


def test_the_recorded_path_is_the_one_the_forward_takes() -> None:
    """On a CPU: the buffered path eagerly, its traced form compiled, the direct computation
    with the fast path off; 'fused' pinned builds the fused sources (with the kernels swapped
    for plain torch here, since a CPU cannot run them) and is recorded so."""
    model = DeepTransformer(BLOCK)
    pin(model, _run(depth_path="auto"), "cpu", "float32")
    assert isinstance(_begin(model), BufferedSources)
    assert taken(model, "cpu", "float32", compiled=False).depth_mixing == "buffered"
    assert taken(model, "cpu", "float32", compiled=True).depth_mixing == "stacked"
    model.stream.fused = True  # type: ignore[union-attr]
    model.stream.kernels = (lambda *a: None, lambda *a: None)  # type: ignore[union-attr]
    assert isinstance(_begin(model), FusedSources)
    assert taken(model, "cpu", "float32", compiled=False).depth_mixing == "fused"
    pin(model, _run(depth_path="torch"), "cpu", "float32")
    assert not isinstance(_begin(model), FusedSources)
    assert taken(model, "cpu", "float32", compiled=False).depth_mixing == "buffered"
    model.stream.fast = False  # type: ignore[union-attr]
    assert taken(model, "cpu", "float32", compiled=False).depth_mixing == "plain"
    plain = DeepTransformer(tiny())
    assert taken(plain, "cpu", "float32", compiled=True).depth_mixing == ""


@pytest.fixture(params=[True, False], ids=["package", "no package"])
def importable(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether flash-attn-res imports, as a CUDA machine answers it. The real package is never
    asked here: importing it would put Triton into this process, which the CPU-path tests
    (test_attnres_fused.py) check stays out of it."""
    monkeypatch.setattr(fused_attnres, "available", lambda: request.param)
    return bool(request.param)


def test_on_cuda_in_bfloat16_the_rule_decides_by_the_package(importable: bool) -> None:
    """What 'auto' records where the kernels could run: fused exactly when the package
    imports (the dispatch rule's other conditions hold for the paper's Block AttnRes)."""
    model = DeepTransformer(BLOCK)
    paths = taken(model, "cuda", "bfloat16", compiled=False)
    assert paths.depth_mixing == ("fused" if importable else "buffered")
    assert importable or "not importable" in paths.reason
    assert taken(model, "cuda", "float32", compiled=False).depth_mixing == "buffered"


def test_a_pinned_fused_path_on_cuda_is_refused_for_what_the_kernels_do_not_compute(
    importable: bool,
) -> None:
    """On CUDA the refusal names the package where it does not import, else the switch or
    the dtype the kernels do not compute."""
    gated = dataclasses.replace(BLOCK, attnres_gate="sigmoid")
    gate = refusal(_run(gated, depth_path="fused"), "cuda", "bfloat16")
    fp32 = refusal(_run(depth_path="fused"), "cuda", "float32")
    if importable:
        assert "attnres_gate" in gate and "bfloat16" in fp32
        assert refusal(_run(depth_path="fused"), "cuda", "bfloat16") == ""
    else:
        assert "not importable" in gate and "not importable" in fp32


def test_torch_dtype_names_what_each_precision_multiplies_in() -> None:
    names = {p: torch_dtype(p) for p in ("bf16-mixed", "bf16-true", "16-mixed", "32-true")}
    assert names == {
        "bf16-mixed": "bfloat16",
        "bf16-true": "bfloat16",
        "16-mixed": "float16",
        "32-true": "float32",
    }
    assert torch_dtype("64-true") == "float64"


def test_a_run_records_its_paths_and_kernel_versions(tmp_path: Path) -> None:
    """``train`` on a CPU: eager (auto), Block AttnRes's buffered path, torch's version."""
    from trainers.training.run import train

    cfg = from_dict(
        {
            "model": {
                "residual": "block_attnres",
                "d_model": 16,
                "n_heads": 2,
                "n_layers": 2,
                "attnres_blocks": 2,
            },
            "train": {"max_steps": 2, "val_every": 2, "batch_size": 2, "accelerator": "cpu"},
            "data": {"source": "synthetic"},
        }
    )
    result, _ = train(cfg, tmp_path, progress=False)
    assert result.paths is not None
    assert not result.paths.compiled and result.paths.depth_mixing == "buffered"
    assert result.paths.versions["torch"] == torch.__version__
