"""Levenshtein distances on the CPU through rapidfuzz (Hyyro's bit-parallel DP, 64 cells
a word, on torch.get_num_threads() threads); levenshtein.py's row DP where it does not
reach.

Each sequence becomes a Python str of its codes as characters (rapidfuzz compares
characters for equality, as we compare codes): bytes as latin-1, int32 token ids as
their code points, ids outside 0..0x10FFFF renumbered by rank first (equality kept).
With a max_distance, rapidfuzz's score_cutoff gives our convention: pairs further apart
report max_distance + 1.
"""

from __future__ import annotations

import numpy as np
import torch

from . import levenshtein as torch_dp

try:
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein
    from rapidfuzz.process import cpdist  # noqa: F401  (3.8 and later)
except ImportError:  # (missing, or too old: the row DP then)
    process = None

UNICODE = 0x110000  # code points a str can hold (lone surrogates included)


def levenshtein_pairs(codes, a_starts, a_lens, b_starts, b_lens, cdist: bool = False,
                      max_distance: int = -1) -> torch.Tensor:
    """int32 distances of pairs (a_i, b_i), or of all pairs [len(a) * len(b)] with cdist
    (levenshtein.levenshtein_pairs' contract), capped at max_distance + 1 (-1: none)."""
    text = _text(codes) if process is not None else None
    if text is None:
        d = torch_dp.levenshtein_pairs(codes, a_starts, a_lens, b_starts, b_lens, cdist=cdist)
        return d if max_distance < 0 else d.clamp(max=max_distance + 1)
    a = [text[s : s + n] for s, n in zip(a_starts.tolist(), a_lens.tolist())]
    b = [text[s : s + n] for s, n in zip(b_starts.tolist(), b_lens.tolist())]
    if not a or not b:
        return torch.empty(len(a) * len(b) if cdist else 0, dtype=torch.int32)
    run = process.cdist if cdist else process.cpdist
    d = run(a, b, scorer=Levenshtein.distance, dtype=np.int32, workers=torch.get_num_threads(),
            score_cutoff=None if max_distance < 0 else max_distance)
    return torch.from_numpy(d).reshape(-1)


def _text(codes: torch.Tensor) -> str | None:
    """All codes as one str, a character per code (None: more distinct ids than a str holds)."""
    if codes.dtype == torch.uint8:
        return codes.numpy().tobytes().decode("latin-1")
    if codes.numel() and (int(codes.min()) < 0 or int(codes.max()) >= UNICODE):
        distinct, codes = torch.unique(codes, return_inverse=True)
        if distinct.numel() > UNICODE:
            return None
    return codes.to(torch.int32).numpy().astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
