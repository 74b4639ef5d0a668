"""Full alignments (tracebacks) of chosen pairs: coordinates, CIGAR, identity, a view."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .align import _scoring_and_batches
from .inputs import INT64_MAX, check_choice, check_int, max_length
from .ops.align import MODES
from .ops.traceback import MAX_CELLS
from .scoring import Scoring

OPS = "=XID"


@dataclass(frozen=True)
class Alignment:
    """One optimal alignment of a query with a target.

    Coordinates are 0-based, ends exclusive: the alignment covers
    ``query[query_start:query_end]`` and ``target[target_start:target_end]``; score and
    ends are align_score's. ``cigar`` is an extended CIGAR with the target as the
    reference (as SAM): ``=`` identical residues, ``X`` a substitution, ``I`` a query
    residue against a gap, ``D`` a target residue against a gap; "" for the empty local
    alignment. ``query_aligned`` / ``target_aligned`` are the two rows with ``-`` for
    gaps; ``markup`` the middle row of the view: ``|`` identical, ``:`` a positive
    substitution score, ``.`` a zero one, a space otherwise (EMBOSS's symbols).
    """

    score: int
    query_start: int
    query_end: int
    target_start: int
    target_end: int
    cigar: str
    query_aligned: str
    target_aligned: str
    markup: str

    @property
    def columns(self) -> int:
        """Alignment columns (substitutions and gap positions)."""
        return len(self.markup)

    @property
    def matches(self) -> int:
        """Columns of identical residues."""
        return self.markup.count("|")

    @property
    def identity(self) -> float:
        """matches / columns (0.0 for the empty alignment)."""
        return self.matches / self.columns if self.columns else 0.0

    def render(self, width: int = 60, names: tuple[str, str] = ("query", "target")) -> str:
        """The three-line view in blocks of ``width`` columns, with 1-based positions of
        each block's first and last residue (EMBOSS's layout)."""
        width = check_int("width", width, 1)
        if not self.columns:
            return f"{names[0]} and {names[1]}: empty alignment (score {self.score})"
        label = max(len(n) for n in names)
        digits = len(str(max(self.query_end, self.target_end)))
        blocks, q_at, t_at = [], self.query_start, self.target_start
        for c in range(0, self.columns, width):
            q, m, t = (row[c : c + width] for row in (self.query_aligned, self.markup, self.target_aligned))
            q_used, t_used = len(q) - q.count("-"), len(t) - t.count("-")
            lines = [f"{names[0]:<{label}} {q_at + (q_used > 0):>{digits}} {q} {q_at + q_used}",
                     f"{'':<{label}} {'':>{digits}} {m}",  # (kept whole: a block is always 3 lines)
                     f"{names[1]:<{label}} {t_at + (t_used > 0):>{digits}} {t} {t_at + t_used}"]
            blocks.append("\n".join(lines))
            q_at, t_at = q_at + q_used, t_at + t_used
        return "\n\n".join(blocks)

    def __str__(self) -> str:
        return self.render()


def traceback(queries, targets, scoring: Scoring | None = None, mode: str = "local", *, pairs=None,
              max_cells: int = MAX_CELLS, check: bool = True) -> list[Alignment]:
    """One optimal alignment per pair: query b with target b, or with ``pairs=(query
    indices, target indices)`` query pairs[0][p] with target pairs[1][p] (the top hits
    of ``ta.search``: ``pairs=(arange(n_queries).repeat_interleave(k), r.indices.flatten())``).

    Scores, modes and ends are align_score's (same ``scoring`` default, same ties).
    Among co-optimal paths the walk back from the end cell prefers, at each cell, a
    local start (H = 0: the shortest local alignment), then the diagonal, then a gap in
    the query (D), then a gap in the target (I), and closes a gap rather than extending
    it; CPU, interpreter and GPU give the same path. Memory: one byte per DP cell of the
    rectangle (query_end + 1) x (target_end + 1) of each pair, all pairs at once;
    more than ``max_cells`` cells raise (pass fewer pairs per call, or cut the target
    to the hit's region); beside it align_score's, and 28 B per query row of each pair.

    >>> import torchalign as ta
    >>> a = ta.traceback(["HEAGAWGHEE"], ["PAWHEAE"], mode="local")[0]
    >>> a.score, (a.query_start, a.query_end, a.target_start, a.target_end), a.cigar
    (17, (4, 9, 1, 5), '2=1I2=')
    >>> print(a)
    query  5 AWGHE 9
             || ||
    target 2 AW-HE 5
    >>> a.identity
    0.8
    """
    check_choice("mode", mode, MODES)
    max_cells = min(check_int("max_cells", max_cells, 0), INT64_MAX)  # (a cell count is a tensor size)
    scoring, (q, t), table = _scoring_and_batches(("queries", "targets"), (queries, targets), scoring)
    pair_q, pair_t = _pairs(pairs, len(q), len(t), q.device)
    out = torch.ops.torchalign.traceback(q.codes, q.offsets, t.codes, t.offsets, pair_q, pair_t, table,
                                         scoring.gap_open, scoring.gap_extend, mode, max_length(q), max_length(t),
                                         max_cells, check)
    return alignments(*out, q, t, pair_q, pair_t, scoring)


def _pairs(pairs, n_q: int, n_t: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    if pairs is None:
        if n_q != n_t:
            raise ValueError(f"traceback: queries has {n_q} sequences and targets {n_t}; pass equal counts, or "
                             "pairs=(query indices, target indices)")
        b = torch.arange(n_q, device=device)
        return b, b
    if not isinstance(pairs, (tuple, list)) or len(pairs) != 2:
        raise TypeError("pairs: expected (query indices, target indices)")
    out = []
    for name, p in zip(("query", "target"), pairs):
        p = torch.as_tensor(p, device=device) if not isinstance(p, torch.Tensor) else p
        if p.dtype.is_floating_point or p.dtype == torch.bool or p.ndim != 1:
            raise TypeError(f"pairs: the {name} indices must be a 1-D integer tensor or list")
        if p.device != torch.device(device):
            raise ValueError(f"pairs: the {name} indices are on {p.device}, the sequences on {device}")
        out.append(p.to(torch.int64))
    if out[0].numel() != out[1].numel():
        raise ValueError(f"pairs: {out[0].numel()} query indices but {out[1].numel()} target indices")
    return out[0], out[1]


def alignments(score, coords, ops_, offsets, q, t, pair_q, pair_t, scoring: Scoring) -> list[Alignment]:
    """Alignment objects from the op's tensors: one host copy of the scores, coordinates,
    ops and the aligned residues only (not the batches: a database stays on the GPU)."""
    q_res, q_at = _aligned_codes(q, pair_q, coords[:, 0], coords[:, 1])
    t_res, t_at = _aligned_codes(t, pair_t, coords[:, 2], coords[:, 3])
    score, coords, offsets = score.tolist(), coords.tolist(), offsets.tolist()
    codes = ops_.cpu().numpy()
    table = scoring.table.numpy()
    symbols = _symbols(scoring.alphabet)
    out = []
    for p in range(len(score)):
        qs, qe, ts, te = coords[p]
        qa = q_res[q_at[p] : q_at[p] + qe - qs]
        ta = t_res[t_at[p] : t_at[p] + te - ts]
        out.append(_alignment(score[p], qs, qe, ts, te, codes[offsets[p] : offsets[p + 1]], qa, ta, table, symbols))
    return out


def _aligned_codes(batch, pair, start, end) -> tuple[np.ndarray, list[int]]:
    """The codes of sequence pair[p] from start[p] to end[p] for every p, back to back
    (int64, on the host), and where each pair's run begins."""
    lens = end - start
    first = torch.cumsum(lens, 0) - lens
    total = int(lens.sum()) if lens.numel() else 0
    which = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens, output_size=total)
    at = batch.offsets[:-1][pair][which] + start[which] + torch.arange(total, device=lens.device) - first[which]
    return batch.codes[at].cpu().numpy().astype(np.int64), first.tolist()


def _symbols(alphabet) -> np.ndarray:
    """code -> one character (token ids have no symbols: '?')."""
    if alphabet.name == "bytes":
        return np.array([chr(c) for c in range(256)])
    if alphabet.symbols is None or alphabet.name == "unicode":
        return np.array([])
    return np.array(list(alphabet.symbols))


def _alignment(score, qs, qe, ts, te, ops_, qa, ta, table, symbols) -> Alignment:
    ops_ = ops_.astype(np.int64)
    # the residue index of each column in the query / target (-1 in a gap)
    q_used, t_used = ops_ != 3, ops_ != 2  # D: no query residue; I: no target one
    qi = np.where(q_used, np.cumsum(q_used) - 1, -1)
    ti = np.where(t_used, np.cumsum(t_used) - 1, -1)
    assert q_used.sum() == qe - qs and t_used.sum() == te - ts, "traceback: path and coordinates disagree"

    def row(idx, codes):
        if symbols.size == 0:
            return "?" * idx.size
        picked = codes[np.maximum(idx, 0)] if codes.size else np.zeros(idx.size, dtype=np.int64)
        return "".join(np.where(idx >= 0, symbols[np.minimum(picked, symbols.size - 1)], "-").tolist())

    sub = np.zeros(ops_.size, dtype=np.int64)
    both = (qi >= 0) & (ti >= 0)
    if both.any():
        sub[both] = table[qa[qi[both]], ta[ti[both]]]
    markup = np.where(ops_ == 0, "|", np.where(both & (sub > 0), ":", np.where(both & (sub == 0), ".", " ")))
    return Alignment(score, qs, qe, ts, te, _cigar(ops_), row(qi, qa), row(ti, ta), "".join(markup.tolist()))


def _cigar(ops_: np.ndarray) -> str:
    if ops_.size == 0:
        return ""
    cut = np.flatnonzero(np.diff(ops_)) + 1
    starts = np.concatenate([[0], cut])
    lens = np.diff(np.concatenate([starts, [ops_.size]]))
    return "".join(f"{n}{OPS[c]}" for n, c in zip(lens.tolist(), ops_[starts].tolist()))
