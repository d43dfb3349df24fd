"""What incremental decoding keeps across positions: each attention layer's keys and values.

Every wiring mixes over depth at one position (a site reads the outputs of earlier sublayers at
the same token: AttnRes's sources, MUDDFormer's and mHC's streams, DenseFormer's averages), so
the only state a new token needs from earlier tokens is what attention reads across positions:
each layer's keys, after rotary at their absolute positions, and its values, after the attention
variant's transform (the value residual's mix with the first layer's values, itself per
position). A plain object, not a module: it holds activations, never parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class LayerCache:
    """One attention layer's keys and values, (B, nh, capacity, hd) each, the first ``length``
    positions written. Allocated at the first write, from the shapes the layer hands it."""

    capacity: int
    keys: Tensor | None = None
    values: Tensor | None = None
    length: int = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Writes the new positions' keys and values (B, nh, t, hd) after the cached ones and
        returns every position's so far (views, no copy)."""
        start, t = self.length, k.shape[-2]
        if start + t > self.capacity:  # the model refuses first; this guards direct callers
            raise ValueError(f"sequence length {start + t} exceeds the cache's {self.capacity}")
        if self.keys is None or self.values is None:
            self.keys = k.new_empty((*k.shape[:-2], self.capacity, k.shape[-1]))
            self.values = v.new_empty((*v.shape[:-2], self.capacity, v.shape[-1]))
        self.keys[..., start : start + t, :] = k
        self.values[..., start : start + t, :] = v
        self.length = start + t
        return self.keys[..., : self.length, :], self.values[..., : self.length, :]


@dataclass
class KVCache:
    """Every attention layer's cache, block order; the positions decoded so far are
    ``length`` (every layer holds the same number)."""

    layers: list[LayerCache] = field(default_factory=list)

    @staticmethod
    def empty(n_layers: int, capacity: int) -> KVCache:
        return KVCache([LayerCache(capacity) for _ in range(n_layers)])

    @property
    def length(self) -> int:
        return self.layers[0].length if self.layers else 0
