"""Hamming distances on the CPU, vectorised with torch: the same integers as the kernels.

Small alphabets count matches as one-hot matrix products (float32 holds the counts
exactly below 2**24); large ones compare codes directly.
"""

from __future__ import annotations

import torch

_ONEHOT_MAX_SYMBOLS = 32
_EXACT_F32 = 1 << 24
_CHUNK_ELEMS = 1 << 24  # elements per broadcast compare or one-hot chunk


def hamming_pairs(a_codes, a_offsets, b_codes, b_offsets) -> torch.Tensor:
    """int32[B]; pairs of unequal length count the overhang as mismatches."""
    la = a_offsets[1:] - a_offsets[:-1]
    lb = b_offsets[1:] - b_offsets[:-1]
    n = torch.minimum(la, lb)
    pair = torch.repeat_interleave(torch.arange(n.numel()), n)
    j = torch.arange(pair.numel()) - (torch.cumsum(n, 0) - n)[pair]
    ne = (a_codes[a_offsets[:-1][pair] + j] != b_codes[b_offsets[:-1][pair] + j]).to(torch.int64)
    out = torch.zeros(n.numel(), dtype=torch.int64).index_add_(0, pair, ne)
    return (out + (torch.maximum(la, lb) - n)).to(torch.int32)


def _onehot(codes: torch.Tensor, S: int) -> torch.Tensor:
    """[..., L] codes -> float32 [..., L * S]; codes outside [0, S) give zeros."""
    oh = codes.to(torch.int64).unsqueeze(-1) == torch.arange(S)
    return oh.reshape(*codes.shape[:-1], codes.shape[-1] * S).to(torch.float32)


def hamming_cdist(a: torch.Tensor, b: torch.Tensor, n_symbols: int) -> torch.Tensor:
    """int32[Na, Nb] for code matrices a [Na, L], b [Nb, L]."""
    na, L = a.shape
    nb = b.shape[0]
    out = torch.empty((na, nb), dtype=torch.int32)
    if na == 0 or nb == 0:
        return out
    if n_symbols <= _ONEHOT_MAX_SYMBOLS and L < _EXACT_F32:
        boh = _onehot(b, n_symbols)
        rows = max(1, _CHUNK_ELEMS // max(1, L * n_symbols))
        for i in range(0, na, rows):
            matches = _onehot(a[i : i + rows], n_symbols) @ boh.T
            out[i : i + rows] = L - matches.round().to(torch.int32)
    else:
        rows = max(1, _CHUNK_ELEMS // max(1, nb * L))
        for i in range(0, na, rows):
            out[i : i + rows] = (a[i : i + rows, None, :] != b[None]).sum(-1, dtype=torch.int32)
    return out


def hamming_windows(text, text_offsets, pat, pat_starts, pat_lens, n_symbols: int,
                    table=None, k: int = 0, search: bool = True):
    """Every pattern at every window start of every text (see the kernel's docstring).

    search=True: (pos int64[n], pattern int32[n], distance int32[n]) with distance <= k;
    search=False: int32[n_patterns, len(text)], -1 where a pattern does not fit.
    """
    total = text.numel()
    n_pat = pat_lens.numel()
    lengths = text_offsets[1:] - text_offsets[:-1]
    text_end = torch.repeat_interleave(text_offsets[1:], lengths)
    prof = None if search else torch.full((n_pat, total), -1, dtype=torch.int32)
    hits = []
    for m in torch.unique(pat_lens).tolist():
        group = torch.nonzero(pat_lens == m).flatten()
        if m > total:
            continue
        idx = pat_starts[group][:, None] + torch.arange(m)
        pcodes = pat[idx]  # [G, m]
        windows = text.unfold(0, m, 1)  # [total - m + 1, m], a view
        fits = torch.arange(windows.shape[0]) + m <= text_end[: windows.shape[0]]
        dist = _window_distances(windows, pcodes, n_symbols, table)  # [W, G]
        if search:
            w, g = torch.nonzero((dist <= k) & fits[:, None], as_tuple=True)
            hits.append((w, group[g], dist[w, g]))
        else:
            prof[group, : windows.shape[0]] = torch.where(fits[:, None], dist, -1).T
    if not search:
        return prof
    if not hits:
        return torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int32), torch.empty(0, dtype=torch.int32)
    return (torch.cat([h[0] for h in hits]), torch.cat([h[1] for h in hits]).to(torch.int32),
            torch.cat([h[2] for h in hits]).to(torch.int32))


def _window_distances(windows, pcodes, n_symbols: int, table) -> torch.Tensor:
    """int32[W, G]: distance of each window to each pattern (all of length m)."""
    W, m = windows.shape
    G = pcodes.shape[0]
    out = torch.empty((W, G), dtype=torch.int32)
    if n_symbols <= _ONEHOT_MAX_SYMBOLS:
        if table is None:
            poh = _onehot(pcodes, n_symbols)
        else:
            poh = table[pcodes.to(torch.int64)][..., :n_symbols].reshape(G, m * n_symbols).to(torch.float32)
        rows = max(1, _CHUNK_ELEMS // (m * n_symbols))
        for i in range(0, W, rows):
            matches = _onehot(windows[i : i + rows], n_symbols) @ poh.T
            out[i : i + rows] = m - matches.round().to(torch.int32)
    else:
        rows = max(1, _CHUNK_ELEMS // (G * m))
        for i in range(0, W, rows):
            win = windows[i : i + rows, None, :]
            if table is None:
                eq = win == pcodes[None]
            else:
                eq = table[pcodes[None].to(torch.int64), win.to(torch.int64)].bool()
            out[i : i + rows] = m - eq.sum(-1, dtype=torch.int32)
    return out
