"""Approximate string matching with edit distance: launch helpers over the Myers kernel.

A long text is cut into chunks that each own a stretch of end positions and start
scanning ``overlap`` codes earlier (the second paper's overlapping chunks), so one
pattern fills the GPU. A chunk sees only substrings starting inside it: its D[m][j] is
never below the true one, and equals it wherever the true one has an alignment no
longer than the overlap: m + k for a hit with <= k edits, 2m for any best value (an
alignment with d <= m edits spans <= m + d codes). So hits, best values and profiles are
exact.

Pure: imports only torch and triton.
"""

import torch
import triton

from . import myers

TARGET_LANES = 1 << 17  # chunks x patterns enough to fill a GPU several times over
MAX_CHUNK = 1 << 16
OVERLAP_SHARE = 1  # a chunk owns at least overlap / OVERLAP_SHARE ends (measured: 1 beats 2 and 4)
TABLE_BYTES = 1 << 28  # match masks per launch
FAR = 1 << 62  # the "own" end of a padding chunk: it reports nothing


def chunks(text_offsets, total: int, n_pat: int, overlap: int):
    """Chunks that never cross a text: (scan start, scan length, first owned end, text id).

    Each text of n codes gets max(1, cdiv(n, L)) chunks; the first owns ends from the
    text's start (the empty match), the others from their first code + 1. Sized by a
    bound known without a host read; padding chunks have text -1.
    """
    dev = text_offsets.device
    n_texts = text_offsets.numel() - 1
    size = min(MAX_CHUNK, max(64, overlap // OVERLAP_SHARE, triton.cdiv(total * max(n_pat, 1), TARGET_LANES)))
    lens = text_offsets[1:] - text_offsets[:-1]
    per_text = torch.clamp((lens + size - 1) // size, min=1)
    ends = torch.cumsum(per_text, 0)
    n_chunks = total // size + 2 * n_texts  # >= sum(max(1, cdiv(n, size)))
    idx = torch.arange(n_chunks, device=dev)
    t = torch.searchsorted(ends, idx, right=True).clamp(max=n_texts)
    tc = t.clamp(max=n_texts - 1)
    c = idx - (ends[tc] - per_text[tc])  # chunk index within its text
    a = text_offsets[tc] + c * size  # first owned code
    b = torch.minimum(a + size, text_offsets[tc + 1])
    scan = torch.maximum(text_offsets[tc], a - overlap)
    real = t < n_texts
    own = torch.where(c == 0, a, a + 1)
    return (torch.where(real, scan, 0), torch.where(real, b - scan, 0), torch.where(real, own, FAR),
            torch.where(real, t, -1))


def _pattern_groups(n_pat: int, n_sym: int, words: int):
    per = max(1, TABLE_BYTES // (n_sym * words * 8))
    return [(p0, min(n_pat, p0 + per)) for p0 in range(0, n_pat, per)]


def asm_hits(text, text_offsets, pat, pat_starts, pat_lens, longest: int, n_sym: int, k: int, capacity: int):
    """Every (end, pattern, distance, text) with D[m][end] <= k, in no particular order:
    (count int64[1], end int64[capacity], pattern int32[...], distance int32[...], text int64[...]).
    Ends past ``capacity`` are counted, not written."""
    dev = text.device
    cap = max(capacity, 1)
    counter = torch.zeros(1, dtype=torch.int64, device=dev)
    end = torch.empty(cap, dtype=torch.int64, device=dev)
    who = torch.empty(cap, dtype=torch.int32, device=dev)
    dist = torch.empty(cap, dtype=torch.int32, device=dev)
    tid_out = torch.empty(cap, dtype=torch.int64, device=dev)
    words = myers.n_words(longest)
    k = min(k, longest)  # no distance exceeds the pattern's length; keeps chunk stretches < 2^31
    scan, length, own, tid = chunks(text_offsets, text.numel(), pat_lens.numel(), longest + k)
    for p0, p1 in _pattern_groups(pat_lens.numel(), n_sym, words):
        peq = myers.match_masks(pat, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words)
        myers.run("hits", text, peq, pat_lens[p0:p1], scan, length, n_programs_q=p1 - p0, own=own, tag=tid,
                  k=k, q0=p0, out=end, out2=who, out3=dist, out4=tid_out, counter=counter, capacity=capacity)
    return counter, end, who, dist, tid_out


def asm_best(text, text_offsets, pat, pat_starts, pat_lens, longest: int, n_sym: int):
    """(distance int32[n_pat, n_texts], end int64[n_pat, n_texts]): each pattern's least
    edit distance to a substring of each text and the first end (absolute) reaching it."""
    dev = text.device
    n_pat, n_texts = pat_lens.numel(), text_offsets.numel() - 1
    words = myers.n_words(longest)
    scan, length, own, tid = chunks(text_offsets, text.numel(), n_pat, 2 * longest)
    n_chunks = tid.numel()
    best = torch.empty((n_pat, n_chunks), dtype=torch.int32, device=dev)
    at = torch.empty((n_pat, n_chunks), dtype=torch.int64, device=dev)
    for p0, p1 in _pattern_groups(n_pat, n_sym, words):
        peq = myers.match_masks(pat, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words)
        myers.run("best", text, peq, pat_lens[p0:p1], scan, length, n_programs_q=p1 - p0, own=own,
                  out=best[p0:p1], out2=at[p0:p1])
    return best_per_text((best.to(torch.int64) << 42) + at, tid, n_texts)


def best_per_text(key, tid, n_texts: int):
    """The least key (distance << 42) + end of each pattern over each text's chunks:
    (distance int32[n_pat, n_texts], end int64[n_pat, n_texts]). ``key``: [n_pat, chunks]."""
    out = torch.full((key.shape[0], n_texts + 1), 1 << 62, dtype=torch.int64, device=key.device)
    # padding chunks (text -1) land in the extra last column: no boolean mask, no host read
    out.scatter_reduce_(1, torch.where(tid >= 0, tid, n_texts).expand(key.shape[0], -1), key, "amin")
    out = out[:, :n_texts]
    return (out >> 42).to(torch.int32), out & ((1 << 42) - 1)


def asm_profile(text, text_offsets, pat, pat_starts, pat_lens, longest: int, n_sym: int):
    """int32[n_pat, len(text)]: D[m][j] at every end j, in column j - 1 (the text's flat layout)."""
    n_pat = pat_lens.numel()
    out = torch.empty((n_pat, text.numel()), dtype=torch.int32, device=text.device)
    words = myers.n_words(longest)
    scan, length, own, _ = chunks(text_offsets, text.numel(), n_pat, 2 * longest)
    for p0, p1 in _pattern_groups(n_pat, n_sym, words):
        peq = myers.match_masks(pat, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words)
        myers.run("profile", text, peq, pat_lens[p0:p1], scan, length, n_programs_q=p1 - p0, own=own,
                  out=out[p0:p1], out_stride=text.numel())
    return out


def hit_starts(text, text_start, end, who, dist, pat, pat_starts, pat_lens, longest: int, n_sym: int, k: int):
    """The earliest start of an alignment with ``dist`` (<= k) edits ending at each hit's
    end: the reversed pattern run backwards from the end over at most m + dist codes."""
    words = myers.n_words(longest)
    k = min(k, longest)
    who = who.to(torch.int64)
    lane_start = torch.maximum(text_start, end - pat_lens[who] - dist)
    length = end - lane_start
    out = torch.empty_like(end)
    groups = _pattern_groups(pat_lens.numel(), n_sym, words)
    for p0, p1 in groups:
        peq = myers.match_masks(pat, pat_starts[p0:p1], pat_lens[p0:p1], n_sym, words, reverse=True)
        if len(groups) == 1:
            myers.run("last", text, peq, pat_lens, lane_start, length, lane_pats=who, tag=dist, k=k, out=out)
            continue
        mine = torch.nonzero((who >= p0) & (who < p1)).squeeze(1)
        part = torch.empty(mine.numel(), dtype=torch.int64, device=end.device)
        myers.run("last", text, peq, pat_lens[p0:p1], lane_start[mine], length[mine], lane_pats=who[mine] - p0,
                  tag=dist[mine], k=k, out=part)
        out[mine] = part
    return end - out
