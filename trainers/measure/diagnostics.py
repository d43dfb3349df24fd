"""Dilution diagnostics: what depth does to the residual stream, measured per block.

``dilution_profile(model, idx, targets)`` is pure measurement: it runs its own forward (and, with
targets, a backward through ``torch.autograd.grad``) in eval mode and float32, and leaves the
model's outputs, mode and parameters' ``.grad`` as they were. Definitions as in
``docs/diagnostics.md`` (its per-block table); every norm is a mean over tokens of a per-token L2
norm.

Per block l (0-based), with x_l the input the block's attention sublayer actually reads (the
running sum for a plain residual, the mixed input for AttnRes, the read-out A_m^T H for
Hyper-Connections) and u_l = y_attn + y_mlp the block's two sublayer outputs. A sublayer output y
is what the branch emits (the sublayer with its placement's norms), before any scalar the wiring
applies when writing it back (ReZero's alpha, HC's B, AttnRes's weights), so it is comparable
across wirings:

- ``output_norm[l]`` = mean ||u_l||  (the AttnRes paper's "output magnitude", Fig. 5b)
- ``sublayer_output_norm[2l + k]`` = mean ||y||  of each sublayer (k = 0 attention, 1 MLP)
- ``stream_norm[l]`` = mean ||x_l||, the actual input ("input" stream)
- ``virtual_stream_norm[l]`` = mean ||e + sum of all earlier sublayer outputs||, the running sum
  a plain residual would carry (identical to ``stream_norm`` for standard pre-norm)
- ``update_ratio[l]`` = mean ||u_l|| / ||x_l||
- ``adjacent_cosine[l]`` = mean over sequences of cos(r_l[T], r_{l+1}[T]) at the last token,
  with r_0..r_{L-1} the block inputs and r_L what the final norm sees; ``angular_distance`` =
  arccos(cos) / pi (Gromov et al. 2024)
- ``grad_norm[l]`` = ||d loss / d theta_l|| over block l's parameters; ``act_grad_norm[l]`` =
  mean over tokens of ||d loss / d x_l||   (targets only)
- ``effective_rank`` at the first, middle and last block input (Roy & Vetterli 2007): exp of the
  entropy of the normalized singular values of each sequence's (T, d) matrix, averaged
- ``depth_weights[site, source]``: AttnRes softmax weights (sites in sublayer order, the output
  site last), averaged over tokens, or DenseFormer's per-block weights (free scalars); NaN where a
  site has no such source. For AttnRes only: ``depth_entropy`` = H(a) / log(#sources) per site
  (1 = uniform, NaN for a single source) and ``embedding_weight`` = the weight on source 0
- ``stream_read`` / ``stream_mix``: Hyper-Connections' A_m / A_r, mHC's H_pre / H_res
- ``routing_entropy``, ``routing_top1``, ``routing_sources``, ``routing_spread``,
  ``routing_margin``, ``routing_collapsed`` per site: the mixing weights' normalized entropy,
  top-1 mass, effective number of sources, largest logit spread, runner-up margin (top logit
  minus the runner-up's) and collapsed share (the tokens whose top-1 mass exceeds
  ``collapse_threshold``, train.routing_alarm, while the runner-up is more than
  ``stats.routing.SATURATED`` nats down), each computed per token and then averaged
  (``stats.routing``), over the depth weights' sites, or over the rows of HC's / mHC's
  stream-mixing matrix for those wirings; the spread, margin and collapsed share only where
  the weights are a softmax (NaN elsewhere)
- ``wiring_grad_share`` = ||d loss / d theta_wiring|| / ||d loss / d theta|| over the wiring's
  own parameters (``optim_groups.wiring_parameters``) against all of them   (targets only)
- ``removal_delta[l]`` = loss with block l's outputs set to zero - loss   (optional, targets only)
- ``source_importance[site, source]`` = loss with that source left out of that site's softmax
  mixing, the other weights renormalized, - loss: the source's causal importance, which its
  weight need not rank the same way (optional, targets and a depth softmax only; NaN where the
  site has no such source or only one)

A model gone non-finite (a diverged run) is measured without raising: ``finite`` is False and every
entry that a NaN or infinity reaches is NaN (or infinite), as are the summaries built on them.
"""

from __future__ import annotations

import itertools
import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from record.schema import Metric
from trainers.config import ROUTING_ALARM
from trainers.model.optim_groups import wiring_parameters
from trainers.model.transformer import Block, DeepTransformer
from trainers.residual import probe
from trainers.residual.probe import Mixing, mixing_probe

Array = np.ndarray


@dataclass
class DilutionProfile:
    """Per-block measurements; see the module docstring for each definition."""

    n_layers: int
    output_norm: Array
    sublayer_output_norm: Array
    stream_norm: Array
    virtual_stream_norm: Array
    update_ratio: Array
    adjacent_cosine: Array
    angular_distance: Array
    erank_depths: Array
    effective_rank: Array
    grad_norm: Array | None = None
    act_grad_norm: Array | None = None
    loss: float | None = None
    depth_weights: Array | None = None
    depth_entropy: Array | None = None
    embedding_weight: Array | None = None
    stream_read: Array | None = None
    stream_mix: Array | None = None
    removal_delta: Array | None = None
    source_importance: Array | None = None
    routing_entropy: Array | None = None
    routing_top1: Array | None = None
    routing_sources: Array | None = None
    routing_spread: Array | None = None
    routing_margin: Array | None = None
    routing_collapsed: Array | None = None
    collapse_threshold: float | None = None  # the top-1 mass routing_collapsed was counted at
    wiring_grad_share: float | None = None
    finite: bool = True  # False: a weight or an activation (logits included) was NaN or infinite
    extra: dict[str, Any] = field(default_factory=dict)

    def summaries(self) -> dict[str, float]:
        """Scalars that make a depth pathology readable at a glance (MLflow metric names):

        - ``dilution/stream_growth`` = stream_norm[-1] / stream_norm[1]
        - ``dilution/virtual_stream_growth`` = virtual_stream_norm[-1] / virtual_stream_norm[1]

          Both from the second block's input, not the first: the first is the raw embedding,
          whose scale is set by its own init (0.02 * sqrt(d)) and not by the wiring; from it,
          post-norm would show a large "growth" that is only its first norm. With one block the
          reference is the first input.
        - ``dilution/output_growth`` = output_norm[-1] / output_norm[0]
        - ``dilution/min_update_ratio`` = min over blocks of update_ratio
        - ``dilution/deep_cosine`` = mean adjacent_cosine over the last third of the blocks
        - ``dilution/grad_front_load`` = mean grad_norm over the first third of the blocks /
          mean over the last third (targets only)
        - ``dilution/depth_entropy`` = mean normalized depth-attention entropy over sites, and
          ``dilution/embedding_weight`` = mean weight on the embedding (AttnRes only)
        - ``dilution/erank_last`` = effective rank of the last block's input
        - ``dilution/routing_entropy`` = mean over sites of the per-token normalized entropy
          (``dilution/depth_entropy`` is the entropy of the token-averaged weights, which hides
          a site that reads one source per token); ``dilution/routing_entropy_min``,
          ``dilution/routing_top1_max``, ``dilution/routing_spread_max``,
          ``dilution/routing_margin_max`` and ``dilution/routing_collapsed_max`` = the worst
          site's. Sites with one source are left out (their top-1 mass is 1 by construction)
        - ``dilution/wiring_grad_share`` = the wiring's share of the gradient norm (targets
          only, wirings with parameters of their own)

        NaN where the profile's entries are (a model gone non-finite), without warnings.
        """
        with _quiet_nan():
            return self._summaries()

    def _summaries(self) -> dict[str, float]:
        third = max(1, self.n_layers // 3)
        ref = min(1, self.n_layers - 1)
        out = {
            "dilution/stream_growth": _ratio(self.stream_norm[-1], self.stream_norm[ref]),
            "dilution/virtual_stream_growth": _ratio(
                self.virtual_stream_norm[-1], self.virtual_stream_norm[ref]
            ),
            "dilution/output_growth": _ratio(self.output_norm[-1], self.output_norm[0]),
            "dilution/min_update_ratio": float(np.min(self.update_ratio)),
            "dilution/deep_cosine": float(np.mean(self.adjacent_cosine[-third:])),
            "dilution/erank_last": float(self.effective_rank[-1]),
        }
        if self.grad_norm is not None:
            out["dilution/grad_front_load"] = _ratio(
                np.mean(self.grad_norm[:third]), np.mean(self.grad_norm[-third:])
            )
        if self.depth_entropy is not None and self.embedding_weight is not None:
            out["dilution/depth_entropy"] = float(np.nanmean(self.depth_entropy))
            out["dilution/embedding_weight"] = float(np.nanmean(self.embedding_weight))
        out |= self._routing_summaries()
        if self.wiring_grad_share is not None:
            out[Metric.WIRING_GRAD_SHARE] = self.wiring_grad_share
        return out

    def _routing_summaries(self) -> dict[str, float]:
        if self.routing_top1 is None or self.routing_entropy is None:
            return {}
        many = ~np.isnan(self.routing_entropy)  # NaN entropy: a site with one source
        if not many.any():
            return {}
        out = {
            Metric.ROUTING_ENTROPY: float(np.mean(self.routing_entropy[many])),
            Metric.ROUTING_ENTROPY_MIN: float(np.min(self.routing_entropy[many])),
            Metric.ROUTING_TOP1_MAX: float(np.max(self.routing_top1[many])),
        }
        softmax = (
            (Metric.ROUTING_SPREAD_MAX, self.routing_spread),
            (Metric.ROUTING_MARGIN_MAX, self.routing_margin),
            (Metric.ROUTING_COLLAPSED_MAX, self.routing_collapsed),
        )
        for name, values in softmax:  # NaN at every site: free weights, no logits
            if values is not None and not np.isnan(values[many]).all():
                out[name] = float(np.nanmax(values[many]))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: arrays as nested lists (NaN as None), so reports can overlay trials."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            out[f.name] = _jsonable(v)
        out["summaries"] = _jsonable(self.summaries())
        return out


def _ratio(a: float, b: float) -> float:
    return float(a) / float(b) if b > 0 else math.nan


@contextmanager
def _quiet_nan() -> Any:
    """NumPy's warnings off for NaN and infinite entries (inf / inf, the mean of all-NaN): they
    are expected in a diverged run's profile, and the result already says NaN."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return [_jsonable(x) for x in v.tolist()] if v.ndim else _jsonable(v.item())
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def _token_norm(x: Tensor) -> Tensor:
    """Mean over tokens of the per-token L2 norm."""
    return x.norm(dim=-1).mean()


def _effective_rank(x: Tensor) -> float:
    """Mean over sequences of exp(entropy of normalized singular values) of (T, d); NaN where
    the SVD has no answer (it raises on non-finite input)."""
    if not torch.isfinite(x).all():
        return math.nan
    try:
        s = torch.linalg.svdvals(x)  # (B, min(T, d))
    except torch.linalg.LinAlgError:  # it may also fail to converge on finite input
        return math.nan
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-30)
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1)
    return float(entropy.exp().mean())


@dataclass
class _Capture:
    """Branch inputs and outputs in sublayer order, and what the final norm saw."""

    inputs: list[Tensor] = field(default_factory=list)
    outputs: list[Tensor] = field(default_factory=list)
    final: Tensor | None = None


@contextmanager
def _hooks(model: DeepTransformer, cap: _Capture, zero_block: int | None = None) -> Any:
    handles = []
    for i, block in enumerate(model.blocks):
        assert isinstance(block, Block)
        for branch in (block.attn, block.mlp):
            handles.append(branch.register_forward_hook(_make_hook(cap, i == zero_block)))
    handles.append(model.final_norm.register_forward_pre_hook(_final_hook(cap)))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _make_hook(cap: _Capture, zero: bool) -> Any:
    def hook(module: nn.Module, args: tuple[Tensor, ...], output: Tensor) -> Tensor | None:
        cap.inputs.append(args[0])
        if zero:  # "skipping" block l means f_l := 0 (docs/diagnostics.md, `removal_delta`)
            output = torch.zeros_like(output)
        cap.outputs.append(output)
        return output if zero else None

    return hook


def _final_hook(cap: _Capture) -> Any:
    def hook(module: nn.Module, args: tuple[Tensor, ...]) -> None:
        cap.final = args[0]

    return hook


def _loss(logits: Tensor, targets: Tensor) -> Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)


@contextmanager
def _measuring(model: nn.Module) -> Any:
    """Eval mode and float32 autocast off for the measurement; the mode is restored after."""
    was_training = model.training
    model.eval()
    device_type = next(model.parameters()).device.type
    try:
        with torch.autocast(device_type=device_type, enabled=False):
            yield
    finally:
        model.train(was_training)


def dilution_profile(
    model: DeepTransformer,
    idx: Tensor,
    targets: Tensor | None = None,
    removal: bool = False,
    importance: bool = False,
    alarm: float = ROUTING_ALARM,
) -> DilutionProfile:
    """Measure ``model`` on the batch ``idx`` (and ``targets`` for gradients, block removal and
    source importance); ``alarm``: the top-1 mass the collapsed share counts at
    (train.routing_alarm)."""
    if any(p.dtype != torch.float32 for p in model.parameters()):
        raise ValueError("dilution_profile measures a float32 model; pass model.float() (a copy)")
    # Hooks and the mixing probe need the eager forward: a compiled model (train.compile)
    # would trace through them.
    with _measuring(model), torch.compiler.set_stance("force_eager"):
        cap = _Capture()
        with torch.enable_grad() if targets is not None else torch.no_grad():
            with _hooks(model, cap), mixing_probe(alarm) as mixing:
                logits = model(idx)
            profile = _forward_metrics(model, idx, cap, mixing)
            if targets is not None:
                _gradient_metrics(model, cap, logits, targets, profile)
        if removal and targets is not None:
            profile.removal_delta = _removal_deltas(model, idx, targets, profile.loss or 0.0)
        if importance and targets is not None and profile.depth_entropy is not None:
            sites = sorted(mixing["depth"])  # a profile's rows, in order (Delta's start at 1)
            profile.source_importance = _source_importance(model, idx, targets, profile, sites)
    profile.finite = _all_finite([*model.parameters(), *cap.inputs, *cap.outputs, logits])
    return profile


def _all_finite(tensors: list[Tensor]) -> bool:
    """One device sync for all of them, not one per tensor."""
    return bool(torch.stack([torch.isfinite(t.detach()).all() for t in tensors]).all())


def _forward_metrics(
    model: DeepTransformer, idx: Tensor, cap: _Capture, mixing: Mixing
) -> DilutionProfile:
    with torch.no_grad():
        n = model.cfg.n_layers
        ins = [x.detach().float() for x in cap.inputs[0::2]]  # block inputs x_l
        ys = [y.detach().float() for y in cap.outputs]
        u = [ys[2 * i] + ys[2 * i + 1] for i in range(n)]
        running = model.embed(idx).float()
        virtual = []
        for i in range(n):
            virtual.append(_token_norm(running))
            running = running + u[i]
        final = cap.final.detach().float() if cap.final is not None else running
        states = [*ins, final]
        cos = torch.stack(
            [
                F.cosine_similarity(a[:, -1], b[:, -1], dim=-1).mean()
                for a, b in itertools.pairwise(states)
            ]
        )
        depths = sorted({0, n // 2, n - 1})
        profile = DilutionProfile(
            n_layers=n,
            output_norm=_np([_token_norm(x) for x in u]),
            sublayer_output_norm=_np([_token_norm(y) for y in ys]),
            stream_norm=_np([_token_norm(x) for x in ins]),
            virtual_stream_norm=_np(virtual),
            update_ratio=_np(
                [
                    (u[i].norm(dim=-1) / ins[i].norm(dim=-1).clamp_min(1e-30)).mean()
                    for i in range(n)
                ]
            ),
            adjacent_cosine=cos.numpy(),
            angular_distance=(torch.arccos(cos.clamp(-1, 1)) / math.pi).numpy(),
            erank_depths=np.array(depths),
            effective_rank=np.array([_effective_rank(ins[d]) for d in depths]),
        )
    _mixing_metrics(profile, mixing)
    _stream_metrics(profile, mixing)
    _routing_metrics(profile, mixing)
    return profile


def _np(values: list[Tensor]) -> Array:
    return torch.stack([torch.as_tensor(v).float() for v in values]).cpu().numpy()


def _mixing_metrics(profile: DilutionProfile, mixing: Mixing) -> None:
    softmax = "depth" in mixing
    depth = mixing.get("depth") or mixing.get("dwa")
    if depth:
        sites = sorted(depth)
        width = max(depth[s].numel() for s in sites)
        w = np.full((len(sites), width), np.nan)
        for row, s in enumerate(sites):
            w[row, : depth[s].numel()] = depth[s].numpy()
        profile.depth_weights = w
        if not softmax:  # free weights: entropy and "mass on the embedding" mean nothing
            return
        counts = np.sum(~np.isnan(w), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            entropy = -np.nansum(np.where(w > 0, w * np.log(w), 0.0), axis=1)
            profile.depth_entropy = np.where(counts > 1, entropy / np.log(counts), np.nan)
        profile.embedding_weight = w[:, 0]


def _stream_metrics(profile: DilutionProfile, mixing: Mixing) -> None:
    for kind in ("stream_read", "stream_mix"):
        if mixing.get(kind):
            reported = mixing[kind]
            setattr(profile, kind, np.stack([reported[s].numpy() for s in sorted(reported)]))


def _routing_metrics(profile: DilutionProfile, mixing: Mixing) -> None:
    """Per-token routing statistics of the depth weights' sites or, for HC and mHC, of the
    stream-mixing matrix's; the logit spread, runner-up margin and collapsed share only for a
    softmax (kind "depth"): free weights have no logits."""
    kind = next((k for k in ("depth", "dwa", "stream_mix") if mixing.routing.get(k)), None)
    if kind is None:
        return
    found = mixing.routing[kind]
    stats = np.stack([found[s].numpy() for s in sorted(found)])  # (sites, len(STATS))
    entropy, top1, sources, spread, margin, collapsed = stats.T
    profile.routing_entropy, profile.routing_top1 = entropy, top1
    profile.routing_sources = sources
    logits = kind == "depth"
    profile.routing_spread = spread if logits else np.full_like(spread, np.nan)
    profile.routing_margin = margin if logits else np.full_like(margin, np.nan)
    profile.routing_collapsed = collapsed if logits else np.full_like(collapsed, np.nan)
    profile.collapse_threshold = mixing.threshold


def _gradient_metrics(
    model: DeepTransformer, cap: _Capture, logits: Tensor, targets: Tensor, profile: DilutionProfile
) -> None:
    loss = _loss(logits.float(), targets)
    params = list(model.parameters())
    acts = cap.inputs[0::2]
    # autograd.grad, not backward: the parameters' .grad stay exactly as the caller left them.
    grads = torch.autograd.grad(loss, [*params, *acts], allow_unused=True)
    param_grads, act_grads = grads[: len(params)], grads[len(params) :]
    by_id: dict[int, Tensor | None] = dict(zip(map(id, params), param_grads, strict=True))
    profile.grad_norm = _np([_grad_norm(by_id, list(b.parameters())) for b in model.blocks])
    own = wiring_parameters(model)
    if own:
        total = _grad_norm(by_id, params)
        profile.wiring_grad_share = _ratio(float(_grad_norm(by_id, own)), float(total))
    profile.act_grad_norm = _np(
        [_token_norm(g.float()) if g is not None else torch.zeros(()) for g in act_grads]
    )
    profile.loss = float(loss.detach())


def _grad_norm(grads: dict[int, Tensor | None], params: list[nn.Parameter]) -> Tensor:
    """The L2 norm of the gradients of ``params`` taken together (zero for none)."""
    squares = [(g.float() ** 2).sum() for p in params if (g := grads[id(p)]) is not None]
    return torch.stack(squares).sum().sqrt() if squares else torch.zeros(())


def _removal_deltas(model: DeepTransformer, idx: Tensor, targets: Tensor, base: float) -> Array:
    deltas = []
    with torch.no_grad():
        for i in range(model.cfg.n_layers):
            with _hooks(model, _Capture(), zero_block=i):
                deltas.append(float(_loss(model(idx).float(), targets)) - base)
    return np.array(deltas)


def _source_importance(
    model: DeepTransformer,
    idx: Tensor,
    targets: Tensor,
    profile: DilutionProfile,
    sites: list[int],
) -> Array:
    """(rows, sources), a row per site of ``sites`` (the probe's site numbers): the loss with
    each source left out of each site's softmax mixing (``probe.removing``), minus the loss;
    NaN where the site has no such source or only one (leaving out its only source leaves
    nothing to renormalize). depth_entropy is set for a softmax only, and is NaN exactly at the
    one-source sites."""
    assert profile.depth_weights is not None and profile.depth_entropy is not None
    present = ~np.isnan(profile.depth_weights) & ~np.isnan(profile.depth_entropy)[:, None]
    out = np.full(profile.depth_weights.shape, np.nan)
    base = profile.loss or 0.0
    with torch.no_grad(), _plain_path(model):
        for row, source in zip(*np.nonzero(present), strict=True):
            with probe.removing(sites[row], int(source)):
                out[row, source] = float(_loss(model(idx).float(), targets)) - base
    return out


@contextmanager
def _plain_path(model: DeepTransformer) -> Any:
    """AttnRes on its plain path (``AttnResStream.fast`` off), the one whose mixer masks a
    removed source's logit: the softmax over the others, exact where their weights underflow
    float32 (a collapsed site's do); the two paths compute the same function otherwise."""
    stream = model.stream
    fast = bool(getattr(stream, "fast", False))
    if fast:
        setattr(stream, "fast", False)  # noqa: B010 (a flag only AttnRes streams have)
    try:
        yield
    finally:
        if fast:
            setattr(stream, "fast", True)  # noqa: B010
