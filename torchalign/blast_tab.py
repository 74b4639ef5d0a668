"""``torchalign search --outfmt 6``: hits as BLAST's 12-column tabular output.

Columns: qseqid sseqid pident length mismatch gapopen qstart qend sstart send evalue
bitscore, as NCBI BLAST+ writes them (ncbi/ncbi-cxx-toolkit-public at 719e5e08c9,
2025-12-18: src/objtools/align_format/tabular.cpp, include/objtools/align_format/tabular.hpp,
CAlignFormatUtil::GetScoreString in align_format_util.cpp): pident = 100 x identical columns
/ alignment columns (gaps included) with 3 decimals; length = alignment columns; mismatch =
columns - identical - gap columns; gapopen = runs of gap columns in either sequence;
coordinates 1-based, inclusive. No header line (BLAST's ``-outfmt 6`` has none). An empty
local alignment (no columns) is no hit and gets no line.
"""

from __future__ import annotations

import re

from . import karlin
from .traceback import Alignment

COLUMNS = ("qseqid", "sseqid", "pident", "length", "mismatch", "gapopen", "qstart", "qend", "sstart", "send",
           "evalue", "bitscore")
NO_STATISTICS = "NaN"  # --no-evalue's E-value and bit score: a float to every reader (Biopython, pandas, R)


def check(args, scoring, usage_error) -> None:
    """The options' conflicts, and a scoring without published statistics, as usage errors
    (before any file is read)."""
    if args.outfmt != "6":
        for given, option in ((args.evalue is not None, "--evalue"), (args.no_evalue, "--no-evalue")):
            if given:
                raise usage_error(f"{option} goes with --outfmt 6 (the default output has no E-values)")
        return
    if args.align:
        raise usage_error("--align adds a CIGAR column to the default output; --outfmt 6 has BLAST's 12 columns "
                          "(leave out one of them)")
    if args.no_evalue:
        if args.evalue is not None:
            raise usage_error("--evalue filters by E-value, --no-evalue computes none: leave out one of them")
        return
    if args.mode != "local":
        raise usage_error(f"--outfmt 6: E-values and bit scores hold for local alignments only, not --mode "
                          f"{args.mode}; add --no-evalue")
    if args.evalue is not None and not args.evalue >= 0:
        raise usage_error(f"--evalue must be >= 0, got {args.evalue}")
    _statistics(args, scoring)  # (raises)


def _statistics(args, scoring) -> karlin.KarlinAltschul:
    matrix = "--matrix" if args.match is None else "--match/--mismatch"
    try:
        return karlin.parameters(scoring, matrix=matrix, gaps="--gap-open/--gap-extend")
    except ValueError as e:
        raise ValueError(f"--outfmt 6: {e}; pick from those, or add --no-evalue") from None


class Rows:
    """One line per hit: ``line(query name, target name, query length, Alignment)``; ""
    for an empty alignment and, with ``--evalue X``, for an E-value above X. The search
    space of every E-value is the query's length x the database's residues in all."""

    def __init__(self, args, scoring, database_length: int):
        self.stats = None if args.no_evalue else _statistics(args, scoring)
        self.database_length = database_length
        self.max_evalue = args.evalue

    def line(self, query: str, target: str, query_length: int, a: Alignment) -> str:
        if not a.columns:
            return ""
        evalue, bits = NO_STATISTICS, NO_STATISTICS
        if self.stats is not None:
            e = self.stats.evalue(a.score, query_length, self.database_length)
            if self.max_evalue is not None and e > self.max_evalue:
                return ""
            evalue, bits = evalue_text(e), bits_text(self.stats.bits(a.score))
        runs = re.findall(r"(\d+)([=XID])", a.cigar)
        gaps = sum(int(n) for n, op in runs if op in "ID")
        row = (query, target, f"{100 * a.matches / a.columns:.3f}", a.columns, a.columns - a.matches - gaps,
               sum(op in "ID" for _, op in runs), a.query_start + 1, a.query_end, a.target_start + 1, a.target_end,
               evalue, bits)
        return "\t".join(map(str, row)) + "\n"


def evalue_text(e: float) -> str:
    """An E-value as BLAST's tabular output prints it (GetScoreString, then
    CBlastTabularInfo::SetScores's %.2e below 0.0009)."""
    if e < 1.0e-180:
        return "0.0"
    if e < 0.0009:
        return f"{e:.2e}"
    if e < 0.1:
        return f"{e:4.3f}"
    if e < 1.0:
        return f"{e:3.2f}"
    if e < 10.0:
        return f"{e:2.1f}"
    return f"{e:2.0f}"


def bits_text(bits: float) -> str:
    """A bit score as BLAST prints it (GetScoreString): above 99.9 truncated to an integer,
    else one decimal ("%4.1lf": " 9.6" keeps BLAST's leading space), above 99999 as %5.3e."""
    if bits > 99999:
        return f"{bits:5.3e}"
    if bits > 99.9:
        return f"{int(bits):3d}"
    return f"{bits:4.1f}"
