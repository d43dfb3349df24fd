"""The parametrizations: every one is bitwise the standard parametrization at base sizes (logits
and one AdamW step, float64), each parameter group's lr / weight decay / eps is the published
formula at two widths and two depths (computed here from the formulas, not from the code), the
hidden init and the branch multiplier scale as they say, and bad values are refused."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from record.schema import optim_metric
from tests.trainers.conftest import tiny
from trainers import catalogue
from trainers.config import ModelConfig, TrainConfig
from trainers.model.transformer import DeepTransformer
from trainers.training.module import group_record, lm_loss, optimizer_groups

SCALED = ("mup", "depth_mup", "completep")
TRAIN = TrainConfig(lr=3e-3, weight_decay=0.1)
EPS = 1e-8  # torch AdamW's default: sp's epsilon


def _scaled(cfg: ModelConfig, name: str, **fields: object) -> ModelConfig:
    """``cfg`` under parametrization ``name`` with those of ``fields`` it reads (base_depth and
    depth_alpha are refused where unread)."""
    unread = {"mup": ("base_depth", "depth_alpha"), "depth_mup": ("depth_alpha",)}.get(name, ())
    kept = {k: v for k, v in fields.items() if k not in unread}
    return dataclasses.replace(cfg, parametrization=name, **kept)  # type: ignore[arg-type]


def _model(cfg: ModelConfig) -> DeepTransformer:
    torch.manual_seed(0)
    return DeepTransformer(cfg).double()


def _batch(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg.vocab_size, (3, cfg.seq_len + 1), generator=g)
    return idx[:, :-1], idx[:, 1:]


def _stepped(cfg: ModelConfig) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The logits at init and the parameters after one AdamW step on a fixed batch."""
    model = _model(cfg)
    x, y = _batch(cfg)
    logits = model(x)
    opt = torch.optim.AdamW(optimizer_groups(model, TRAIN), lr=TRAIN.lr, betas=(0.9, 0.95))
    lm_loss(logits, y).backward()
    opt.step()
    return logits.detach(), {n: p.detach().clone() for n, p in model.named_parameters()}


BASE_CELLS: list[dict[str, object]] = [
    {},
    {"bias": True, "norm": "layernorm", "pos": "learned", "tie_embeddings": False},
    *(
        {"residual": w.name}
        for w in catalogue.WIRINGS
        if w.name != "standard" and len(w.parametrizations) > 1
    ),
]
CASES = [
    (name, extra)
    for extra in BASE_CELLS
    for name in SCALED
    if name in catalogue.wiring(str(extra.get("residual", "standard"))).parametrizations
]


@pytest.mark.parametrize(("name", "extra"), CASES, ids=lambda v: str(v))
def test_every_parametrization_is_bitwise_sp_at_base_sizes(name: str, extra: dict) -> None:
    """At base_width = d_model and base_depth = n_layers, the logits at init and every
    parameter after one AdamW step are bitwise sp's: plain pre-norm (also with biases,
    LayerNorm, learned positions and an untied head) and every wiring a parametrization runs
    with."""
    sp = tiny(n_layers=3, **extra)
    cfg = _scaled(sp, name, base_width=sp.d_model, base_depth=sp.n_layers)
    sp_logits, sp_params = _stepped(sp)
    logits, params = _stepped(cfg)
    assert torch.equal(logits, sp_logits)
    assert params.keys() == sp_params.keys()
    for key, value in params.items():
        assert torch.equal(value, sp_params[key]), key


@pytest.mark.parametrize("name", SCALED)
def test_off_base_sizes_the_model_is_not_sp(name: str) -> None:
    """The bitwise test above can fail: away from the base width the logits differ."""
    sp = tiny(n_layers=3)
    cfg = _scaled(sp, name, base_width=8, base_depth=sp.n_layers)
    assert not torch.equal(_stepped(cfg)[0], _stepped(sp)[0])


def _expected_group(param: str) -> str:
    """The published rules' group of a parameter, by its name in the plain pre-norm model."""
    if param.startswith(("tok_emb", "pos_emb", "head")):
        return "embedding"
    if param.startswith("final_norm"):
        return "output_norm"
    if param.endswith(("qkv.weight", "proj.weight", "fc_in.weight", "fc_out.weight")):
        return "hidden_weight"
    if param.endswith(("qkv.bias", "proj.bias", "fc_in.bias", "fc_out.bias")):
        return "hidden_bias"
    assert "norm_in" in param, param
    return "hidden_norm"


def _published(name: str, group: str, m_w: float, m_l: float, alpha: float) -> tuple[float, ...]:
    """(lr, weight decay, eps) of ``group`` from the formulas: Dey et al. 2025, Table 1 and eq.
    40 (depth_mup: alpha = 1/2); muP: Tensor Programs V with nanoGPT-mup's groups (no depth
    factor, weight decay unscaled)."""
    lr, wd = TRAIN.lr, TRAIN.weight_decay
    if name == "mup":
        m_l, alpha = 1.0, 0.0
    outer = {"embedding": (lr, wd, EPS / m_w), "output_norm": (lr, 0.0, EPS / m_w)}
    if group in outer:
        return outer[group]
    eps = EPS / m_w * m_l ** (-alpha)
    if group == "hidden_weight":
        hidden_wd = wd if name == "mup" else wd * m_w
        return (lr / m_w * m_l ** (alpha - 1), hidden_wd, eps)
    return (lr * m_l ** (alpha - 1), 0.0, eps)


SIZES = [(d, layers) for d in (16, 64) for layers in (2, 8)]


@pytest.mark.parametrize(("d_model", "n_layers"), SIZES)
@pytest.mark.parametrize("name", SCALED)
def test_group_settings_equal_the_published_formulas(
    name: str, d_model: int, n_layers: int
) -> None:
    """Every parameter's AdamW lr, weight decay and eps are the formulas' at base width 32 and
    base depth 4, with biases and LayerNorm (every group present) and CompleteP at alpha 3/4."""
    sized = tiny(d_model=d_model, n_layers=n_layers, bias=True, norm="layernorm")
    cfg = _scaled(sized, name, base_width=32, base_depth=4, depth_alpha=0.75)
    alpha = {"mup": 0.0, "depth_mup": 0.5, "completep": 0.75}[name]
    m_w, m_l = d_model / 32, n_layers / 4
    model = _model(cfg)
    groups = optimizer_groups(model, TRAIN)
    settings = {id(p): (g["lr"], g["weight_decay"], g["eps"]) for g in groups for p in g["params"]}
    names = dict(model.named_parameters())
    assert len(settings) == len(names)  # every parameter in exactly one group
    for param, p in names.items():
        want = _published(name, _expected_group(param), m_w, m_l, alpha)
        assert settings[id(p)] == pytest.approx(want, rel=1e-12), param


@pytest.mark.parametrize("n_layers", [2, 8])
def test_a_wirings_own_parameters_take_the_norm_gains_rule(n_layers: int) -> None:
    """mHC's maps (matrices sp decays) and its b_res (listed no-decay): lr · m_L^(alpha-1),
    hidden eps; weight decay as sp's, wd on the maps and none on b_res."""
    cfg = _scaled(
        tiny(n_layers=n_layers, d_model=32, residual="mhc", hc_streams=2),
        "completep",
        base_width=16,
        base_depth=4,
        depth_alpha=0.5,
    )
    model = _model(cfg)
    m_w, m_l = 2.0, n_layers / 4
    settings = {
        id(p): (g["lr"], g["weight_decay"], g["eps"])
        for g in optimizer_groups(model, TRAIN)
        for p in g["params"]
    }
    site = model.blocks[0].attn_site
    maps = [p for n, p in site.named_parameters() if p.ndim == 2 and "b_res" not in n]
    assert maps and hasattr(site, "b_res")
    lr, eps = TRAIN.lr * m_l**-0.5, EPS / m_w * m_l**-0.5
    for p in maps:
        assert settings[id(p)] == pytest.approx((lr, TRAIN.weight_decay, eps), rel=1e-12)
    assert settings[id(site.b_res)] == pytest.approx((lr, 0.0, eps), rel=1e-12)


def test_the_group_record_counts_and_multipliers() -> None:
    """The record of a parametrized run's groups: tensors, elements and the multipliers."""
    cfg = tiny(d_model=32, n_layers=4, parametrization="completep", base_width=16, base_depth=2)
    model = _model(cfg)
    record = group_record(optimizer_groups(model, TRAIN), TRAIN)
    hidden = [p for n, p in model.named_parameters() if n.endswith("weight") and p.ndim == 2]
    hidden = [p for p in hidden if p is not model.tok_emb.weight]
    assert record[optim_metric("hidden_weight", "tensors")] == len(hidden) == 4 * 4
    assert record[optim_metric("hidden_weight", "params")] == sum(p.numel() for p in hidden)
    assert record[optim_metric("hidden_weight", "lr_mult")] == pytest.approx(0.5)  # 1/m_w, alpha 1
    assert record[optim_metric("hidden_weight", "wd_mult")] == pytest.approx(2.0)
    assert record[optim_metric("hidden_norm", "eps_mult")] == pytest.approx(0.5 * 0.5)
    assert record[optim_metric("embedding", "tensors")] == 1  # the head is the tied embedding


def test_hidden_init_variance_shrinks_with_width() -> None:
    """Hidden matrices draw from N(0, init_std² / m_w), the embedding from N(0, init_std²):
    at m_w = 4 the sample std of 128·384 entries is within 1% (its standard error is
    std/sqrt(2n) ≈ 0.3%) of init_std/2."""
    cfg = tiny(d_model=128, n_heads=4, parametrization="mup", base_width=32, scaled_init=False)
    model = _model(cfg)
    qkv = model.blocks[0].attn.layer.qkv.weight
    assert qkv.std().item() == pytest.approx(cfg.init_std / 2, rel=0.01)
    assert model.tok_emb.weight.std().item() == pytest.approx(cfg.init_std, rel=0.05)


def test_branch_multiplier_and_scaled_init_at_depth() -> None:
    """CompleteP at m_L = 4 multiplies every branch by 1/4 and keeps the GPT-2 output init at
    base depth; Depth-µP's multiplier is 1/2; mup has none."""
    cfg = tiny(n_layers=8, parametrization="completep", base_width=16, base_depth=2)
    block = DeepTransformer(cfg).blocks[0]
    assert block.attn.out_scale == block.mlp.out_scale == 0.25
    half = DeepTransformer(_scaled(cfg, "depth_mup")).blocks[0]
    assert half.mlp.out_scale == 0.5
    width_only = dataclasses.replace(cfg, parametrization="mup", base_depth=4)
    assert DeepTransformer(width_only).blocks[0].mlp.out_scale == 1
    from trainers.model.parametrization import output_init_std

    assert output_init_std(cfg) == pytest.approx(cfg.init_std / math.sqrt(4))


def test_attention_scale_is_one_over_d_head_relative_to_the_base_head() -> None:
    """1/sqrt(d_head) at the base head size (None: SDPA's own), sqrt(d_base)/d_head elsewhere."""
    from trainers.model.parametrization import attention_scale

    assert attention_scale(tiny(parametrization="mup", base_width=16)) is None
    cfg = tiny(d_model=64, parametrization="mup", base_width=16)  # d_head 32, base 8
    assert attention_scale(cfg) == pytest.approx(math.sqrt(8) / 32)
    assert attention_scale(dataclasses.replace(cfg, parametrization="sp", base_width=128)) is None


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"parametrization": "ntk"}, "model.parametrization: 'ntk' is not allowed"),
        ({"parametrization": "mup", "base_width": 0}, "model.base_width: 0 is too small"),
        ({"parametrization": "completep", "base_depth": 0}, "model.base_depth: 0 is too small"),
        ({"parametrization": "completep", "depth_alpha": 0.4}, "model.depth_alpha: 0.4"),
        ({"parametrization": "completep", "residual": "attnres"}, "fails the coord check"),
        ({"parametrization": "mup", "residual": "rezero"}, "residual 'rezero' is not yet checked"),
        ({"parametrization": "mup", "placement": "post"}, "placement 'post' is not yet checked"),
        ({"parametrization": "mup", "norm_scaling": "lns"}, "norm_scaling 'lns' is not yet"),
        ({"base_width": 64}, "model.base_width: 64 applies to parametrization other than 'sp'"),
        ({"parametrization": "mup", "depth_alpha": 0.5}, "applies to parametrization 'completep'"),
    ],
)
def test_bad_parametrization_settings_are_refused(overrides: dict, words: str) -> None:
    """Each bad value or unchecked combination is one ValueError naming the field."""
    with pytest.raises(ValueError, match="") as err:
        tiny(**overrides)
    assert words in str(err.value)


def test_docs_carry_the_parametrization_table() -> None:
    """docs/variants.md's parametrization x residual table is the catalogue's decisions."""

    docs = Path(__file__).resolve().parents[2] / "docs" / "variants.md"
    assert catalogue.parametrizations_markdown() in docs.read_text()


def test_a_parametrized_fit_records_its_groups(tmp_path: Path) -> None:
    """A real Lightning fit under CompleteP logs each group's record once, at step 0, through
    the run's logger (CSV here, MLflow in a sweep): m_w = 2, m_L = 2, alpha 1."""
    import csv

    from trainers.config_io import from_dict
    from trainers.training.run import train

    model = {"d_model": 32, "n_heads": 2, "n_layers": 2, "seq_len": 16}
    model |= {"parametrization": "completep", "base_width": 16, "base_depth": 1}
    train_ = {"batch_size": 4, "max_steps": 3, "val_every": 3, "val_batches": 1}
    train_ |= {"warmup_steps": 1, "accelerator": "cpu", "diagnostics_every": 0}
    data = {"source": "synthetic", "hops": 1, "n_symbols": 8}
    train(from_dict({"model": model, "train": train_, "data": data}), tmp_path, progress=False)
    rows = list(csv.DictReader((tmp_path / "metrics.csv").open()))
    logged = [r for r in rows if r.get(optim_metric("hidden_weight", "lr_mult"))]
    assert len(logged) == 1 and logged[0]["step"] == "0"
    assert float(logged[0][optim_metric("hidden_weight", "lr_mult")]) == pytest.approx(0.5)
    assert float(logged[0][optim_metric("hidden_weight", "wd_mult")]) == pytest.approx(2.0)
    assert float(logged[0][optim_metric("hidden_norm", "eps_mult")]) == pytest.approx(0.25)
