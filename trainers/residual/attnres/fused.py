"""Block and Full AttnRes's depth softmax on a GPU through the Triton kernels of the optional
package ``flash-attn-res`` (``pip install -e '.[gpu]'``; Apache-2.0), where they compute what the
existing paths compute; everywhere else those paths run.

The package's phase 1 mixes a group of sites over the stacked block summaries (source-first,
(n, B, T, d)) with static queries and RMS-normalized keys ``v / sqrt(mean(v^2) + eps)``, no gain
and no temperature, and returns each site's output and log-sum-exp; its phase 2 merges one
site's phase-1 answer with the block's partial sum by the online softmax. Both are
``torch.library.triton_op``s with registered backwards (gradients for the sources and the
queries). That is ``depth_attention``'s function once the per-site gains are folded into the
queries (``SiteParameters.folded``), on any block partition: the partition only decides where
phase 1 runs. Full AttnRes (``FullFusedSources``) runs phase 1 for a group of sites at the
group's first site, and at each later site of the group once more, for that site alone, over
the few sources added since; the two answers merge exactly by their log-sum-exps (phase 2 merges
one source only, and returns no log-sum-exp to merge further). What the kernels fix, and the rule
below therefore requires:

* the paper's switches: static query, RMS key norm, softmax gate, one head, no window, sources
  that are sublayer outputs;
* bfloat16: both phases store their outputs in bfloat16 whatever the input, so a float32 run
  would see its site inputs rounded (the other paths keep them float32);
* eager mode on CUDA: ``torch.compile`` and the CPU take the existing paths.

Any width: each program loads a whole row with an unmasked ``tl.arange(0, d)``, so the kernels
need a power of two; other widths (GPT-2's 768) are zero-padded to the next one with the queries
and epsilon rescaled so that every logit stays exact (``FusedSources``), at the cost of the copies
and the wider rows.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from trainers import catalogue
from trainers.config import ModelConfig
from trainers.residual.attnres.depth_attention import Schedule, Weights, unit_rms

PACKAGE = "flash_attn_res"

# The wirings whose depth softmax the kernels compute (Full and Block AttnRes), and the switch
# values they compute (the paper's): the catalogue's, which the torch-free memory plan reads too.
RESIDUALS = catalogue.FUSED_RESIDUALS
KERNEL_SWITCHES = catalogue.FUSED_SWITCHES


@dataclass(frozen=True)
class Dispatch:
    """Whether the fused kernels mix this model's sites, and if not, why (one line)."""

    fused: bool
    reason: str

    def __bool__(self) -> bool:
        return self.fused


def fused_applies(
    cfg: ModelConfig, device_type: str, available: bool, dtype: str = "bfloat16"
) -> Dispatch:
    """The dispatch rule, free of torch state: ``device_type`` as ``torch.device.type`` names it,
    ``available`` whether the package imports, ``dtype`` what the mixing computes in (the
    autocast dtype, else the stream's)."""
    if device_type != "cuda":
        return Dispatch(False, f"device {device_type!r}: the kernels run on CUDA only")
    if not available:
        return Dispatch(False, f"{PACKAGE} is not importable (pip install -e '.[gpu]')")
    if cfg.residual not in RESIDUALS:
        return Dispatch(
            False, f"residual={cfg.residual!r}: the kernels mix {' and '.join(RESIDUALS)}"
        )
    for name, value in KERNEL_SWITCHES:
        got = getattr(cfg, name)
        if got != value:
            return Dispatch(False, f"{name}={got!r}: the kernels compute {name}={value!r} only")
    if dtype != "bfloat16":
        return Dispatch(False, f"dtype {dtype}: the kernels store their outputs in bfloat16")
    return Dispatch(True, "the paper's AttnRes on CUDA in bfloat16")


def dispatch(cfg: ModelConfig, device_type: str, dtype: str) -> Dispatch:
    """The rule for a forward of ``cfg`` on ``device_type`` in ``dtype`` on this machine: whether
    the package imports is asked only on CUDA (importing Triton on a CPU run costs seconds)."""
    return fused_applies(cfg, device_type, device_type == "cuda" and available(), dtype)


@functools.cache
def available() -> bool:
    """Whether the package imports (it needs Triton; 0.1.12 fails to import under Triton 3.9,
    whose autotuner rejects a tuning key the package names, hence the broad except)."""
    try:
        importlib.import_module(f"{PACKAGE}.ops.phase_1")
        importlib.import_module(f"{PACKAGE}.ops.phase_2")
    except Exception:  # any import failure: take the existing path
        return False
    return True


def mixing_dtype(x: Tensor) -> str:
    """What the depth mixing of a stream holding ``x`` computes in: autocast's dtype where it
    is on, else ``x``'s; named as ``fused_applies`` takes it."""
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
    return str(dtype).removeprefix("torch.")


# phase 1: (sources (n, B, T, d), queries (g, d), eps) -> outputs (g, B, T, d), lses (g, B, T);
# phase 2: (partial (B, T, d), query (d,), phase 1's output and lse at the site, eps) -> input.
Kernels = tuple[Callable[..., tuple[Tensor, Tensor]], Callable[..., Tensor]]


def package_kernels() -> Kernels:
    """The package's two phases (imported only here: importing Triton costs seconds), their
    autotuning cached on disk (``cache_tuning``)."""
    ops1 = importlib.import_module(f"{PACKAGE}.ops.phase_1")
    ops2 = importlib.import_module(f"{PACKAGE}.ops.phase_2")
    cache_tuning(importlib.import_module(PACKAGE))
    return ops1.phase_1_batched_attention_triton_op, ops2.phase_2_online_softmax_merge_triton_op


def cache_tuning(package: object) -> int:
    """Keep each autotuned kernel's choices on disk, in Triton's cache: its autotuner compiles
    and times every config for each new shape, over a minute for Block AttnRes's first step at
    GPT-2 scale, and by default in every process again. Cached, a node tunes a shape once and
    every later trial of the sweep reads the choice (what ``TRITON_CACHE_AUTOTUNING=1`` does,
    set on the kernels themselves, since that variable is read when they are decorated, at the
    package's import). The interpreter never tunes, so there nothing changes. Returns how many
    kernels now cache."""
    from triton.runtime.autotuner import Autotuner

    knobs = getattr(importlib.import_module("triton"), "knobs", None)
    interpreting = bool(knobs and knobs.runtime.interpret)
    kernels = [k for k in vars(package).values() if isinstance(k, Autotuner)]
    for kernel in kernels:
        kernel.cache_results = not interpreting
    return 0 if interpreting else len(kernels)


class FusedSources:
    """The ``Sources`` interface over the package's two phases, for Block AttnRes (Full AttnRes:
    ``FullFusedSources``): the stored sources are the embedding and the completed block
    summaries; ``extra`` is the current block's partial sum. Phase 1 runs when a site finds
    sources appended since the last one (a block's first site, and the output site), for every
    site up to the schedule's next start;
    the block's later sites merge its answer with the partial sum (phase 2). Outputs come back
    in the sources' dtype. ``kernels`` replaces the package's phases (the tests check this
    bookkeeping with the same functions in plain torch)."""

    kind = "depth"  # as depth_mixing's softmax gate names the weights

    def __init__(
        self, eps: float, queries: Tensor, schedule: Schedule, kernels: Kernels | None = None
    ) -> None:
        self.phase1, self.phase2 = kernels or package_kernels()
        self.eps, self.queries, self.schedule = eps, queries, schedule
        # The kernels load whole rows of a power-of-two width D: narrower rows are zero-padded
        # to it. Their key norm then divides by D instead of d; queries scaled by sqrt(d/D) and
        # epsilon by d/D give back each logit exactly (sqrt(d/D) q.v / sqrt((d/D)(|v|^2/d +
        # eps)) = q.v / rms(v)), and the padded columns of every output are zero.
        d = queries.shape[-1]
        self.pad = (1 << (d - 1).bit_length()) - d
        scale = d / (d + self.pad)
        self.kernel_eps = eps * scale
        self.kernel_queries = F.pad(queries * scale**0.5, (0, self.pad)) if self.pad else queries
        self.stored: list[Tensor] = []
        self.group: tuple[int, int, Tensor, Tensor] | None = None  # start, n, outputs, lses

    def append(self, y: Tensor) -> None:
        self.stored.append(y)

    def sources(self) -> list[Tensor]:
        return list(self.stored)

    def _padded(self, x: Tensor) -> Tensor:
        """``x`` as the kernels read it: padded, contiguous, and under autocast in its dtype,
        as the buffered path stores its sources (under bf16 autocast the float32 embedding
        would otherwise promote every stack to float32: twice the bytes the kernels load)."""
        device = x.device.type
        if torch.is_autocast_enabled(device):
            x = x.to(torch.get_autocast_dtype(device))
        return F.pad(x, (0, self.pad)) if self.pad else x.contiguous()

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]:
        n = len(self.stored)
        if self.group is None or self.group[1] != n:
            self._phase1_group(site)
        start, _, out, lse = self.group  # type: ignore[misc]
        i = site - start
        x = out[i]
        if extra is not None:
            q, eps = self.kernel_queries, self.kernel_eps
            x = self.phase2(self._padded(extra), q[site], out[i], lse[i], eps)
        sources = self._all(extra)
        return self._unpadded(x), lambda: self._weights(site, sources)

    def _phase1_group(self, site: int) -> None:
        """Phase 1 over every stored source for the sites from ``site`` to its group's end."""
        end = self.schedule.end(site)
        values = self._padded(torch.stack(self.stored, dim=0))
        out, lse = self.phase1(values, self.kernel_queries[site:end].contiguous(), self.kernel_eps)
        self.group = (site, len(self.stored), out, lse)

    def _unpadded(self, x: Tensor) -> Tensor:
        """``x`` without the padded columns, in the sources' dtype."""
        return (x[..., : -self.pad] if self.pad else x).to(self.stored[0].dtype)

    def _all(self, extra: Tensor | None) -> list[Tensor]:
        return [*self.stored, *([] if extra is None else [extra])]

    def _weights(self, site: int, sources: list[Tensor]) -> Tensor:
        """(B, T, S): the site's softmax weights, for an open mixing probe only."""
        values = torch.stack(sources, dim=-2)  # promoted to the widest source dtype
        values = values.to(torch.promote_types(values.dtype, torch.float32))
        return torch.softmax(unit_rms(values, self.eps) @ self.queries[site].to(values), dim=-1)


class FullFusedSources(FusedSources):
    """Full AttnRes on the kernels: every sublayer output is stored. Phase 1 runs at each
    group's first site (the schedule's) over every stored source for the group's sites; a later
    site of the group runs phase 1 once more, for itself, over the sources stored since, and
    merges the two answers by their log-sum-exps: softmax over the union = the two partial
    softmaxes weighted by softmax(lse_1, lse_2). Stacking every source once per group, not once
    per site, keeps the copies to O(L^2 / G)."""

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]:
        if extra is not None:
            raise ValueError("Full AttnRes mixes stored sources only")
        if self.group is None or self.schedule.is_start(site):
            self._phase1_group(site)
        start, seen, out, lse = self.group  # type: ignore[misc]
        x = out[site - start]
        recent = self.stored[seen:]
        if recent:
            values = self._padded(torch.stack(recent, dim=0))
            q = self.kernel_queries[site : site + 1].contiguous()
            new_out, new_lse = self.phase1(values, q, self.kernel_eps)
            w = torch.softmax(torch.stack((lse[site - start], new_lse[0]), dim=-1), dim=-1)
            wide = torch.promote_types(x.dtype, torch.float32)  # the kernels' bfloat16, widened
            x = w[..., :1].to(wide) * x.to(wide) + w[..., 1:].to(wide) * new_out[0].to(wide)
        sources = list(self.stored)
        return self._unpadded(x), lambda: self._weights(site, sources)
