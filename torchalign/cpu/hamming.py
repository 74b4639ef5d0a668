"""Hamming distances on the CPU, vectorised with torch: the same integers as the kernels.

Small alphabets count matches as one-hot matrix products (float32 holds the counts
exactly below 2**24); large ones compare codes directly.
"""

from __future__ import annotations

import torch

_ONEHOT_MAX_SYMBOLS = 32
_EXACT_F32 = 1 << 24
_CHUNK_ELEMS = 1 << 24  # elements per broadcast compare or one-hot chunk
BLOCK_ELEMS = 1 << 22  # window x pattern distances held at once by hamming_windows (16 MB)


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
                    table=None, k: int = 0, search: bool = True, capacity: int | None = None):
    """Every pattern at every window start of every text (see the kernel's docstring).

    search=True: (count, pos int64[n], pattern int32[n], distance int32[n]) of the windows
    with distance <= k; past ``capacity`` hits, hits are counted but no longer kept (as the
    kernel's counter does). search=False: int32[n_patterns, len(text)], -1 where a pattern
    does not fit. Working memory is bounded by BLOCK_ELEMS, whatever the text's length:
    the text runs in slices of windows against groups of patterns (see _Block).
    """
    total = text.numel()
    prof = None if search else torch.full((pat_lens.numel(), total), -1, dtype=torch.int32)
    hits, count = [], 0
    for m in torch.unique(pat_lens).tolist():
        if m > total:
            continue
        group = torch.nonzero(pat_lens == m).flatten()
        windows = text.unfold(0, m, 1)  # [total - m + 1, m], a view
        width = max(1, min(group.numel(), BLOCK_ELEMS // _Block.per_pattern(m, n_symbols)))
        for g0 in range(0, group.numel(), width):
            g = group[g0 : g0 + width]
            block = _Block(pat[pat_starts[g][:, None] + torch.arange(m)], n_symbols, table)
            for w0 in range(0, windows.shape[0], block.rows):
                w1 = min(w0 + block.rows, windows.shape[0])
                w = torch.arange(w0, w1)
                fits = w + m <= text_offsets[torch.searchsorted(text_offsets, w, right=True)]  # inside one text
                dist = block.distances(windows[w0:w1])  # [w1 - w0, G]
                if not search:
                    prof[g, w0:w1] = torch.where(fits[:, None], dist, -1).T
                    continue
                wi, gi = torch.nonzero(block.within(dist, k, fits), as_tuple=True)
                count += wi.numel()
                if capacity is not None and count > capacity:
                    hits = []  # too many: the op raises with the count
                elif wi.numel():
                    hits.append((wi + w0, g[gi], dist[wi, gi]))
    if not search:
        return prof
    if not hits:
        return count, torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int32), \
            torch.empty(0, dtype=torch.int32)
    return (count, torch.cat([h[0] for h in hits]), torch.cat([h[1] for h in hits]).to(torch.int32),
            torch.cat([h[2] for h in hits]).to(torch.int32))


class _Block:
    """Distances of slices of windows to G patterns of length m, in buffers allocated once
    per pattern group and reused by every slice: at most BLOCK_ELEMS elements each. (Large
    temporaries malloc'd and freed per slice left heap holes that the small hit tensors
    kept between them pinned, and the heap grew with the text: 2.7 GB for 5 Mbp.)"""

    @staticmethod
    def per_pattern(m: int, n_symbols: int) -> int:
        """Elements per pattern: its one-hot rows, or its codes compared directly."""
        return m * (n_symbols if n_symbols <= _ONEHOT_MAX_SYMBOLS else 1)

    def __init__(self, pcodes, n_symbols: int, table):
        G, m = pcodes.shape
        self.m, self.onehot = m, n_symbols <= _ONEHOT_MAX_SYMBOLS
        per_window = max(G, m * n_symbols) if self.onehot else G * m
        self.rows = max(1, BLOCK_ELEMS // per_window)
        self.dist = torch.empty((self.rows, G), dtype=torch.int32)
        self.mask = torch.empty((self.rows, G), dtype=torch.bool)
        if self.onehot:
            S = n_symbols
            if table is None:
                self.poh = _onehot(pcodes, S)  # [G, m * S]
            else:
                self.poh = table[pcodes.to(torch.int64)][..., :S].reshape(G, m * S).to(torch.float32)
            self.symbols = torch.arange(S)
            self.eq = torch.empty((self.rows, m, S), dtype=torch.bool)
            self.oh = torch.empty((self.rows, m * S), dtype=torch.float32)
            self.mm = torch.empty((self.rows, G), dtype=torch.float32)
        else:
            self.pcodes, self.table = pcodes, table
            self.same = torch.empty((self.rows, G, m), dtype=torch.bool)

    def distances(self, windows: torch.Tensor) -> torch.Tensor:
        """int32[r, G] (a view of the buffer) for windows [r, m], r <= rows."""
        r = windows.shape[0]
        dist = self.dist[:r]
        if self.onehot:
            torch.eq(windows.unsqueeze(-1), self.symbols, out=self.eq[:r])
            self.oh[:r].copy_(self.eq[:r].view(r, -1))
            torch.mm(self.oh[:r], self.poh.T, out=self.mm[:r])  # matches (exact in float32: m < 2^24)
            dist.copy_(self.mm[:r].round_())
        else:
            same = self.same[:r]
            if self.table is None:
                torch.eq(windows[:, None, :], self.pcodes[None], out=same)
            else:
                same.copy_(self.table[self.pcodes[None].to(torch.int64), windows[:, None, :].to(torch.int64)])
            torch.sum(same, -1, dtype=torch.int32, out=dist)
        return dist.neg_().add_(self.m)

    def within(self, dist: torch.Tensor, k: int, fits: torch.Tensor) -> torch.Tensor:
        """bool[r, G]: distance <= k and the window inside one text."""
        mask = self.mask[: dist.shape[0]]
        return torch.le(dist, k, out=mask).logical_and_(fits[:, None])
