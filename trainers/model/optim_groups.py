"""AdamW's parameter groups: sp's rule (weight decay on weight matrices only) and, under a
parametrization, ``trainers.model.parametrization.group_rules``' multipliers applied to each
parameter's group; and what a parametrized run records of them. Torch only (no Lightning), so
that ``trainers.measure.coordcheck`` steps exactly the run's optimizer without loading Lightning.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from record.schema import optim_metric
from trainers.config import TrainConfig
from trainers.model import parametrization as par
from trainers.model.layers import MLP, Attention
from trainers.model.norms import NORMS
from trainers.model.transformer import DeepTransformer
from trainers.residual.attnres.depth_mixing import DepthMixer


def _no_decay(model: nn.Module) -> set[int]:
    """Vectors and scalars (norm gains and biases), plus what a module lists in its
    ``no_weight_decay`` attribute (AttnRes stores its per-site queries and gains as matrices)."""
    ids = {id(p) for p in model.parameters() if p.ndim < 2}
    for module in model.modules():
        for name in getattr(module, "no_weight_decay", ()):
            ids.add(id(getattr(module, name)))
    return ids


def param_groups(model: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Weight decay on weight matrices only: decaying norms, biases, gains or AttnRes queries
    toward zero would change the wiring, not regularize it."""
    skip = _no_decay(model)
    decay = [p for p in model.parameters() if id(p) not in skip]
    rest = [p for p in model.parameters() if id(p) in skip]
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]


def _group_of(model: DeepTransformer) -> dict[int, str]:
    """Each parameter's parametrization group (``trainers.model.parametrization.GROUPS``) by id: the
    embeddings and the head; the sublayers' matrices and biases; the norms' gains and biases
    (the final norm apart); and the wiring's own, split as sp's weight decay splits them."""
    group: dict[int, str] = {}
    for module in model.modules():
        if isinstance(module, (Attention, MLP)):
            for linear in (m for m in module.modules() if isinstance(m, nn.Linear)):
                group[id(linear.weight)] = par.HIDDEN_WEIGHT
                if linear.bias is not None:
                    group[id(linear.bias)] = par.HIDDEN_BIAS
        if isinstance(module, tuple(NORMS.get(n) for n in NORMS.names())):
            for p in module.parameters():
                group[id(p)] = par.HIDDEN_NORM
    no_decay = _no_decay(model)
    for p in model.parameters():
        wiring = par.WIRING_GAIN if id(p) in no_decay else par.WIRING_WEIGHT
        group.setdefault(id(p), wiring)
    for p in model.final_norm.parameters():
        group[id(p)] = par.OUTPUT_NORM
    embeddings = (model.tok_emb, model.pos_emb, model.head)
    for p in (p for m in embeddings if m is not None for p in m.parameters()):
        group[id(p)] = par.EMBEDDING
    return group


def wiring_parameters(model: DeepTransformer) -> list[nn.Parameter]:
    """The wiring's own parameters (its two groups: AttnRes queries and gains, HC and mHC maps,
    DenseFormer and MUDDFormer weights, ...), in ``model.parameters()`` order."""
    group = _group_of(model)
    own = (par.WIRING_WEIGHT, par.WIRING_GAIN)
    return [p for p in model.parameters() if group[id(p)] in own]


def parametrized_groups(model: DeepTransformer, t: TrainConfig) -> list[dict[str, Any]]:
    """AdamW groups under a parametrization other than sp: ``parametrization.group_rules``'
    multipliers times ``train.lr``, ``train.weight_decay`` and ``ADAM_EPS``, one group per
    rule (empty ones left out), each named."""
    rules = par.group_rules(model.cfg)
    group = _group_of(model)
    out = []
    for name, rule in rules.items():
        params = [p for p in model.parameters() if group[id(p)] == name]
        if params:
            out.append(
                {
                    "params": params,
                    "name": name,
                    "lr": t.lr * rule.lr,
                    "weight_decay": t.weight_decay * rule.weight_decay,
                    "eps": par.ADAM_EPS * rule.eps,
                }
            )
    return out


def optimizer_groups(model: DeepTransformer, t: TrainConfig) -> list[dict[str, Any]]:
    """The one rule for AdamW's parameter groups: sp's two (decayed or not, at ``train.lr``;
    today's, so its optimizer state is unchanged) or the parametrization's; then an
    input-dependent query's own parameters apart, at ``attnres_query_lr`` times their group's
    rate, where that multiplier is not 1."""
    if model.cfg.parametrization == "sp":
        groups = param_groups(model, t.weight_decay)
    else:
        groups = parametrized_groups(model, t)
    return _query_lr(groups, model, t)


def _query_lr(
    groups: list[dict[str, Any]], model: DeepTransformer, t: TrainConfig
) -> list[dict[str, Any]]:
    """``groups`` with the input-dependent query's parameters moved into groups of their own
    (named ``<group>_query`` under a parametrization) at ``attnres_query_lr`` times the rate.
    Adam moves each entry of the d x d projection by about lr a step, so its logits move about d
    times faster than a static query's (issue 27); the multiplier is one way to slow them."""
    mult = model.cfg.attnres_query_lr
    dynamic = {
        id(p) for m in model.modules() if isinstance(m, DepthMixer) for p in m.dynamic_parameters()
    }
    if mult == 1.0 or not dynamic:
        return groups
    out = []
    for g in groups:
        own = [p for p in g["params"] if id(p) in dynamic]
        rest = [p for p in g["params"] if id(p) not in dynamic]
        if rest:
            out.append({**g, "params": rest})
        if own:
            named = {"name": f"{g['name']}_query"} if "name" in g else {}
            out.append({**g, **named, "params": own, "lr": g.get("lr", t.lr) * mult})
    return out


def group_record(groups: list[dict[str, Any]], t: TrainConfig) -> dict[str, float]:
    """What a parametrized run records of its groups (``record.schema.optim_metric``): each
    group's tensors, elements, and lr / weight-decay / eps multipliers."""
    out: dict[str, float] = {}
    for g in groups:
        name, params = g["name"], g["params"]
        out[optim_metric(name, "tensors")] = float(len(params))
        out[optim_metric(name, "params")] = float(sum(p.numel() for p in params))
        out[optim_metric(name, "lr_mult")] = g["lr"] / t.lr
        wd = g["weight_decay"] / t.weight_decay if t.weight_decay else 0.0
        out[optim_metric(name, "wd_mult")] = wd
        out[optim_metric(name, "eps_mult")] = g["eps"] / par.ADAM_EPS
    return out
