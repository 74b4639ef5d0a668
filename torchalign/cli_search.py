"""``torchalign search QUERIES DATABASE``: database search with BLAST-like tab-separated hits."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from importlib import resources

import torch
from tqdm import tqdm

import torchalign as ta

from . import blast_tab, cli_distributed
from .batch import _longest, _offsets
from .io import read_named, require_residues
from .traceback import MAX_CELLS

# query x database cells per search call, the progress bar's step: ~1 s of a GPU at 4 TCUPS
# (one call per query ran 3.3 s where one call for the 20 queries of 570,000 proteins runs
# 1.9 s, on an H100), ~20 s of the CPU's parasail
GROUP_CELLS = {"cuda": 1 << 42, "cpu": 1 << 36}
DEFAULT_DATABASE = "proteome_HG003687.fa"
COLUMNS = ("query", "target", "score", "identity", "query_start", "query_end", "target_start", "target_end")


def add_parser(sub, device_help: str):
    s = sub.add_parser("search", help="search protein (or DNA) queries against a database, top hits per query",
                       description="Align every query with every database sequence (Smith-Waterman by default, "
                                   "affine gaps) and print each query's best hits as tab-separated lines: query, "
                                   "target, score, identity (%% of alignment columns), query and target "
                                   "coordinates (0-based, end exclusive). Progress and GCUPS go to stderr. With "
                                   "no files: the 20 bundled Swiss-Prot queries against the bundled proteome "
                                   "(2,100 proteins).")
    s.add_argument("queries", nargs="?", help="FASTA/FASTQ file (default: the bundled swissprot_queries20.fa)")
    s.add_argument("database", nargs="?", help="FASTA/FASTQ file (default: the bundled proteome_HG003687.fa)")
    add_scoring_options(s)
    s.add_argument("--mode", default="local", choices=("local", "global", "semiglobal"),
                   help="local (Smith-Waterman, default), global (Needleman-Wunsch), semiglobal (whole query)")
    s.add_argument("--top", type=int, default=10, help="hits per query (default 10)")
    s.add_argument("--align", action="store_true", help="add a CIGAR column (=, X, I, D; the target is the reference)")
    s.add_argument("--outfmt", default="default", choices=("default", "6"),
                   help="6: BLAST's tabular output (qseqid sseqid pident length mismatch gapopen qstart qend sstart "
                        "send evalue bitscore; 1-based coordinates; E-values over the query length x the database's "
                        "residues, from NCBI BLAST+'s lambda and K for the matrix and gaps; BLAST's gap costs G / E are "
                        "--gap-open G+E --gap-extend E here, its BLOSUM62 default 11 / 1 is --gap-open 12)")
    s.add_argument("--evalue", type=float, help="with --outfmt 6: print only hits with an E-value at or below this")
    s.add_argument("--no-evalue", action="store_true",
                   help="with --outfmt 6: no statistics (E-value and bit score print as NaN), for scorings without "
                        "published parameters")
    s.add_argument("--device", choices=("cuda", "cpu"), help=device_help)
    s.add_argument("--no-server", action="store_true",
                   help="run here even where a `torchalign serve` server listens (default: a listening server runs "
                        "the search, with the database it keeps)")
    s.set_defaults(command="search", databases=None)
    return s


def add_scoring_options(s) -> None:
    s.add_argument("--matrix", default="BLOSUM62", help="substitution matrix by name (Biopython's; default BLOSUM62)")
    s.add_argument("--match", type=int, help="DNA scoring: match score (with --mismatch, instead of --matrix)")
    s.add_argument("--mismatch", type=int, help="DNA scoring: mismatch score (negative)")
    s.add_argument("--gap-open", type=int, default=11, help="cost of a gap's first residue (default 11)")
    s.add_argument("--gap-extend", type=int, default=1, help="cost of each further residue (default 1)")
    s.add_argument("--strict-symbols", action="store_true",
                   help="selenocysteine (U) and pyrrolysine (O) are errors (default: scored as C and X, as NCBI "
                        "BLAST+ scores them)")


def scoring_from(args, usage_error):
    if (args.match is None) != (args.mismatch is None):
        raise usage_error("--match and --mismatch go together")
    if args.match is not None:
        return ta.Scoring(match=args.match, mismatch=args.mismatch, gap_open=args.gap_open, gap_extend=args.gap_extend)
    return ta.Scoring(args.matrix, args.gap_open, args.gap_extend, strict_symbols=args.strict_symbols)


def run(args, device: str, usage_error) -> int:
    if args.top < 1:
        raise usage_error(f"--top must be >= 1, got {args.top}")
    scoring = scoring_from(args, usage_error)
    blast_tab.check(args, scoring, usage_error)
    if cli_distributed.launched():  # under torchrun: each rank reads the files and searches its shard, rank 0 writes
        return cli_distributed.run(args, scoring, device, lambda: _read_files(args, scoring))
    (q_names, queries), (d_names, database) = _read_files(args, scoring, device)
    queries, database = queries.to(device), database.to(device)
    return _report(args, scoring, device, q_names, queries, d_names, database,
                   lambda group: ta.search(group, database, scoring, args.top, mode=args.mode))


def _report(args, scoring, device, q_names, queries, d_names, database, search) -> int:
    """The queries searched in groups (``search(group)`` -> SearchResult), the hits aligned
    and written as TSV, the summary on stderr."""
    header = "#" + "\t".join(COLUMNS + (("cigar",) if args.align else ())) + "\n"  # written with the first hits
    n_db = int(database.codes.numel())
    tab = blast_tab.Rows(args, scoring, n_db) if args.outfmt == "6" else None
    header = "" if tab else header
    q_lens = queries.lengths.tolist()
    cells, searching, aligning = 0, 0.0, 0.0
    with tqdm(total=sum(q_lens) * n_db, unit="cell", unit_scale=True, file=sys.stderr,
              disable=None if len(q_lens) > 1 else True) as bar:
        for q0, q1 in _groups(q_lens, n_db, device):
            group = ta.SequenceBatch.from_codes([queries[i] for i in range(q0, q1)], queries.alphabet)
            t0 = time.perf_counter()
            r = search(group)
            indices = r.indices.cpu()  # waits for the search
            t1 = time.perf_counter()
            pair_q = torch.arange(q1 - q0, device=device).repeat_interleave(indices.shape[1])
            hits = _alignments(group, database, scoring, args.mode, pair_q, r.indices.reshape(-1),
                               r.query_ends.reshape(-1), r.ends.reshape(-1))
            searching, aligning = searching + t1 - t0, aligning + time.perf_counter() - t1
            lines = []
            for (qi, ti), a in zip(zip((pair_q + q0).tolist(), indices.reshape(-1).tolist()), hits):
                if tab:
                    lines.append(tab.line(q_names[qi], d_names[ti], q_lens[qi], a))
                    continue
                row = [q_names[qi], d_names[ti], a.score, f"{100 * a.identity:.1f}", a.query_start, a.query_end,
                       a.target_start, a.target_end] + ([a.cigar or "*"] if args.align else [])
                lines.append("\t".join(map(str, row)) + "\n")
            with tqdm.external_write_mode(file=sys.stdout):
                sys.stdout.write(header + "".join(lines))
                sys.stdout.flush()
            header = ""
            done = sum(q_lens[q0:q1]) * n_db
            cells += done
            bar.update(done)
            bar.set_postfix_str(f"{cells / searching / 1e9:.1f} GCUPS")
    # (the first run on a GPU also pays for compiling the kernels, in both times)
    print(f"{len(q_lens)} queries x {len(d_names)} sequences ({n_db} residues): {cells / 1e9:.2f} G cells searched "
          f"in {searching:.2f} s ({cells / searching / 1e9:.2f} GCUPS), {len(q_lens) * min(args.top, len(d_names))} "
          f"hits aligned in {aligning:.2f} s, on {device}", file=sys.stderr)
    return 0


def _read_files(args, scoring, device=None):
    """((query names, queries), (database names, database)) from the files given, else the
    bundled ones; the database from a server's kept ones (``args.databases``) where it runs there."""
    with ExitStack() as stack:
        q_path = args.queries or bundled("swissprot_queries20.fa", stack)
        d_path = args.database or bundled(DEFAULT_DATABASE, stack)
        queries = _read(q_path, scoring, "queries")
        if args.databases is None:
            return queries, _read(d_path, scoring, "database")
        return queries, args.databases.get(d_path, scoring, device)  # a server's: read once, kept on the device


def bundled(name: str, stack) -> str:
    """A bundled data file's path, for as long as ``stack`` lasts."""
    return str(stack.enter_context(resources.as_file(resources.files("torchalign") / "data" / name)))


def _read(path, scoring, what):
    """Every record encoded and checked against the matrix, before anything is printed."""
    names, batch = read_named(path, scoring.alphabet, f"{what} {path}", scoring)
    require_residues(f"{what} {path}", names, batch)
    return names, batch


def _groups(q_lens, n_db, device):
    """(q0, q1) query ranges of one search call each: GROUP_CELLS cells at most (a larger query alone)."""
    return _runs([n * n_db for n in q_lens], GROUP_CELLS[torch.device(device).type])


def _runs(sizes, budget):
    """(i0, i1) ranges of consecutive items whose sizes sum to at most ``budget`` (a larger
    item alone): the search groups (cells) and the traceback calls (DP cells)."""
    i0 = 0
    while i0 < len(sizes):
        i1, total = i0 + 1, sizes[i0]
        while i1 < len(sizes) and total + sizes[i1] <= budget:
            total += sizes[i1]
            i1 += 1
        yield i0, i1
        i0 = i1


def _alignments(queries, database, scoring, mode, pair_q, pair_t, q_ends, t_ends):
    """ta.traceback of the hits, in calls of at most MAX_CELLS DP cells (a larger hit alone).
    Each pair is cut to its rectangle, the query and the target up to the hit's ends: the
    cells there are the whole pair's, so the end cell, score and path are the same, and
    neither traceback's own align_score nor the copies reach past the ends (a hit ending at
    residue 300 of a 35,000-residue target costs 300 columns). On the queries' device (the
    database may be a host copy: sharded runs keep only a part of it on each GPU)."""
    q_cut = _prefixes(queries, pair_q, q_ends, queries.device)
    t_cut = _prefixes(database, pair_t, t_ends, queries.device)
    pair = torch.arange(pair_q.numel(), device=queries.device)
    rect = ((q_ends + 1) * (t_ends + 1)).tolist()
    out = []
    for p0, p1 in _runs(rect, MAX_CELLS):
        out += ta.traceback(q_cut, t_cut, scoring, mode, pairs=(pair[p0:p1], pair[p0:p1]),
                            max_cells=max(sum(rect[p0:p1]), MAX_CELLS))
    return out


def _prefixes(batch, index, ends, device):
    """Sequence index[p] of ``batch`` up to ends[p], for every p, as a batch on ``device``."""
    lengths = ends.to(batch.device, torch.int64)
    index = index.to(batch.device)
    offsets = _offsets(lengths)
    total = int(offsets[-1])
    at = torch.repeat_interleave(batch.offsets[index] - offsets[:-1], lengths, output_size=total)
    codes = batch.codes[at + torch.arange(total, device=batch.device)]
    return ta.SequenceBatch(codes, offsets, batch.alphabet, batch.max_code, _longest(lengths)).to(device)
