"""The two sublayers every block holds, and the rotary embedding attention uses: plain
``nn.Module`` leaves with no wiring, placement or norm choice in them.

Their own module because more than the model needs them: ``trainers.model.transformer`` builds its
blocks from them, and wirings whose init names particular projections (DeepNorm's value,
attention-output and MLP weights) find those sublayers by type.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trainers.config import ModelConfig
from trainers.model.kv_cache import LayerCache
from trainers.model.parametrization import attention_scale


class Rotary(nn.Module):
    """Rotary position embedding, half-split pairing (Su et al. 2021, arXiv 2104.09864)."""

    cos: Tensor
    sin: Tensor

    def __init__(self, head_dim: int, seq_len: int, base: float) -> None:
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)  # (T, hd/2)
        # Not persistent: derived from the config, so state dicts stay free of them.
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor, start: int = 0) -> Tensor:  # x: (B, nh, T, hd)
        """Rotates ``x`` as positions ``start``, ``start + 1``, ...: a decoded token's absolute
        position, so that its key and the cached ones meet at the angles a full forward gives."""
        t = x.shape[-2]
        cos, sin = self.cos[start : start + t].to(x.dtype), self.sin[start : start + t].to(x.dtype)
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def causal_mask(t: int, start: int, device: torch.device) -> tuple[Tensor | None, bool]:
    """SDPA's mask for ``t`` queries at positions ``start``.. over ``start + t`` keys, as
    (``attn_mask``, ``is_causal``). ``is_causal`` aligns its triangle top-left, which is right
    only without cached keys; one new query reads every key; a chunk after cached keys gets the
    bottom-right triangle spelled out."""
    if start == 0:
        return None, True
    if t == 1:
        return None, False
    keys = torch.arange(start + t, device=device)
    return keys[None, :] <= keys[start:, None], False


class Attention(nn.Module):
    """Causal multi-head self-attention through ``scaled_dot_product_attention``.

    ``values`` is the attention variant's slot (``trainers.attention``): the per-head values pass
    through it before the weighted sum (``nn.Identity`` for standard attention).

    ``cache`` is set only while the model decodes (``DeepTransformer.decode_step``): the new
    positions' keys and values join the cached ones and the queries read them all; otherwise
    (training, a full forward) it is None and nothing else changes."""

    cache: LayerCache | None

    def __init__(self, cfg: ModelConfig, values: nn.Module | None = None) -> None:
        super().__init__()
        self.n_heads, self.dropout = cfg.n_heads, cfg.dropout
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.rotary = (
            Rotary(cfg.head_dim, cfg.seq_len, cfg.rope_base) if cfg.pos == "rope" else None
        )
        self.values = nn.Identity() if values is None else values
        # muP's 1/d_head (None: SDPA's own 1/sqrt(d_head), as under sp and at the base head size)
        self.scale = attention_scale(cfg)
        self.cache = None

    def forward(self, x: Tensor, *kv: Tensor) -> Tensor:
        """Self-attention over ``x`` (B, T, d); given key and value inputs too, ``x`` is the
        query input and each input goes through its own rows of the projection."""
        b, t, d = x.shape
        if kv:
            q, k, v = self._project_each(x, *kv)
        else:
            q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))  # (B, nh, T, hd)
        v = self.values(v)
        start = 0 if self.cache is None else self.cache.length
        if self.rotary is not None:
            q, k = self.rotary(q, start), self.rotary(k, start)
        if self.cache is not None:
            k, v = self.cache.append(k, v)  # (B, nh, start + T, hd)
        p = self.dropout if self.training else 0.0
        mask, causal = causal_mask(t, start, q.device)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=p, is_causal=causal, scale=self.scale
        )
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def _project_each(self, xq: Tensor, xk: Tensor, xv: Tensor) -> tuple[Tensor, ...]:
        """Each input through its own rows of the fused projection: (B, T, nh, hd) each."""
        b, t, d = xq.shape
        biases = (None,) * 3 if self.qkv.bias is None else self.qkv.bias.chunk(3)
        rows = zip((xq, xk, xv), self.qkv.weight.chunk(3), biases, strict=True)
        return tuple(
            F.linear(z, w, bw).view(b, t, self.n_heads, d // self.n_heads) for z, w, bw in rows
        )

    def output_projection(self) -> nn.Linear:
        return self.proj


class MLP(nn.Module):
    """Two-layer GELU MLP."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.fc_in = nn.Linear(cfg.d_model, cfg.mlp_hidden, bias=cfg.bias)
        self.fc_out = nn.Linear(cfg.mlp_hidden, cfg.d_model, bias=cfg.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc_out(F.gelu(self.fc_in(x)))

    def output_projection(self) -> nn.Linear:
        return self.fc_out
