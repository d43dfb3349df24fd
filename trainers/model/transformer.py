"""The deep Transformer LM: the branch, then the block, then the model; the leaves (rotary,
attention, MLP) are in ``trainers.model.layers``.

Plain ``nn.Module``; no Lightning here. The residual wiring, the norm placement and the norm type
come from registries (``trainers.residual``, ``trainers.model.placement``,
``trainers.model.norms``), resolved in ``__init__`` so that ``forward`` does not branch on the
variant.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from trainers.attention import ATTENTIONS, LayerMemory
from trainers.config import ModelConfig
from trainers.model.kv_cache import KVCache
from trainers.model.layers import MLP, Attention
from trainers.model.norms import NORM_SCALINGS, build_norm
from trainers.model.parametrization import (
    branch_multiplier,
    hidden_init_std,
    logit_multiplier,
    output_init_std,
)
from trainers.model.placement import PLACEMENTS
from trainers.residual import RESIDUALS


class Branch(nn.Module):
    """One sublayer with its placement's branch slots:
    ``out_scale * drop(norm_out(layer(in_scale * norm_in(x), ...)))``; ``in_scale`` is the norm
    scaling's factor for this block (1 unless LayerNorm Scaling), ``out_scale`` the
    parametrization's branch multiplier m_L^-alpha (1 unless Depth-muP or CompleteP).

    A branch takes as many inputs as its site hands it (``Residual.inputs``): one by default;
    an attention fed separate key and value inputs (MUDDFormer) takes three, and each input
    after the first has its own input norm, filled like ``norm_in`` (``kv_norms``).

    ``checkpointed`` (``trainers.model.checkpointing``): in training, keep only the inputs and
    recompute the branch in the backward. A branch is a pure function of its inputs (the wiring's
    state, which later sites append to, stays outside it), so every wiring can be checkpointed
    here and the recomputation is exact, dropout included (its RNG state is replayed)."""

    checkpointed = False

    def __init__(
        self,
        layer: nn.Module,
        norm_in: nn.Module,
        norm_out: nn.Module,
        p: float,
        in_scale: float,
        extra_norms: Sequence[nn.Module] = (),
        out_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.norm_in, self.layer, self.norm_out = norm_in, layer, norm_out
        self.in_scale, self.out_scale = in_scale, out_scale
        self.drop = nn.Dropout(p)
        self.kv_norms = nn.ModuleList(extra_norms)

    def forward(self, x: Tensor, *extra: Tensor) -> Tensor:
        if self.checkpointed and self.training and torch.is_grad_enabled():
            return checkpoint(self._branch, x, *extra, use_reentrant=False)
        return self._branch(x, *extra)

    def _branch(self, x: Tensor, *extra: Tensor) -> Tensor:
        inputs = [self._scaled(self.norm_in(x))]
        inputs += [self._scaled(n(z)) for n, z in zip(self.kv_norms, extra, strict=True)]
        y = self.drop(self.norm_out(self.layer(*inputs)))
        return y * self.out_scale if self.out_scale != 1.0 else y

    def _scaled(self, h: Tensor) -> Tensor:
        return h * self.in_scale if self.in_scale != 1.0 else h


class Block(nn.Module):
    """One Transformer block: an attention sublayer then an MLP sublayer, each behind a site.

    ::

        state ──site──► x_in ─[norm_in]·s─► Attention ─[norm_out]─► y ──site──► state
        state ──site──► x_in ─[norm_in]·s─► MLP       ─[norm_out]─► y ──site──► state

    The site (from the residual registry) decides what ``x_in`` is (the running sum, a softmax
    over earlier outputs, a mix of parallel streams) and how ``y`` is written back (added, then
    ``[post_main]`` norm); the placement fills the bracketed slots per block or leaves them as
    identities; ``s`` is the norm scaling's factor for the block (1 unless LayerNorm Scaling).
    The attention variant (``trainers.attention``) acts inside Attention; ``memory`` is the
    model's, shared by every block's attention.
    """

    def __init__(self, cfg: ModelConfig, index: int, memory: LayerMemory | None = None) -> None:
        super().__init__()
        slots = PLACEMENTS.get(cfg.placement).slots(cfg, index)
        residual = RESIDUALS.get(cfg.residual)
        scale = NORM_SCALINGS.get(cfg.norm_scaling)(index + 1)  # 1-based block index
        multiplier = branch_multiplier(cfg)

        def norm(filled: bool) -> nn.Module:
            return build_norm(cfg.norm, cfg.d_model, cfg.norm_eps) if filled else nn.Identity()

        def branch(layer: nn.Module, sublayer: int) -> Branch:
            extra = [norm(slots.norm_in) for _ in range(residual.inputs(cfg, sublayer) - 1)]
            return Branch(
                layer,
                norm(slots.norm_in),
                norm(slots.norm_out),
                cfg.dropout,
                scale,
                extra,
                multiplier,
            )

        values = ATTENTIONS.get(cfg.attention).values(cfg, index, memory or LayerMemory())
        self.attn = branch(Attention(cfg, values), 2 * index)
        self.mlp = branch(MLP(cfg), 2 * index + 1)
        self.attn_site = residual.site(cfg, 2 * index, norm(slots.post_main))
        self.mlp_site = residual.site(cfg, 2 * index + 1, norm(slots.post_main))

    def forward(self, state: Any) -> Any:
        state = self.attn_site(state, self.attn)
        return self.mlp_site(state, self.mlp)


class DeepTransformer(nn.Module):
    """Decoder-only causal LM: ``forward(idx[B, T]) -> logits[B, T, vocab_size]``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        placement = PLACEMENTS.get(cfg.placement)
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.pos == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        memory = LayerMemory()  # what an attention variant carries across blocks in a forward
        self.blocks = nn.ModuleList(Block(cfg, i, memory) for i in range(cfg.n_layers))
        self.stream = RESIDUALS.get(cfg.residual).stream(cfg)
        self.final_norm = (
            build_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
            if placement.final_norm
            else nn.Identity()
        )
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.tok_emb.weight
        self.logit_multiplier = logit_multiplier(cfg)  # muP's 1/m_w on the head's input
        init_weights(self, cfg)

    def embed(self, idx: Tensor, start: int = 0) -> Tensor:
        """Token embeddings of ``idx`` (B, T) at positions ``start``.. (learned positions)."""
        end = start + idx.shape[1]
        if end > self.cfg.seq_len:
            raise ValueError(f"sequence length {end} exceeds model.seq_len={self.cfg.seq_len}")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[start:end]
        return self.drop(x)

    def forward(self, idx: Tensor) -> Tensor:
        return self._logits(self.embed(idx))

    def _logits(self, emb: Tensor) -> Tensor:
        state = self.stream.begin(emb)
        for i, block in enumerate(self.blocks):
            state = self.stream.after_block(block(state), i)
        h = self.final_norm(self.stream.finish(state))
        return self.head(h * self.logit_multiplier if self.logit_multiplier != 1.0 else h)

    # ---- incremental decoding (trainers.model.kv_cache; sampling is trainers.model.decoding)
    # ----------------

    def prefill(self, idx: Tensor) -> tuple[Tensor, KVCache]:
        """The prompt ``idx`` (B, T)'s logits (B, T, vocab) and a cache of its keys and values."""
        return self.decode_step(idx, KVCache.empty(self.cfg.n_layers, self.cfg.seq_len))

    def decode_step(self, idx: Tensor, cache: KVCache) -> tuple[Tensor, KVCache]:
        """The logits (B, t, vocab) of ``t`` new tokens ``idx`` (B, t) following the cached
        positions, exactly as a full forward over all of them gives at those positions; their
        keys and values join ``cache`` (changed in place and returned). A sequence longer than
        ``model.seq_len`` raises ValueError before the cache changes."""
        emb = self.embed(idx, cache.length)
        with self._attached(cache):
            return self._logits(emb), cache

    @contextmanager
    def _attached(self, cache: KVCache) -> Iterator[None]:
        """Each block's attention reads and extends its layer's cache inside the ``with``;
        detached after, whatever happens, so a later forward sees no cache."""
        attentions = [m for m in self.blocks.modules() if isinstance(m, Attention)]  # in order
        try:
            for attention, layer in zip(attentions, cache.layers, strict=True):
                attention.cache = layer
            yield
        finally:
            for attention in attentions:
                attention.cache = None


def init_weights(model: DeepTransformer, cfg: ModelConfig) -> None:
    """Normal(0, init_std) for linear and embedding weights, the sublayers' own at the
    parametrization's hidden std (``init_std`` under sp), zero biases; output projections
    scaled by 1/sqrt(2*n_layers) when ``scaled_init`` (GPT-2) and no norm scaling; then the
    wiring's own init."""
    hidden = {
        id(m) for s in model.modules() if isinstance(s, (Attention, MLP)) for m in s.modules()
    }
    hidden_std = hidden_init_std(cfg)
    for module in model.modules():  # one order of draws whatever the stds: bitwise sp at base
        if isinstance(module, (nn.Linear, nn.Embedding)):
            std = hidden_std if id(module) in hidden else cfg.init_std
            nn.init.normal_(module.weight, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if cfg.uses_scaled_init:
        out_std = output_init_std(cfg)
        for module in model.modules():
            if isinstance(module, (Attention, MLP)):
                nn.init.normal_(module.output_projection().weight, std=out_std)
    RESIDUALS.get(cfg.residual).init_weights(model, cfg)


def num_params(model: nn.Module) -> int:
    """Distinct parameters (a tied embedding counted once)."""
    return sum(p.numel() for p in model.parameters())
