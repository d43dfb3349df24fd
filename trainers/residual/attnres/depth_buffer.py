"""The two-phase depth softmax over preallocated buffers, with a hand-written backward.

Plain autograd pays for AttnRes in ways the math does not need: every group start restacks the
sources (``cat`` copies O(L^2/G) values), each stack is saved for the backward of the product
that read it (so the activations hold every source several times), and every small operator of
the merge is a recorded node. Here each forward owns one ``Store``: the values (B, T, S, d) and
logits (B, T, S, n_sites) of every source, written once as sources arrive, outside autograd.
Four autograd Functions use it:

* ``_Push`` writes a source and its logits at every site; its backward hands the source its
  accumulated gradients (value and key paths);
* ``_GroupMix`` is phase 1: a group's sites over the sources present at its start;
* ``_SiteMix`` is phase 2: one site's online-softmax merge of phase 1 with the sources added
  since (read from the store) and an optional extra source (Block AttnRes's partial sum);
* ``_PairMix`` is the merge of phase 1 with the extra source alone, Block AttnRes's usual site.

The mixes add their gradients into matching buffers (``grad_values``, ``grad_logits``,
``grad_query_rows``) instead of returning them. Ordering comes from a token: a 0-d tensor each
``_Push`` returns and every mix takes, so the engine runs source i's ``_Push`` backward only
after every mix that read the store after source i was written, that is after every gradient for
source i has arrived. ``_Push`` of source 0 runs last: it returns the queries' whole gradient
and resets the buffers, so ``retain_graph`` and a second backward stay exact; a partial
backward (gradients of an intermediate tensor) is not supported. ``StackedSources`` is the
plain-autograd twin the tests hold this one to.

Raw keys (``eps`` None) store 1/rms as ones and drop the rms term of the key gradient; a window
stores the logits outside it as -inf (``Store.hidden``), which every gate turns into weight zero
and whose gradient stays zero. The one product that would meet them, the rms term's
``glg . lg``, reads them as 0 (0 * -inf is NaN). Sigmoid gates (``Store.sigmoid``) weigh each
source on its own: phase 1 carries no log-sum-exp (its output counts once in the merge), and each
logit's gradient is c (1 - c) dx.v instead of the softmax's c (dx.v - dx.x).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from trainers.residual.attnres.depth_attention import (
    Schedule,
    Weights,
    merge_gates,
    merged_weights,
)


@dataclass
class Store:
    """One forward's sources; ``count`` of ``capacity`` slots are written. ``queries`` are the
    folded queries, detached: their gradient leaves through source 0's ``_Push``. ``eps`` None
    means raw keys; ``hidden`` (capacity, n_sites) marks the logits outside a window; ``sigmoid``
    gates each source on its own instead of the softmax."""

    queries: Tensor  # (n_sites, d)
    eps: float | None
    hidden: Tensor | None
    sigmoid: bool
    values: Tensor  # (B, T, capacity, d)
    logits: Tensor  # (B, T, capacity, n_sites), at least float32
    rinv: Tensor  # (B, T, capacity): 1 / rms of each source, for the key gradient
    count: int = 0
    grad_values: Tensor | None = None
    grad_logits: Tensor | None = None
    grad_query_rows: Tensor | None = None  # (n_sites, d): from extra sources' logits

    @staticmethod
    def like(
        first: Tensor,
        queries: Tensor,
        eps: float | None,
        capacity: int,
        hidden: Tensor | None,
        sigmoid: bool,
    ) -> Store:
        dtype = first.dtype
        if torch.is_autocast_enabled(first.device.type):  # store what the products will read
            dtype = torch.get_autocast_dtype(first.device.type)
        b, t, d = first.shape
        exact = torch.promote_types(first.dtype, torch.float32)  # softmax precision
        return Store(
            queries=queries.detach().to(exact),
            eps=eps,
            hidden=hidden,
            sigmoid=sigmoid,
            values=first.new_empty((b, t, capacity, d), dtype=dtype),
            logits=first.new_empty((b, t, capacity, queries.shape[0]), dtype=exact),
            rinv=first.new_empty((b, t, capacity), dtype=exact),
        )

    def grads(self) -> tuple[Tensor, Tensor]:
        if self.grad_values is None or self.grad_logits is None:
            self.grad_values = torch.zeros_like(self.values)
            self.grad_logits = torch.zeros_like(self.logits)
            self.grad_query_rows = torch.zeros_like(self.queries)
        return self.grad_values, self.grad_logits

    def grad_queries(self) -> Tensor:
        """d loss / d queries: every stored source's logit gradient at once, in one product, plus
        what the extra sources added."""
        assert self.grad_logits is not None and self.grad_query_rows is not None
        n = self.count
        keys = self.values[:, :, :n].to(self.rinv.dtype) * self.rinv[:, :, :n, None]
        glg = self.grad_logits[:, :, :n]
        return torch.addmm(self.grad_query_rows, glg.flatten(0, 2).T, keys.flatten(0, 2))


def _no_autocast(device: torch.device) -> Any:
    """The Functions choose their dtypes: values in the store's dtype, softmax in float32."""
    return torch.autocast(device.type, enabled=False)


def _rinv(v: Tensor, eps: float | None) -> Tensor:
    """1 / rms(v) over the last dimension, as ``F.rms_norm`` computes it; ones for raw keys."""
    if eps is None:
        return v.new_ones(v.shape[:-1])
    return torch.rsqrt(torch.linalg.vecdot(v, v) / v.shape[-1] + eps)


def _key_grad(v: Tensor, glg: Tensor, queries: Tensor, lg: Tensor | None, rinv: Tensor) -> Tensor:
    """d/dv of sum_s glg_s lg_s, for the logits lg_s = (v . q_s) rinv(v) of a source v (B, T, d)
    at k sites (queries (k, d); glg and lg (B, T, k), lg finite); d rinv / dv = -rinv^3 v / d.
    ``lg`` None: raw keys, rinv = 1 and no rms term."""
    gv = (glg @ queries) * rinv[..., None]
    if lg is None:
        return gv
    coef = torch.linalg.vecdot(glg, lg) * rinv.square() / v.shape[-1]
    return gv.sub_(v.to(gv.dtype) * coef[..., None])


def _logit_grad(c: Tensor, dv: Tensor, dxx: Tensor | None) -> Tensor:
    """The logits' gradient for weights c of sources whose dx . v is dv: the softmax's
    c (dv - dx . x), or, for sigmoid gates (``dxx`` None), c (1 - c) dv."""
    return c * (1 - c) * dv if dxx is None else c * (dv - dxx)


def _extra_logit(store: Store, site: int, extra: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A source the store does not hold (Block AttnRes's partial sum): itself in the logits'
    dtype, 1 / rms, and its logit at ``site``."""
    e = extra.to(store.queries.dtype)
    rinv = _rinv(e, store.eps)
    return e, rinv, (e @ store.queries[site]) * rinv


def _extra_key_grad(
    store: Store, site: int, e: Tensor, dl: Tensor, rinv: Tensor, lg: Tensor
) -> Tensor:
    """The gradient through that source's key for its logit's gradient dl (B, T); the site's
    query row gets its share in ``grad_query_rows``."""
    assert store.grad_query_rows is not None
    store.grad_query_rows[site].addmv_(e.flatten(0, -2).T, (dl * rinv).flatten())
    rms = None if store.eps is None else lg[..., None]
    return _key_grad(e, dl[..., None], store.queries[site : site + 1], rms, rinv)


class _Push(torch.autograd.Function):
    """Writes source y into the store with its logit at every site, (y . q_s) / rms(y). Only
    source 0's push takes the queries as an input, and returns their whole gradient (it runs
    last in the backward); later pushes read the store's detached copy."""

    @staticmethod
    def forward(
        ctx: FunctionCtx, token: Tensor, y: Tensor, queries: Tensor | None, store: Store
    ) -> Tensor:
        i = store.count
        with _no_autocast(y.device):
            store.values[:, :, i].copy_(y)
            yq = y.to(store.queries.dtype)
            rinv = _rinv(yq, store.eps)
            store.rinv[:, :, i] = rinv
            torch.mul(yq @ store.queries.T, rinv[..., None], out=store.logits[:, :, i])
            if store.hidden is not None:
                store.logits[:, :, i].masked_fill_(store.hidden[i], float("-inf"))
        store.count += 1
        ctx.store, ctx.index = store, i  # type: ignore[attr-defined]
        return token.new_zeros(())

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, _token: Tensor) -> tuple[Any, ...]:
        store, i = ctx.store, ctx.index
        y = store.values[:, :, i]  # saving y would keep a second copy alive
        grad_values, grad_logits = store.grads()
        with _no_autocast(y.device):
            glg, rinv = grad_logits[:, :, i], store.rinv[:, :, i]
            lg = None  # raw keys: no rms term
            if store.eps is not None:
                lg = store.logits[:, :, i]
                if store.hidden is not None:  # finite for glg . lg; their glg is 0
                    lg = lg.masked_fill(store.hidden[i], 0.0)
            gy = _key_grad(y, glg, store.queries, lg, rinv)
            gy += grad_values[:, :, i]
            gq = None
            if i == 0:  # the last node of the backward; the next backward starts from zero
                gq = store.grad_queries()
                store.grad_values = store.grad_logits = store.grad_query_rows = None
        return _token, gy, gq, None


def _accumulate_outer(grad_values: Tensor, n: int, w: Tensor, dout: Tensor) -> None:
    """grad_values[:, :, :n] += w^T @ dout for weights (B, T, G, n) and gradients (B, T, G, d),
    in place. The product's inner dimension is the group size G: with G = 1 it is an outer
    product, 12x faster as ``addcmul_`` than as ``bmm``; otherwise ``baddbmm`` writing into the
    buffer (a strided view) saves the separate add, 1.9x faster at G = 8."""
    if w.shape[-2] == 1:
        grad_values[:, :, :n].addcmul_(w.mT, dout)
        return
    target = grad_values.flatten(0, 1)[:, :n]  # (B*T, n, d), batch stride S*d
    torch.baddbmm(target, w.flatten(0, 1).mT, dout.flatten(0, 1), out=target)


class _GroupMix(torch.autograd.Function):
    """Sites [start, end) over the first n sources: one output (B, T, d) and one log-sum-exp
    (B, T) per site (separate tensors, so each site's gradient arrives alone instead of
    being scattered into a zeroed stack; zeros with sigmoid gates, which have none), then the
    weights (B, T, G, n)."""

    @staticmethod
    def forward(ctx: FunctionCtx, token: Tensor, store: Store, start: int, end: int) -> Any:
        n = store.count
        with _no_autocast(store.values.device):
            lg = store.logits[:, :, :n, start:end].transpose(-1, -2)  # (B, T, G, n)
            if store.sigmoid:
                lse, w = lg.new_zeros(lg.shape[:-1]), torch.sigmoid(lg)
            else:
                lse = lg.logsumexp(-1)
                w = (lg - lse[..., None]).exp_()
            out = w.to(store.values.dtype) @ store.values[:, :, :n]  # (B, T, G, d)
        ctx.save_for_backward(w)
        ctx.store, ctx.span = store, (start, end, n)  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(w)
        return (*out.unbind(2), *lse.unbind(2), w)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, *grads: Tensor) -> tuple[Any, ...]:
        (w,) = ctx.saved_tensors
        store, (start, end, n) = ctx.store, ctx.span
        g = end - start
        dout, dlse = torch.stack(grads[:g], 2), torch.stack(grads[g : 2 * g], 2)
        grad_values, grad_logits = store.grads()
        with _no_autocast(w.device):
            values = store.values[:, :, :n]
            _accumulate_outer(grad_values, n, w.to(dout.dtype), dout)
            da = (dout @ values.mT).to(w.dtype)  # (B, T, G, n)
            if store.sigmoid:
                dl = _logit_grad(w, da, None)
            else:
                da += (dlse - (w * da).sum(-1)).unsqueeze(-1)
                dl = w * da
            grad_logits[:, :, :n, start:end] += dl.transpose(-1, -2)
        return torch.zeros((), device=w.device), None, None, None


class _SiteMix(torch.autograd.Function):
    """Merges phase 1's (out1, lse1) for ``site`` with the sources written since phase 1 (slots
    [n, m)) and an optional ``extra`` source that is not stored (its logit is computed here):
    x (B, T, d) and the merge weights (B, T, 1 + r [+ 1]), the stacked share first (one with
    sigmoid gates, where lse1 is not read)."""

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        token: Tensor,
        out1: Tensor,
        lse1: Tensor,
        extra: Tensor | None,
        store: Store,
        site: int,
        n: int,
    ) -> tuple[Tensor, Tensor]:
        m = store.count
        with _no_autocast(out1.device):
            parts = [lse1[..., None], store.logits[:, :, n:m, site]]
            rinv = lg = None
            if extra is not None:
                _, rinv, lg = _extra_logit(store, site, extra)
                parts.append(lg[..., None])
            c = merge_gates(torch.cat(parts, -1), store.sigmoid)  # (B, T, 1 + r [+ 1])
            cv = c.to(out1.dtype)
            x = out1 * cv[..., :1]
            if m > n:
                x += (cv[..., None, 1 : 1 + m - n] @ store.values[:, :, n:m]).squeeze(-2)
            if extra is not None:
                x.addcmul_(extra, cv[..., -1:])
        # Not out1: each gradient that needs it needs c0 * out1 = x - (the other terms), and x is
        # kept anyway (the branch's norm saves it).
        ctx.save_for_backward(x, extra, c, rinv, lg)  # type: ignore[arg-type]  # None is allowed
        ctx.store, ctx.span = store, (site, n, m)  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(c)
        return x, c

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dx: Tensor, _dc: Any) -> tuple[Any, ...]:
        x, extra, c, rinv, lg = ctx.saved_tensors
        store, (site, n, m) = ctx.store, ctx.span
        grad_values, grad_logits = store.grads()
        r = m - n
        with _no_autocast(dx.device):
            cv = c.to(dx.dtype)
            # Softmax backward, dl_i = c_i (dx.v_i - dx.x), with the stacked part's c0 (dx.out1)
            # written as dx.x minus the other sources' terms. Sigmoid gates: no lse1 to reach.
            dxx = dl0 = None
            if not store.sigmoid:
                dxx = torch.linalg.vecdot(dx, x).to(c.dtype)
                dl0 = (1 - c[..., 0]) * dxx
            if r:
                recent = store.values[:, :, n:m]  # (B, T, r, d)
                dcr = torch.linalg.vecdot(recent, dx[..., None, :]).to(c.dtype)
                if dl0 is not None:
                    dl0 -= torch.linalg.vecdot(c[..., 1 : 1 + r], dcr)
                dxr = None if dxx is None else dxx[..., None]
                grad_logits[:, :, n:m, site] += _logit_grad(c[..., 1 : 1 + r], dcr, dxr)
                grad_values[:, :, n:m].addcmul_(cv[..., 1 : 1 + r, None], dx[..., None, :])
            dextra = None
            if extra is not None:
                ce = c[..., -1]
                dce = torch.linalg.vecdot(dx, extra).to(c.dtype)
                if dl0 is not None:
                    dl0 -= ce * dce
                dle = _logit_grad(ce, dce, dxx)
                dkey = _extra_key_grad(store, site, extra.to(c.dtype), dle, rinv, lg)
                dextra = dkey.to(dx.dtype).addcmul_(dx, cv[..., -1:])  # the key's, the value's
            dout1 = dx * cv[..., :1]
        token = torch.zeros((), device=dx.device)
        return token, dout1, dl0, dextra, None, None, None


class _PairMix(torch.autograd.Function):
    """Block AttnRes's usual site: phase 1's (out1, lse1) against the partial sum ``extra`` and
    nothing else. A softmax over two logits is a sigmoid of their difference, and the mix a
    ``lerp``, which needs a third of ``_SiteMix``'s operators: x (B, T, d) and the partial
    sum's weight (B, T)."""

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        token: Tensor,
        out1: Tensor,
        lse1: Tensor,
        extra: Tensor,
        store: Store,
        site: int,
    ) -> tuple[Tensor, Tensor]:
        with _no_autocast(out1.device):
            _, rinv, lg = _extra_logit(store, site, extra)
            ce = torch.sigmoid(lg - lse1)
            weight = ce[..., None].to(out1.dtype)
            if not any(ctx.needs_input_grad):  # type: ignore[attr-defined]  # inference: one pass
                ctx.mark_non_differentiable(ce)
                return torch.lerp(out1, extra.to(out1.dtype), weight), ce
            diff = extra.to(out1.dtype) - out1
            x = torch.addcmul(out1, diff, weight)
        # x (which the branch's norm keeps anyway) and the difference give back both inputs:
        # one tensor saved per site instead of two.
        ctx.save_for_backward(x, diff, ce, rinv, lg)
        ctx.store, ctx.site = store, site  # type: ignore[attr-defined]
        ctx.mark_non_differentiable(ce)
        return x, ce

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, dx: Tensor, _dce: Any) -> tuple[Any, ...]:
        x, diff, ce, rinv, lg = ctx.saved_tensors
        store, site = ctx.store, ctx.site
        store.grads()
        with _no_autocast(dx.device):
            e = torch.addcmul(x, diff, (1 - ce)[..., None].to(x.dtype)).to(ce.dtype)
            dce = torch.linalg.vecdot(dx, diff)
            dl = dce.to(ce.dtype) * ce * (1 - ce)  # the sigmoid's derivative
            dkey = _extra_key_grad(store, site, e, dl, rinv, lg)
            dextra = dkey.to(dx.dtype).addcmul_(dx, ce[..., None].to(dx.dtype))
            dout1 = dx * (1 - ce)[..., None].to(dx.dtype)
        token = torch.zeros((), device=dx.device)
        return token, dout1, -dl, dextra, None, None


class BufferedSources:
    """``StackedSources``'s interface and function over a ``Store``; ``capacity`` is the number
    of sources one forward appends; ``eps`` None means raw keys, ``hidden`` a window
    (``depth_attention.window_hidden``), ``sigmoid`` sigmoid gates."""

    def __init__(
        self,
        eps: float | None,
        queries: Tensor,
        schedule: Schedule,
        capacity: int,
        hidden: Tensor | None = None,
        sigmoid: bool = False,
    ) -> None:
        self.eps, self.queries, self.schedule, self.capacity = eps, queries, schedule, capacity
        self.hidden, self.sigmoid = hidden, sigmoid
        self.kind = "dwa" if sigmoid else "depth"  # as depth_mixing's gates name them
        self.store: Store | None = None
        self.token: Tensor | None = None
        # start, n, then each site's output and log-sum-exp, and the weights
        self.group: tuple[int, int, tuple[Tensor, ...], tuple[Tensor, ...], Tensor] | None = None

    def append(self, y: Tensor) -> None:
        queries = None
        if self.store is None:
            self.store = Store.like(
                y, self.queries, self.eps, self.capacity, self.hidden, self.sigmoid
            )
            self.token = y.new_zeros(())
            queries = self.queries  # source 0 carries the queries' gradient
        if self.store.count == self.capacity:
            raise RuntimeError(f"more than {self.capacity} sources appended")
        self.token = _Push.apply(self.token, y, queries, self.store)

    def sources(self) -> list[Tensor]:
        if self.store is None:
            return []
        return list(self.store.values[:, :, : self.store.count].unbind(-2))

    def mix(self, site: int, extra: Tensor | None = None) -> tuple[Tensor, Weights]:
        store = self.store
        assert store is not None and self.token is not None, "mix before the first append"
        if self.schedule.is_start(site) or self.group is None:
            end = self.schedule.end(site)
            *parts, w = _GroupMix.apply(self.token, store, site, end)
            g = end - site
            self.group = (site, store.count, tuple(parts[:g]), tuple(parts[g:]), w)
        start, n, outs, lses, w = self.group
        i = site - start
        out1, lse1, w1 = outs[i], lses[i], w[:, :, i]
        if store.count == n and extra is None:  # nothing since phase 1: its answer stands
            # A copy: the branch keeps its input alive, and a view would keep the whole group's.
            return out1.clone(), lambda: w1
        if store.count == n and not self.sigmoid:  # extra only: Block AttnRes's usual site
            x, ce = _PairMix.apply(self.token, out1, lse1, extra, store, site)
            return x, lambda: merged_weights(w1, torch.stack((1 - ce, ce), -1))
        x, c = _SiteMix.apply(self.token, out1, lse1, extra, store, site, n)
        return x, lambda: merged_weights(w1, c)
