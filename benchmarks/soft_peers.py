"""The peers of benchmarks/soft_align.py written here: soft alignment DPs over anti-diagonals
in plain torch (autograd for the backward; in float64 they are the references) and in JAX
(lax.scan over anti-diagonals, vmap over pairs, jit).

``torch_dp``: one state (linear gaps) with the border conventions of ours (charged gaps),
deepblast (0) and soft-DTW (-inf). ``torch_dp3`` / ``jax_dp3``: three states (Gotoh: M, X,
Y, each smoothed; a gap column costs ``go`` when it opens, ``ge`` when it extends; X <-> Y
transitions open), ta.soft_align's recurrences and borders for "global", "local" (an
alignment may start at any cell: M takes lse(., 0); the value adds the empty alignment)
and "semiglobal" (row 0 free, the value over the last row's M and Y). Unreachable entries
hold NEG = -1e30, not -inf, so that no gradient is NaN.
"""

from __future__ import annotations

import math

import torch

NEG = -1e30


def torch_dp(scores: torch.Tensor, gap: float, temperature: float, border: str, score_on_gaps: bool) -> torch.Tensor:
    """Soft DP over anti-diagonals, vectorised over pairs and the cells of a diagonal;
    differentiable by autograd. V[i, j] = T LSE((V[i-1, j-1] + s) / T, (V[i-1, j] + a s - gap) / T,
    (V[i, j-1] + a s - gap) / T), a = score_on_gaps; V[0, 0] = 0 and the other border
    cells: ``charged`` -k gap (NW), ``zero`` 0 (deepblast), ``inf`` -inf (soft-DTW). Value V[N, M]."""
    B, N, M = scores.shape
    T = temperature
    dev, dt = scores.device, scores.dtype
    neg = torch.tensor(-math.inf, dtype=dt, device=dev)
    i = torch.arange(N + 1, device=dev)

    def border_at(k):  # V[0, k] at index 0 and V[k, 0] at index k of diagonal k
        v = torch.full((N + 1,), -math.inf, dtype=dt, device=dev)
        val = {"charged": -k * gap, "zero": 0.0, "inf": -math.inf}[border] if k else 0.0
        v[0] = val if k <= M else -math.inf
        if 0 < k <= N:
            v[k] = val
        return v.expand(B, N + 1)

    prev2, prev1 = border_at(0), border_at(1)
    flat = scores.reshape(B, N * M)
    for k in range(2, N + M + 1):
        j = k - i
        ok = (i >= 1) & (j >= 1) & (j <= M)
        s = flat[:, ((i - 1).clamp(0, N - 1) * M + (j - 1).clamp(0, M - 1))]
        s = torch.where(ok, s, torch.zeros_like(s))
        up = torch.cat([neg.expand(B, 1), prev1[:, :-1]], 1)  # V[i-1, j]
        dg = torch.cat([neg.expand(B, 1), prev2[:, :-1]], 1)  # V[i-1, j-1]
        lf = prev1  # V[i, j-1]
        extra = s if score_on_gaps else torch.zeros_like(s)
        terms = torch.stack([dg + s, up + extra - gap, lf + extra - gap]) / T
        mx = terms.max(0).values
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx)).detach()
        new = T * (mx + torch.log(torch.exp(terms - mx).sum(0)))
        new = torch.where(ok, new, border_at(k))
        prev2, prev1 = prev1, new
    return prev1[:, N]


def _lse(*xs):
    mx = torch.stack(xs).max(0).values.detach()
    return mx + torch.log(sum(torch.exp(x - mx) for x in xs))


def torch_dp3(scores: torch.Tensor, go: float, ge: float, temperature: float, mode: str) -> torch.Tensor:
    """ta.soft_align's value, three states, by anti-diagonals (see the module docstring)."""
    B, N, M = scores.shape
    T = temperature
    o, e = go / T, ge / T
    dev, dt = scores.device, scores.dtype
    i = torch.arange(N + 1, device=dev)
    neg = torch.full((B, N + 1), NEG, dtype=dt, device=dev)
    start = 0.0 if mode in ("global", "semiglobal") else NEG
    m1, x1, y1 = neg, neg, neg  # diagonal k - 1 (here: -1)
    m0 = torch.where(i == 0, start, NEG).to(dt).expand(B, N + 1)  # diagonal 0: cell (0, 0)
    x0, y0 = neg, neg
    flat = scores.reshape(B, N * M) / T
    shift = lambda v: torch.cat([neg[:, :1], v[:, :-1]], 1)  # noqa: E731  (entry i takes i - 1)
    acc = torch.zeros(B, dtype=dt, device=dev)  # local: the empty alignment
    if mode == "semiglobal" and N == 0:
        return acc
    for k in range(1, N + M + 1):
        j = k - i
        inside = (j >= 0) & (j <= M)
        cell = inside & (i >= 1) & (j >= 1)
        s = flat[:, ((i - 1).clamp(0, N - 1) * M + (j - 1).clamp(0, M - 1))]
        prev = _lse(shift(m1), shift(x1), shift(y1))  # diagonal k - 2 at (i - 1, j - 1)
        if mode == "local":
            prev = _lse(prev, torch.zeros_like(prev))
        border_m = NEG if mode != "semiglobal" else 0.0
        m_new = torch.where(cell, s + prev, torch.where(inside & (i == 0), border_m, NEG))
        x_ok = inside & (j >= 1) & ((i >= 1) | (mode == "global"))
        x_new = torch.where(x_ok, _lse(m0 - o, y0 - o, x0 - e), NEG)
        y_ok = inside & (i >= 1)
        y_new = torch.where(y_ok, _lse(shift(m0) - o, shift(x0) - o, shift(y0) - e), NEG)
        m1, x1, y1, m0, x0, y0 = m0, x0, y0, m_new, x_new, y_new
        if mode == "local":
            acc = _lse(acc, torch.logsumexp(torch.where(cell, m_new, NEG), 1))
        elif mode == "semiglobal" and k >= N:
            acc = _lse(acc, m_new[:, N], y_new[:, N]) if k > N else _lse(m_new[:, N], y_new[:, N])
    if mode == "global":
        return T * _lse(m0[:, N], x0[:, N], y0[:, N])
    return T * acc


def jax_nw(gap: float, temperature: float):
    """(forward, forward + backward) jitted functions of float32 scores [B, N, M]: soft NW by
    lax.scan over anti-diagonals of one pair, vmap over the batch; ours' convention."""
    import jax
    import jax.numpy as jnp

    def one(s):
        N, M = s.shape
        i = jnp.arange(N + 1)
        NEG = -1e30  # finite: no NaN in the gradient of unreachable entries

        def border_at(k):
            v = jnp.full((N + 1,), NEG, s.dtype)
            v = v.at[0].set(jnp.where(k <= M, -k * gap, NEG))
            return jnp.where((i == k) & (k <= N), -k * gap, v)

        def step(carry, k):
            prev1, prev2 = carry
            j = k - i
            ok = (i >= 1) & (j >= 1) & (j <= M)
            sk = jnp.where(ok, s[jnp.clip(i - 1, 0, N - 1), jnp.clip(j - 1, 0, M - 1)], 0.0)
            up = jnp.concatenate([jnp.full((1,), NEG, s.dtype), prev1[:-1]])
            dg = jnp.concatenate([jnp.full((1,), NEG, s.dtype), prev2[:-1]])
            terms = jnp.stack([dg + sk, up - gap, prev1 - gap]) / temperature
            new = temperature * jax.nn.logsumexp(terms, axis=0)
            new = jnp.where(ok, new, border_at(k))
            return (new, prev1), None

        init = (border_at(1), border_at(0))
        (last, _), _ = jax.lax.scan(step, init, jnp.arange(2, N + M + 1))
        return last[N]

    batched = jax.vmap(one)

    def loss(s):
        v = batched(s)
        return v.sum(), v

    fwd = jax.jit(batched)
    grad = jax.jit(jax.value_and_grad(loss, has_aux=True))  # ((sum, values), gradient)
    return fwd, grad


def jax_dp3(go: float, ge: float, temperature: float, mode: str):
    """(forward, forward + backward) jitted functions of float32 scores [B, N, M]: torch_dp3's
    recurrences (global or local) by lax.scan over anti-diagonals of one pair, vmap over pairs."""
    import jax
    import jax.numpy as jnp

    o, e = go / temperature, ge / temperature

    def lse(*xs):
        return jax.nn.logsumexp(jnp.stack(xs), axis=0)

    def one(s):
        N, M = s.shape
        s = s / temperature
        i = jnp.arange(N + 1)
        neg = jnp.full((N + 1,), NEG, s.dtype)

        def shift(v):
            return jnp.concatenate([neg[:1], v[:-1]])

        def step(carry, k):
            m1, x1, y1, m0, x0, y0, acc = carry
            j = k - i
            inside = (j >= 0) & (j <= M)
            cell = inside & (i >= 1) & (j >= 1)
            sk = s[jnp.clip(i - 1, 0, N - 1), jnp.clip(j - 1, 0, M - 1)]
            prev = lse(shift(m1), shift(x1), shift(y1))
            if mode == "local":
                prev = lse(prev, jnp.zeros_like(prev))
            m_new = jnp.where(cell, sk + prev, NEG)
            x_ok = inside & (j >= 1) & ((i >= 1) | (mode == "global"))
            x_new = jnp.where(x_ok, lse(m0 - o, y0 - o, x0 - e), NEG)
            y_new = jnp.where(inside & (i >= 1), lse(shift(m0) - o, shift(x0) - o, shift(y0) - e), NEG)
            if mode == "local":
                acc = lse(acc, jax.nn.logsumexp(jnp.where(cell, m_new, NEG)))
            return (m0, x0, y0, m_new, x_new, y_new, acc), None

        m0 = jnp.where(i == 0, 0.0 if mode == "global" else NEG, NEG).astype(s.dtype)
        init = (neg, neg, neg, m0, neg, neg, jnp.zeros((), s.dtype))
        (_, _, _, m, x, y, acc), _ = jax.lax.scan(step, init, jnp.arange(1, N + M + 1))
        return temperature * (lse(m[N], x[N], y[N]) if mode == "global" else acc)

    batched = jax.vmap(one)

    def loss(s):
        v = batched(s)
        return v.sum(), v

    return jax.jit(batched), jax.jit(jax.value_and_grad(loss, has_aux=True))
