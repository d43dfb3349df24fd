"""The reference model: plain pre-norm, one file, top to bottom; the place to start reading.

``DeepTransformer`` (``trainers.model.transformer``) builds every wiring from registries, so its
plain pre-norm path is spread over eight files. This module writes that one configuration
(``model.residual=standard``, ``model.placement=pre``) out in plain torch, leaves first (norms,
attention, MLP, block, model), with no registry and nothing from ``trainers`` but the config. Its
parameter names and shapes are ``DeepTransformer``'s, so a state dict loads strictly either way, and
the tests hold the two equal: the reference is also the oracle for the model.

Init is ``DeepTransformer``'s (``init_weights`` below): Normal(0, init_std) for every linear and
embedding weight, zero biases, norm gains one, and with ``scaled_init`` the output projections
(attention ``proj``, MLP ``fc_out``) at init_std / sqrt(2 * n_layers) (GPT-2): the stream is a
sum of 2 * n_layers sublayer outputs, so this keeps its variance at init independent of depth.
Modules are built and initialized in the same order, so the same seed gives the same weights.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.config import ModelConfig

# What the reference is: any other value is DeepTransformer's to build.
PLAIN_PRE_NORM = {
    "residual": "standard",
    "placement": "pre",
    "attention": "standard",
    "norm_scaling": "none",
}


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * gain (Zhang & Sennrich 2019, arXiv 1910.07467)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * gain + bias, biased variance (Ba et al. 2016)."""

    def __init__(self, d: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d))

    def forward(self, x: Tensor) -> Tensor:
        centred = x - x.mean(-1, keepdim=True)
        var = centred.pow(2).mean(-1, keepdim=True)
        return centred * torch.rsqrt(var + self.eps) * self.weight + self.bias


def norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.d_model, cfg.norm_eps)
    return LayerNorm(cfg.d_model, cfg.norm_eps)


class CausalSelfAttention(nn.Module):
    """Multi-head attention in which position t sees positions <= t (Vaswani et al. 2017)."""

    cos: Tensor
    sin: Tensor

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.head_dim = cfg.n_heads, cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)  # q, k, v side by side
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.attn_drop = nn.Dropout(cfg.dropout)
        self.rope = cfg.pos == "rope"
        if self.rope:  # RoPE (Su et al. 2021, arXiv 2104.09864): rotate pairs by position
            hd = self.head_dim
            inv_freq = cfg.rope_base ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
            angles = torch.outer(torch.arange(cfg.seq_len, dtype=torch.float64), inv_freq)
            # Derived from the config, so not persistent (not in the state dict). Stored in
            # float32 as DeepTransformer's are: a .double() copy of either model then rotates by
            # the same float32-rounded angles, and the two agree to float64 rounding.
            self.register_buffer("cos", angles.cos().float(), persistent=False)  # (T, hd/2)
            self.register_buffer("sin", angles.sin().float(), persistent=False)

    def rotate(self, x: Tensor) -> Tensor:  # (B, nh, T, hd)
        """Half-split pairing: channel i turns with channel i + hd/2."""
        t = x.shape[-2]
        cos, sin = self.cos[:t].to(x.dtype), self.sin[:t].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = (
            z.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, hd)
            for z in self.qkv(x).split(d, dim=-1)
        )
        if self.rope:  # positions enter through queries and keys only
            q, k = self.rotate(q), self.rotate(k)
        # 1/sqrt(hd) keeps the scores' variance near one whatever the head width.
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, nh, T, T)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        weights = self.attn_drop(scores.masked_fill(future, float("-inf")).softmax(dim=-1))
        y = (weights @ v).transpose(1, 2).reshape(b, t, d)  # heads side by side again
        return self.proj(y)


class MLP(nn.Module):
    """d_model -> mlp_hidden -> d_model with an exact (erf) GELU between."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc_in = nn.Linear(cfg.d_model, cfg.mlp_hidden, bias=cfg.bias)
        self.fc_out = nn.Linear(cfg.mlp_hidden, cfg.d_model, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))


class PreNormBranch(nn.Module):
    """What one sublayer adds to the stream: dropout(layer(norm_in(x))). The norm sits on the
    branch only; the stream itself is never normalized until the final norm."""

    def __init__(self, cfg: ModelConfig, layer: nn.Module) -> None:
        super().__init__()
        self.norm_in, self.layer = norm(cfg), layer
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.drop(self.layer(self.norm_in(x)))


class Block(nn.Module):
    """One Transformer block, pre-norm (Xiong et al. 2020, arXiv 2002.04745): each sublayer
    reads a normed copy of the stream and adds its output to the stream itself::

        x ──┬──────────────────────────────(+)──┬────────────────────────(+)──► x
            └── norm_in ─ attention ─ drop ─┘   └── norm_in ─ MLP ─ drop ─┘
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.attn = PreNormBranch(cfg, CausalSelfAttention(cfg))
        self.mlp = PreNormBranch(cfg, MLP(cfg))

    def forward(self, x: Tensor) -> Tensor:
        # Every sublayer adds to the one stream with weight one, and nothing is ever taken
        # out: after l sublayers the stream is the embedding plus l outputs, so each new output
        # is a shrinking share of what the next norms and the head see. That is pre-norm's
        # dilution with depth; the other wirings (trainers/residual) reweight these terms.
        x = x + self.attn(x)
        return x + self.mlp(x)


class ReferenceTransformer(nn.Module):
    """Decoder-only causal LM: ``forward(idx[B, T]) -> logits[B, T, vocab_size]``, with
    ``DeepTransformer``'s parameter names for ``standard``/``pre``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        check_plain_pre_norm(cfg)
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model) if cfg.pos == "learned" else None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        # The stream is a sum of unnormalized terms; the head needs it normalized once.
        self.final_norm = norm(cfg)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:  # one matrix reads tokens in and scores them out
            self.head.weight = self.tok_emb.weight
        init_weights(self, cfg)

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence length {t} exceeds model.seq_len={self.cfg.seq_len}")
        x = self.tok_emb(idx)  # (B, T, d)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[:t]
        x = self.drop(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.final_norm(x))  # (B, T, vocab)


def check_plain_pre_norm(cfg: ModelConfig) -> None:
    """Refuse, in one line, a configuration the reference does not write out."""
    for name, allowed in PLAIN_PRE_NORM.items():
        value = getattr(cfg, name)
        if value != allowed:
            raise ValueError(
                f"model.{name}: {value!r} is not in the reference model, which is plain "
                f"pre-norm; allowed: {allowed!r} (DeepTransformer builds the rest)"
            )


def init_weights(model: ReferenceTransformer, cfg: ModelConfig) -> None:
    """DeepTransformer's init, in its order (see the module docstring)."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=cfg.init_std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    if not cfg.scaled_init:
        return
    out_std = cfg.init_std / math.sqrt(cfg.n_sublayers)
    for module in model.modules():
        if isinstance(module, CausalSelfAttention):
            nn.init.normal_(module.proj.weight, std=out_std)
        elif isinstance(module, MLP):
            nn.init.normal_(module.fc_out.weight, std=out_std)
