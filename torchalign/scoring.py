"""Scoring: a substitution matrix over an alphabet's codes and an affine gap model."""

from __future__ import annotations

import numpy as np
import torch

from .alphabet import Alphabet, get_alphabet
from .inputs import check_int

# Scores and every DP cell stay inside +-2^29 (the kernels' "minus infinity" is -2^29 and
# sums of two cells must not wrap int32): ``bound(m, n)`` checks a pair against it.
SCORE_LIMIT = 1 << 29

# Selenocysteine (U) and pyrrolysine (O) are in no standard matrix. NCBI BLAST+ scores U
# with C's row and column and O with X's, for every protein matrix (blast_stat.c, "Treat U
# as C, not X", 2016; Biopython's BLASTP matrix has the same rows), and so do we unless
# strict_symbols=True.
STAND_INS = {"U": "C", "O": "X"}


class Scoring:
    """A substitution matrix and affine gaps: a gap of length L costs
    ``gap_open + (L - 1) * gap_extend`` (parasail's and CUDASW++'s convention; BLOSUM62
    with 11 / 1 is the default).

    ``matrix`` is a name Biopython knows, in any case ("BLOSUM62", "blosum45", "PAM30",
    "NUC.4.4", ...) or a square integer tensor/array indexed by ``alphabet``'s codes; or
    give ``match`` and ``mismatch`` (DNA by default: equal codes score ``match``). Named
    matrices pick their alphabet (DNA when all their letters are nucleotides, else protein)
    unless ``alphabet`` says otherwise. Selenocysteine (U) and pyrrolysine (O), which real
    proteomes hold and BLOSUM/PAM matrices lack, score as NCBI BLAST+ scores them: U as C,
    O as X (for a named protein matrix that scores C and X). ``strict_symbols=True`` makes
    them errors instead, like every other symbol a matrix lacks: such a symbol raises
    ValueError, naming it, when a sequence holds it.

    >>> import torchalign as ta
    >>> s = ta.Scoring()                      # BLOSUM62, gaps 11 / 1
    >>> s.score("W", "W"), s.gap_cost(3)
    (11, 13)
    >>> ta.Scoring(match=2, mismatch=-3, gap_open=5, gap_extend=2).score("A", "C")
    -3
    >>> s.score("U", "C"), s.score("O", "W")   # selenocysteine as C, pyrrolysine as X
    (9, -2)
    """

    def __init__(self, matrix: str | torch.Tensor | np.ndarray | None = None, gap_open: int = 11,
                 gap_extend: int = 1, *, match: int | None = None, mismatch: int | None = None,
                 alphabet: str | Alphabet | None = None, strict_symbols: bool = False):
        self.gap_open = check_int("gap_open", gap_open, 0, SCORE_LIMIT - 1)
        self.gap_extend = check_int("gap_extend", gap_extend, 0, SCORE_LIMIT - 1)
        self.strict_symbols = bool(strict_symbols)
        if self.gap_extend > self.gap_open:
            raise ValueError(f"gap_extend: {gap_extend} is more than gap_open {gap_open}; a gap's first position "
                             "costs at least as much as each extension (use gap_open >= gap_extend)")
        if (match is None) != (mismatch is None):
            raise ValueError("match / mismatch: give both (DNA-style scoring) or neither (a matrix)")
        if match is not None:
            if matrix is not None:
                raise ValueError("matrix: give a matrix or match / mismatch, not both")
            self.alphabet = get_alphabet(alphabet or "dna")
            size = _table_size(self.alphabet)
            m, x = (check_int(name, v, 1 - SCORE_LIMIT, SCORE_LIMIT - 1) for name, v in (("match", match),
                                                                                       ("mismatch", mismatch)))
            self.table = torch.full((size, size), x, dtype=torch.int32)
            self.table.fill_diagonal_(m)
            self.name = f"match {m} / mismatch {x}"
        elif matrix is None or isinstance(matrix, str):
            self.name, self.table, self.alphabet = _named(matrix or "BLOSUM62", alphabet, self.strict_symbols)
        else:
            if alphabet is None:
                raise ValueError("alphabet: a matrix given as numbers needs alphabet= (the codes its rows index)")
            self.alphabet = get_alphabet(alphabet)
            self.table = _integer_table(torch.as_tensor(np.asarray(matrix)), "matrix")
            if self.table.shape[0] > _table_size(self.alphabet):
                raise ValueError(f"matrix: {self.table.shape[0]} rows, more than the {self.alphabet.name} alphabet's "
                                 f"{_table_size(self.alphabet)} codes")
            self.name = f"custom {self.table.shape[0]}x{self.table.shape[0]}"
        if int(self.table.abs().max()) >= SCORE_LIMIT:
            raise ValueError(f"matrix: entries must stay below {SCORE_LIMIT} in magnitude")

    @property
    def symbols(self) -> str | None:
        """The symbols the matrix scores (codes 0 .. size - 1), or None for token ids."""
        s = self.alphabet.symbols
        return None if s is None else s[: self.table.shape[0]]

    def score(self, a: str, b: str) -> int:
        """The substitution score of two symbols."""
        i, j = (int(self.alphabet.encode_str(x, "symbol")[0]) for x in (a, b))
        if max(i, j) >= self.table.shape[0]:
            raise ValueError(self.unscored(a if i >= self.table.shape[0] else b))
        return int(self.table[i, j])

    def unscored(self, symbol: str) -> str:
        """Why ``symbol`` (one the alphabet has, beyond the table) cannot be scored, and the fix."""
        fix = "remove it or pick another matrix"
        if self.strict_symbols and symbol.upper() in STAND_INS:
            fix = "remove it, or leave strict symbols off to score U as C and O as X (as NCBI BLAST+ does)"
        return f"symbol {symbol!r} is not in {self.name} (it scores {self.symbols!r}); {fix}"

    def gap_cost(self, length: int) -> int:
        """What a gap of ``length`` costs (0 for length 0)."""
        return 0 if length <= 0 else self.gap_open + (length - 1) * self.gap_extend

    def bound(self, m: int, n: int) -> int:
        """A bound on |any DP cell| for a query of m and a target of n residues."""
        top = max(int(self.table.abs().max()), self.gap_open, self.gap_extend, 1)
        return top * (m + n + 2)

    def __repr__(self) -> str:
        strict = ", strict_symbols=True" if self.strict_symbols else ""
        return (f"Scoring({self.name!r}, gap_open={self.gap_open}, gap_extend={self.gap_extend}, "
                f"alphabet={self.alphabet.name!r}{strict})")


def _table_size(alphabet: Alphabet) -> int:
    if alphabet.symbols is None or alphabet.name == "bytes":
        return 256 if alphabet.name == "bytes" else 1 << 16
    return len(alphabet.symbols)


def _integer_table(t: torch.Tensor, what: str) -> torch.Tensor:
    if t.ndim != 2 or t.shape[0] != t.shape[1]:
        raise ValueError(f"{what}: expected a square 2-D matrix, got shape {tuple(t.shape)}")
    if t.dtype.is_floating_point:
        if not torch.equal(t, t.round()):
            raise ValueError(f"{what}: scores must be integers (torchalign scores are exact int32)")
    return t.round().to(torch.int32).contiguous() if t.dtype.is_floating_point else t.to(torch.int32).contiguous()


def _named(name: str, alphabet, strict: bool) -> tuple[str, torch.Tensor, Alphabet]:
    """(Biopython's name, table, alphabet) of a matrix known by name in any case; the table
    covers the longest prefix of the alphabet's codes whose symbols the matrix has
    (BLOSUM62: codes 0..23 of PROTEIN), then U and O through their stand-ins unless strict."""
    from Bio.Align import substitution_matrices

    known = substitution_matrices.load()
    canonical = {n.upper(): n for n in known}.get(name.upper())
    if canonical is None:
        raise ValueError(f"matrix: unknown name {name!r}; Biopython knows {known}")
    bio = substitution_matrices.load(canonical)
    letters = bio.alphabet
    if alphabet is None:
        # nucleotide letters are protein letters too: DNA when they all are nucleotides
        alphabet = next((a for a in ("dna", "protein") if all(c in get_alphabet(a).symbols for c in letters)), None)
        if alphabet is None:
            raise ValueError(f"matrix: {canonical}'s symbols {letters!r} fit neither the protein nor the DNA "
                             "alphabet; pass alphabet=")
    alphabet = get_alphabet(alphabet)
    rows = []  # the matrix letter whose scores each code takes
    for sym in alphabet.symbols:
        if sym not in letters and not strict and alphabet.name == "protein" and STAND_INS.get(sym) in rows:
            sym = STAND_INS[sym]
        if sym not in letters:
            break
        rows.append(sym)
    if not rows:
        raise ValueError(f"matrix: {canonical} scores none of the {alphabet.name} alphabet's first symbols")
    values = np.array([[bio[a, b] for b in rows] for a in rows])
    return canonical, _integer_table(torch.from_numpy(values), f"matrix {canonical}"), alphabet
