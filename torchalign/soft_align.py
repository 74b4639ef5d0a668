"""Differentiable (soft) alignment: smoothed Needleman-Wunsch, Smith-Waterman and semiglobal
scores with autograd, and the expected alignment.

The value is T log sum over alignments a of exp(score(a) / T): each alignment (a sequence
of columns: query residue i against target residue j, a target residue against a gap, a
query residue against a gap) counted once, its score the one ta.align_score gives it.
Scores are similarities (higher is better), gaps positive costs: a gap of length L costs
gap_open + (L - 1) gap_extend; gap_extend=None is linear (each gap position costs
gap_open). As T -> 0 the value tends to the best score (ta.align_score's, for integer
scores given by a substitution matrix).

Recurrences (temperature 1; the op divides scores and gaps by T and multiplies the result
by T). Cells (i, j), 0 <= i <= n, 0 <= j <= m, s[i, j] = scores[i - 1, j - 1], three states
(Gotoh's): M ends in an aligned pair, X in a target residue against a gap (a move along the
row), Y in a query residue against a gap (a move down the column); lse = log-sum-exp:

    M[i, j] = s[i, j] + lse(M, X, Y at (i - 1, j - 1))            (local: lse(0, M, X, Y))
    X[i, j] = lse(M[i, j-1] - o, Y[i, j-1] - o, X[i, j-1] - e)
    Y[i, j] = lse(M[i-1, j] - o, X[i-1, j] - o, Y[i-1, j] - e)

o and e at a cell: position-specific gaps [B, N, M] are read at [max(i, 1) - 1, j - 1] for
X and [i - 1, max(j, 1) - 1] for Y (row 0 and column 0 gaps use the first row / column).
Borders (-inf unless said):
- global: M[0, 0] = 0; X[0, j] and Y[i, 0] by the recurrences (leading gaps charged);
  value = lse(M, X, Y at (n, m)).
- semiglobal (the whole query inside the target; target residues before and after it
  free, as align_score): M[0, j] = 0 for every j, no X in row 0, Y[i, 0] by the
  recurrence (leading query gaps charged); value = lse over j of (M[n, j], Y[n, j]) (an
  alignment ends at its last non-X column, so each is counted once); n = 0: value 0.
- local: alignments start and end with an aligned pair (M), plus the empty alignment,
  score 0, counted once: value = lse(0, M[i, j] over all cells). As T -> 0 this tends to
  max(0, best), align_score's local score.
With open = extend the three states count the same alignments as one state with every
gap position costing ``open`` (the linear case).

Other conventions, mapped onto this one (all maximise similarities at temperature T):
- deepblast (NeedlemanWunschDecoder, linear gap A added as a negative number):
  V[i, j] = theta[i, j] + smax(V[i-1, j] + A, V[i-1, j-1], V[i, j-1] + A), V = 0 on row and
  column 0, value V[N, M]: every cell a path visits pays its theta, whether entered by a
  pair or a gap (Mensch & Blondel's lattice, soft-DTW's with a gap term), and leading gaps
  are free. Not an alignment of residues in our sense; the values differ.
- orihime (nw_value, linear): alpha[i, j] = lse(alpha[i-1, j-1] + s, alpha[i-1, j] + g,
  alpha[i, j-1] + g) with a gap *score* g added per gap step, alpha[i, 0] = i g,
  alpha[0, j] = j g, value alpha[n, m]: ours in global mode with gap_open = -g, the same
  value and gradient (benchmarks/soft_align.py checks its rows against our reference).
  Its dtw_value is soft-DTW below.
- SMURF (the JAX sw / sw_affine, local): one state h[i, j] = smax(h[i-1, j-1] + x, h[i-1, j]
  + gap, h[i, j-1] + gap, x) (x alone: a start), value smax over cells of h[i, j] +
  x[i+1, j+1]: alignments that start and end with an aligned pair, as ours, with gap =
  -gap_open; there is no empty alignment (ours adds it, score 0), and its end term as
  written also leaves out one-pair alignments. Its affine form with restrict_turns
  restricts gap-state transitions, so its alignment set differs from Gotoh's.
- DEDAL: local, affine, with position-specific open and extend penalties as [B, N, M]
  tensors like ours; its state machine and borders are its own (not checked here):
  compare on tiny pairs against tests/reference_soft_align.py's enumeration first.
- soft-DTW (Cuturi & Blondel, ta.soft_dtw): costs, minimised (gamma = T), moves (1, 1),
  (1, 0), (0, 1) all pay the cost of the cell they enter, no gap term, R[0, 0] = 0 and
  other borders infinite: soft_dtw(C) = -T log sum over paths exp(-cost / T), which is
  deepblast's recursion with theta = -C and A = 0 except for deepblast's zero borders.
"""

from __future__ import annotations

import math

import torch

from . import ops  # noqa: F401  (registers torch.ops.torchalign.*)
from .cpu.soft_align import MODES
from .inputs import constant, full_lengths
from .ops.soft_align import CENTRE_BLOCK, leading_block
from .ops.soft_align import alignment as op_alignment
from .ops.soft_align import value as op_value

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _float(name, x) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise TypeError(f"{name}: expected a float or a tensor, got {type(x).__name__}")
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    return x


def _gap(name, gap, B, N, M, dtype, device):
    """A gap penalty as [B, 1, 1] (one per pair) or [B, N, M] (position-specific)."""
    if not isinstance(gap, torch.Tensor):
        return constant((B, 1, 1), _float(name, gap), dtype, device)
    if not gap.is_floating_point():
        gap = gap.to(dtype)
    if gap.device != device:
        raise ValueError(f"{name}: on {gap.device} but scores are on {device}; move it with .to(device)")
    gap = gap.to(dtype)
    if gap.dim() <= 1:
        if gap.numel() not in (1, B):
            raise ValueError(f"{name}: {tuple(gap.shape)} does not broadcast to [B] = [{B}]; pass a float, one "
                             f"value per pair or a [B, N, M] tensor")
        return gap.reshape(-1, 1, 1).expand(B, 1, 1)
    try:
        gap = gap.expand(B, N, M)
    except RuntimeError:
        raise ValueError(f"{name}: {tuple(gap.shape)} does not broadcast to scores' [B, N, M] = {[B, N, M]}; pass a "
                         "float, one value per pair or a position-specific tensor") from None
    if N == 0 or M == 0:
        return gap[:, :1, :1].reshape(B, 1, 1) if gap.numel() else torch.zeros((B, 1, 1), dtype=dtype, device=device)
    return gap


def _lengths(lengths, B, N, M, device):
    if lengths is None:
        return full_lengths(B, N, M, device)
    if not isinstance(lengths, (tuple, list)) or len(lengths) != 2:
        raise TypeError("lengths: expected (query_lengths, target_lengths), two [B] integer tensors or lists")
    out = []
    for name, x, top in (("query_lengths", lengths[0], N), ("target_lengths", lengths[1], M)):
        x = torch.as_tensor(x, device=device)
        if x.is_floating_point() or x.dtype == torch.bool or x.shape != (B,):
            raise ValueError(f"lengths: {name} must be B = {B} integers, got {x.dtype} {tuple(x.shape)}")
        out.append(x.to(torch.int64))
    if not torch.compiler.is_compiling():
        lo_q, hi_q, lo_t, hi_t = (int(v) for v in torch.stack([out[0].min(), out[0].max(), out[1].min(),
                                                                out[1].max()]).tolist()) if B else (0, 0, 0, 0)
        if lo_q < 0 or hi_q > N or lo_t < 0 or hi_t > M:
            raise ValueError(f"lengths: query lengths must lie in [0, {N}] and target lengths in [0, {M}] (the "
                             f"scores' shape), got {lo_q}..{hi_q} and {lo_t}..{hi_t}")
    return tuple(out)


# n + m from which long pairs are centred (any mode). The expected alignment alone would allow
# 8,192 (plain float32 within 4.1e-4 of float64 at 4,000^2), but a Hessian-vector product
# along the scores was 3.9e-3 off at 2,000^2 plain and 1.5e-4 with values and tangents
# centred (H100). The centring costs a 128-side forward: at 8 x 2,000 +0.14 ms forward +
# backward on the GPU, ~0.65 ms with the host's issue time (H100; benchmarks/NOTES.md,
# sessions 21-22)
CENTRE_FROM = 3000


def _centre(x, go, ge, linear: bool, q_lens, t_lens, full: bool):
    """c [B], the growth of V per unit of i + j, from a global leading block of each pair
    (ops.soft_align.leading_block): global alignments all span n + m, so scores - 2c and
    gaps + c (each gap position, opening or extending) give every alignment the same score
    less c (n + m), the same probabilities, and a table V - c (i + j) of small numbers whose
    float32 rounding no longer grows with the length (at 10,000^2 the expected alignment
    was 1.5e-3 off float64 without it; local 1.79e-3, semiglobal 1.65e-3 on the CPU, 2.3e-5
    and 1.5e-5 centred). Local and semiglobal alignments span less; the one-state kernels
    give their starts and ends the difference to n + m (ops.soft_align, ``shift``), so with
    affine gaps (three-state kernels) only global pairs are centred. Exact in exact
    arithmetic; only rounding changes. The
    Hessian-vector product centres its tangents the same way (ops.soft_align). ``full``:
    every pair is the whole N x M, so is every block, and its sides are two numbers (a dozen
    fewer small launches before the forward)."""
    with torch.no_grad():
        B, N, M = x.shape
        K = CENTRE_BLOCK
        if full:
            n, m = leading_block(N, M)
            n0, m0 = full_lengths(B, n, m, x.device)
            span = max(n + m, 1)
        else:
            n0, m0 = leading_block(q_lens, t_lens)
            span = (n0 + m0).clamp_min(1)
        g_open, g_ext = go.detach(), ge.detach()
        return op_value(x.detach()[:, :K, :K], g_open, g_ext, n0, m0, None, MODES.index("global"), linear, 1) / span


def _prepare(scores, gap_open, gap_extend, mode, temperature, lengths, checkpoint):
    if not isinstance(scores, torch.Tensor):
        raise TypeError(f"scores: expected a [B, N, M] float tensor, got {type(scores).__name__}")
    if scores.dim() != 3:
        raise ValueError(f"scores: expected [B, N, M] (one score matrix per pair), got {tuple(scores.shape)}; "
                         "add a batch dimension with scores[None]")
    if scores.dtype not in FLOATS:
        raise TypeError(f"scores: expected a float tensor (float16, bfloat16, float32, float64), got {scores.dtype}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
    B, N, M = scores.shape
    dtype = torch.float64 if scores.dtype == torch.float64 else torch.float32
    dev = scores.device
    x = scores if scores.dtype == dtype else scores.to(dtype)
    go = _gap("gap_open", gap_open, B, N, M, dtype, dev)
    linear = gap_extend is None
    ge = go if linear else _gap("gap_extend", gap_extend, B, N, M, dtype, dev)
    if isinstance(temperature, torch.Tensor):
        if temperature.numel() not in (1, B) or temperature.dim() > 1:
            raise ValueError(f"temperature: expected a float, a 0-d or a [B] tensor, got {tuple(temperature.shape)}")
        T = temperature.to(dtype).reshape(-1).expand(B)
    else:
        T = _float("temperature", temperature)
        if T <= 0:
            raise ValueError(f"temperature: must be > 0, got {T}")
    if not (isinstance(T, float) and T == 1.0):
        t3 = T if isinstance(T, float) else T[:, None, None]
        x, go, ge = x / t3, go / t3, (go / t3 if linear else ge / t3)
    q_lens, t_lens = _lengths(lengths, B, N, M, dev)
    if checkpoint is None:
        K = 1
    elif checkpoint == "auto":
        K = max(1, math.isqrt(N + 1))
    elif isinstance(checkpoint, int) and not isinstance(checkpoint, bool) and checkpoint >= 1:
        K = checkpoint
    else:
        raise ValueError(f"checkpoint: expected None, 'auto' or an int >= 1 (save every K-th row), got {checkpoint!r}")
    shift = None  # the centring of long float32 pairs: one-state (linear, every row kept), or global
    if ((linear and K == 1 or mode == "global") and go.shape[1:] == (1, 1) and ge.shape[1:] == (1, 1)
            and x.dtype == torch.float32 and N + M >= CENTRE_FROM):
        shift = _centre(x, go, ge, linear, q_lens, t_lens, lengths is None)
        go = go + shift[:, None, None]
        ge = go if linear else ge + shift[:, None, None]
    args = (x, go, ge, q_lens, t_lens, shift, MODES.index(mode), linear, K)
    return args, (T, N + M if lengths is None else None)


def _value(value, args, post):
    """The op's value at temperature 1 of the centred problem -> the caller's value (``post``:
    the temperature, and n + m where every pair has it)."""
    T, span = post
    q_lens, t_lens, shift = args[3:6]
    if shift is not None:
        value = value + shift * (span if span is not None else (q_lens + t_lens).to(value.dtype))
    return value if isinstance(T, float) and T == 1.0 else value * T


def soft_align(scores: torch.Tensor, gap_open=1.0, gap_extend=None, *, mode: str = "global", temperature=1.0,
               lengths=None, checkpoint=None) -> torch.Tensor:
    """The smoothed alignment score of each pair: T log sum over alignments exp(score / T).

    ``scores`` [B, N, M]: the similarity of query position i and target position j
    (float16 / bfloat16 / float32 in: float32 arithmetic and a float32 result; float64
    stays float64). ``gap_open``, ``gap_extend``: positive costs, floats or tensors of one
    value per pair ([B]) or per position ([B, N, M]); ``gap_extend=None``: linear gaps.
    ``mode``: "global", "local" or "semiglobal" (align_score's modes). ``temperature``: a
    float > 0 or a [B] tensor. ``lengths=(query_lengths, target_lengths)``: a padded batch;
    cells past them take no part (and get zero gradient). Gradients flow to scores, gaps
    and temperature (d value / d scores is the expected alignment, see soft_alignment;
    for the gaps minus the expected gap counts; for the temperature (value - expected
    score) / T, the entropy of the alignment distribution), and the backward is itself
    differentiable. ``checkpoint``: None keeps the state values of every cell for the
    backward sweep (float32 on a GPU: 4 B per cell for linear gaps of one value per pair,
    one state swept by anti-diagonals, the fastest path; 12 B per cell, three states,
    otherwise, swept by anti-diagonals too (forward, backward and the Hessian-vector
    product) where the gaps are one value per pair, else by rows); an int K keeps every K-th row and recomputes the rows
    between (three states; one more forward sweep inside the backward, 1/K of the memory
    plus one segment of K rows); "auto" takes K = sqrt(N + 1). The Hessian-vector product (a loss
    on soft_alignment's P) holds the tangents beside the table (4 B per cell for the
    one-state path; three states: 24 B per cell, every row whatever K).

    Recurrences, borders and how they map to other tools' conventions: the module
    docstring of torchalign.soft_align.

    >>> import torch, torchalign as ta
    >>> s = torch.tensor([[[2.0, -1.0], [-1.0, 2.0]]], requires_grad=True)
    >>> v = ta.soft_align(s, 3.0, mode="global", temperature=0.1)
    >>> round(v.item(), 4)
    4.0
    >>> v.backward(); s.grad.round(decimals=3).tolist()
    [[[1.0, 0.0], [0.0, 1.0]]]
    """
    args, post = _prepare(scores, gap_open, gap_extend, mode, temperature, lengths, checkpoint)
    return _value(op_value(*args), args, post)


def soft_alignment(scores: torch.Tensor, gap_open=1.0, gap_extend=None, *, mode: str = "global",
                   temperature=1.0, lengths=None, checkpoint=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(value [B], P [B, N, M]) with the arguments of soft_align: P[b, i, j] is the
    probability that query position i aligns with target position j under the Gibbs
    distribution over alignments at this temperature, which is d value / d scores. One
    forward and one backward sweep (no autograd graph of the DP); both outputs are
    differentiable (a loss on P backpropagates through the Hessian-vector product)."""
    args, post = _prepare(scores, gap_open, gap_extend, mode, temperature, lengths, checkpoint)
    value, P = op_alignment(*args)
    return _value(value, args, post), P
