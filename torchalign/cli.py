"""The command line: ``torchalign search [QUERIES DATABASE]``, ``torchalign grep PATTERN [FILE]``,
``torchalign dist A B``, ``torchalign primers ALPHA BETA -k K``, ``torchalign dedup FILE --max-distance K``,
``torchalign serve [DATABASE...]`` (also ``python -m torchalign``; the console script enters
through torchalign_client, which hands a search to a listening server)."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from contextlib import ExitStack
from importlib import resources
from typing import NoReturn

import numpy as np
import torch
from tqdm import tqdm

import torchalign as ta

from . import cli_dedup, cli_search, cli_serve
from .hamming import DEFAULT_MAX_HITS
from .io import iter_batches, read_named, read_sequences, require_residues
from .ops import warm
from .ops.eager import skip_compiler_import

CHUNK_RESIDUES = 1 << 26  # text residues per search call
PROGRESS_MIN_BYTES = 1_000_000  # smaller files get no progress bar
DIST_CHUNK_CELLS = 1 << 22  # distance-matrix entries per call of levenshtein_cdist
# On a shared 2-core machine torch's default of one thread per core made the torch DPs of
# `search --device cpu` 10x slower than one thread (and grep 1.2x); the search now runs in
# parasail, whose Python wrapper holds the GIL per pair, so 2 threads gained at most 1.14x
# there (NOTES.md, "CPU path"): --threads raises it where cores are idle.
DEFAULT_THREADS = 1


class UsageError(Exception):
    """Bad command-line input: reported on stderr with exit code 2."""


def entry() -> NoReturn:
    """The ``torchalign`` command and ``python -m torchalign``: a process of its own that never
    compiles, so its first op call skips loading torch's compiler (ops/eager.py; ~4 s of a
    warm start on the GPU host), and that ends without the interpreter's teardown (torch's
    modules and the CUDA context: ~0.4 s on the GPU host) once its output is flushed. ``main``
    called from Python leaves the ops and the process as they are. The commands write only to
    stdout and stderr, so nothing else is left unflushed."""
    skip_compiler_import()
    rc = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # stdout closed early (| head)
        rc = rc or 1
    os._exit(rc)


def main(argv=None, *, databases=None) -> int:
    """Run the command line; returns the exit code (0 ok, 2 bad input). ``databases``: a
    server's kept databases (cli_serve.Databases), which ``search`` takes its database from."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, commands = _parser()
    try:
        if argv and argv[0] in commands:  # options and positionals in any order
            args = commands[argv[0]].parse_intermixed_args(argv[1:])
        else:
            args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or argparse's own usage errors
        return e.code
    if databases is not None and args.command == "search":
        args.databases = databases
    try:
        if args.threads < 1:
            raise UsageError(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
        return args.run(args)
    except BrokenPipeError:  # stdout closed early (| head): stop quietly
        if sys.stdout is sys.__stdout__:  # (not a server's relay)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UsageError, ValueError, OSError) as e:
        print(f"torchalign {args.command}: error: {e}", file=sys.stderr)
        return 2


def _parser() -> tuple[argparse.ArgumentParser, dict]:
    parser = argparse.ArgumentParser(prog="torchalign", description=ta.__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    cli_search.add_parser(sub, "default: cuda when available").set_defaults(
        run=lambda args: cli_search.run(args, _device(args.device), UsageError))
    cli_serve.add_parser(sub, "default: cuda when available").set_defaults(
        run=lambda args: cli_serve.run(args, _device(args.device), UsageError, main))
    cli_dedup.add_parser(sub, "default: cuda when available").set_defaults(
        run=lambda args: cli_dedup.run(args, _device(args.device), UsageError))
    g = sub.add_parser("grep", help="find a DNA pattern with up to k mismatches (or k edits)",
                       description="Print every window of every record within Hamming distance k "
                                   "of a pattern, one tab-separated line per hit; mismatched "
                                   "residues of the match are in lower case. With --edits: every "
                                   "end position where the pattern matches with at most k "
                                   "insertions, deletions and substitutions, with the earliest start "
                                   "of such a match (start and end 0-based, end exclusive).")
    g.add_argument("pattern", help="DNA pattern, or several separated by commas")
    g.add_argument("file", nargs="?", help="FASTA/FASTQ file, .gz too (default: the bundled MT-human.fa)")
    g.add_argument("-k", type=int, default=0, help="most mismatches (or edits) allowed (default 0)")
    g.add_argument("--edits", action="store_true",
                   help="k differences (edit distance) instead of k mismatches")
    g.add_argument("--both-strands", action="store_true", help="also search the reverse complement")
    g.add_argument("--iupac", action="store_true",
                   help="ambiguity codes in the pattern match their sets (N matches anything)")
    g.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available")
    g.add_argument("--max-hits", type=int, default=DEFAULT_MAX_HITS,
                   help=f"fail rather than print more hits than this (default {DEFAULT_MAX_HITS})")
    g.set_defaults(command="grep", run=_grep)
    d = sub.add_parser("dist", help="edit-distance matrix of two sequence files",
                       description="Print the Levenshtein distance of every sequence of A to every "
                                   "sequence of B as a tab-separated matrix (a header row of B's "
                                   "names, then one row per sequence of A). A and B are FASTA/FASTQ "
                                   "files, or text files with one sequence per line (named by line number).")
    d.add_argument("a", help="FASTA/FASTQ or line-per-sequence file (the rows)")
    d.add_argument("b", help="FASTA/FASTQ or line-per-sequence file (the columns)")
    d.add_argument("--alphabet", default="bytes", choices=("bytes", "dna", "rna", "protein"),
                   help="how symbols are compared (default bytes: exact, case-sensitive, UTF-8)")
    d.add_argument("--max-distance", type=int, help="report max-distance + 1 for pairs further apart")
    d.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available")
    d.set_defaults(command="dist", run=_dist)
    p = sub.add_parser("primers", help="regions of ALPHA at least k edits away from all of BETA",
                       description="The k-difference primer problem: for every start in each record of "
                                   "ALPHA, the shortest substring with at least k differences (edits) "
                                   "from every substring of every record of BETA, i.e. where a primer "
                                   "can bind ALPHA but not BETA. Prints one tab-separated line per "
                                   "start that has one: record, start (0-based), length, sequence.")
    p.add_argument("alpha", help="FASTA/FASTQ file (.gz too): the sequences to take primers from")
    p.add_argument("beta", help="FASTA/FASTQ file (.gz too): the sequences primers must not match")
    p.add_argument("-k", type=int, required=True, help="fewest differences from BETA (>= 1)")
    p.add_argument("--min-length", type=int, default=0, help="print only regions at least this long")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when available")
    p.set_defaults(command="primers", run=_primers)
    for command in sub.choices.values():
        command.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                             help=f"CPU threads (default {DEFAULT_THREADS}: the CPU work is many small steps, which "
                                  "more threads slow down unless cores sit idle)")
    return parser, sub.choices


def _grep(args) -> int:
    if args.k < 0:
        raise UsageError(f"-k must be >= 0, got {args.k}")
    if args.max_hits < 0:
        raise UsageError(f"--max-hits must be >= 0, got {args.max_hits}")
    if args.edits and args.iupac:
        raise UsageError("--iupac works with mismatches only; drop --edits or --iupac")
    device = _device(args.device)
    names = [p.strip() for p in args.pattern.split(",")]
    if not all(names):
        raise UsageError(f"empty pattern in {args.pattern!r}")
    patterns = ta.SequenceBatch.from_codes([ta.DNA.encode_str(p, what=f"pattern {p!r}") for p in names], "dna")
    start = time.perf_counter()
    with ExitStack() as stack:
        path = args.file or stack.enter_context(
            resources.as_file(resources.files("torchalign") / "data" / "MT-human.fa"))
        n_hits, n_records, n_residues = _search_file(path, names, patterns, device, args)
    print(f"{n_hits} hits in {n_records} records ({n_residues} bp) in {time.perf_counter() - start:.2f} s "
          f"on {device}", file=sys.stderr)
    return 0


def _search_file(path, names, patterns, device, args) -> tuple[int, int, int]:
    """Search ``path`` chunk by chunk, writing hit lines to stdout; (hits, records, residues)."""
    table = ta.DNA.iupac_match_table() if args.iupac else None
    pattern_names = names if len(names) > 1 else None
    pattern_col = "pattern\t" if pattern_names else ""
    where = "start\tend" if args.edits else "position"
    header = f"#record\t{pattern_col}{where}\tstrand\tdistance\tmatch\n"
    on_device = patterns.to(device)
    n_hits = n_records = n_residues = 0
    large = os.path.getsize(path) > PROGRESS_MIN_BYTES
    with tqdm(unit="bp", unit_scale=True, file=sys.stderr, disable=None if large else True) as bar:
        for records, texts in _checked_chunks(path):
            budget = args.max_hits - n_hits
            try:
                if args.edits:
                    hits = ta.asm_search(texts.to(device), on_device, args.k, both_strands=args.both_strands,
                                         max_hits=budget)
                else:
                    hits = ta.kmismatch_search(texts.to(device), on_device, args.k, both_strands=args.both_strands,
                                               iupac=args.iupac, max_hits=budget)
            except ValueError:  # inputs are valid by now: only the hit budget can be exceeded
                raise UsageError(f"more than {args.max_hits} hits; raise --max-hits or lower -k") from None
            hits = type(hits)(*(t.cpu() for t in hits))
            if args.edits:
                lines = _edit_hit_lines(hits, records, pattern_names, texts)
            else:
                lines = _hit_lines(hits, records, pattern_names, texts, patterns, table)
            with tqdm.external_write_mode(file=sys.stdout):
                sys.stdout.write(header + lines)  # the header waits until the file has been read
                sys.stdout.flush()
            header = ""
            n_hits += hits.distance.numel()
            n_records += len(texts)
            n_residues += texts.codes.numel()
            bar.update(texts.codes.numel())
    return n_hits, n_records, n_residues


def _checked_chunks(path):
    """iter_batches of the file, every record checked before the first chunk is searched
    (so no bad record follows printed hits): a file of one chunk is read whole first, a
    larger one is read through once more."""
    chunks = iter_batches(path, "dna", max_residues=CHUNK_RESIDUES)
    head = list(itertools.islice(chunks, 2))
    if len(head) > 1:  # (more than one chunk: there are residues)
        for _ in iter_batches(path, "dna", max_residues=CHUNK_RESIDUES):
            pass
    else:
        require_residues(path, *(head[0] if head else ([], ta.SequenceBatch.from_codes([], "dna"))))
    return itertools.chain(head, chunks)


def _dist(args) -> int:
    if args.max_distance is not None and args.max_distance < 0:
        raise UsageError(f"--max-distance must be >= 0, got {args.max_distance}")
    device = _device(args.device)
    sides = []
    for path in (args.a, args.b):
        names, batch = read_named(path, args.alphabet, path)
        require_residues(path, names, batch)
        sides.append((names, batch))
    (names_a, a), (names_b, b) = sides
    b = b.to(device)
    header = "\t".join(["#"] + names_b) + "\n"  # written with the first rows: an error comes before any output
    rows = max(1, DIST_CHUNK_CELLS // max(1, len(names_b)))
    with tqdm(total=len(names_a), unit="rows", file=sys.stderr, disable=None if len(names_a) > rows else True) as bar:
        for r0 in range(0, len(names_a), rows):
            chunk = ta.SequenceBatch.from_codes([a[i] for i in range(r0, min(r0 + rows, len(names_a)))], a.alphabet)
            d = ta.levenshtein_cdist(chunk.to(device), b, max_distance=args.max_distance).cpu().tolist()
            sys.stdout.write(header + "".join("\t".join([names_a[r0 + i]] + [str(x) for x in row]) + "\n"
                                              for i, row in enumerate(d)))
            header = ""
            bar.update(len(d))
    return 0


def _primers(args) -> int:
    if args.k < 1:
        raise UsageError(f"-k must be >= 1, got {args.k}")
    if args.min_length < 0:
        raise UsageError(f"--min-length must be >= 0, got {args.min_length}")
    device = _device(args.device)
    names, alpha = read_sequences(args.alpha, "dna")
    require_residues(args.alpha, names, alpha)
    beta_names, beta = read_sequences(args.beta, "dna")
    require_residues(args.beta, beta_names, beta)
    start = time.perf_counter()
    lengths = ta.kdiff_primers(alpha.to(device), beta.to(device), args.k).cpu()
    keep = (lengths > 0) & (lengths >= min(args.min_length, alpha.max_length + 1))  # (lengths are int32)
    at = torch.nonzero(keep).flatten()
    record = torch.searchsorted(alpha.offsets, at, right=True) - 1
    text = alpha.alphabet.decode(alpha.codes)
    out = ["#record\tstart\tlength\tsequence\n"]
    for p, rec, n in zip(at.tolist(), record.tolist(), lengths[at].tolist()):
        out.append(f"{names[rec]}\t{p - int(alpha.offsets[rec])}\t{n}\t{text[p : p + n]}\n")
    sys.stdout.write("".join(out))
    print(f"{at.numel()} regions from {alpha.codes.numel()} starts against {beta.codes.numel()} bp in "
          f"{time.perf_counter() - start:.2f} s on {device}", file=sys.stderr)
    return 0


def _device(name: str | None) -> str:
    """The device the command runs on; on CUDA its one-off costs start in the background."""
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: CUDA is not available here; use --device cpu")
    warm.start(name)
    return name


def _hit_lines(hits, records, pattern_names, texts, patterns, table) -> str:
    """Tab-separated lines in (record, position, strand, pattern) order."""
    matches = _render(hits, texts, patterns, table)
    order = np.lexsort((hits.pattern.numpy(), hits.strand.numpy(), hits.position.numpy(), hits.text.numpy()))
    columns = [[records[t] for t in hits.text[order].tolist()]]
    if pattern_names:
        columns.append([pattern_names[p] for p in hits.pattern[order].tolist()])
    columns += [hits.position[order].tolist(), ["+-"[s] for s in hits.strand[order].tolist()],
                hits.distance[order].tolist(), [matches[i] for i in order.tolist()]]
    return "".join("\t".join(map(str, row)) + "\n" for row in zip(*columns))


def _edit_hit_lines(hits, records, pattern_names, texts) -> str:
    """Tab-separated lines in (record, end, strand, pattern) order; the match is the text
    from start to end (reverse-complemented on strand "-", so it reads like the pattern)."""
    order = np.lexsort((hits.pattern.numpy(), hits.strand.numpy(), hits.end.numpy(), hits.text.numpy()))
    base = texts.offsets[hits.text]
    columns = [[records[t] for t in hits.text[order].tolist()]]
    if pattern_names:
        columns.append([pattern_names[p] for p in hits.pattern[order].tolist()])
    complement = ta.DNA.complement_codes()
    matches = []
    for i in order.tolist():
        codes = texts.codes[base[i] + hits.start[i] : base[i] + hits.end[i]]
        matches.append(ta.DNA.decode(complement[codes.long()].flip(0) if hits.strand[i] else codes))
    columns += [hits.start[order].tolist(), hits.end[order].tolist(), ["+-"[s] for s in hits.strand[order].tolist()],
                hits.distance[order].tolist(), matches]
    return "".join("\t".join(map(str, row)) + "\n" for row in zip(*columns))


_UPPER = np.frombuffer(ta.DNA.symbols.encode(), dtype=np.uint8)
_LOWER = np.frombuffer(ta.DNA.symbols.lower().encode(), dtype=np.uint8)


def _render(hits, texts, patterns, table) -> list[str]:
    """Each hit's window (reverse-complemented on strand "-", so it reads like the pattern),
    lower case where it mismatches the pattern."""
    out = [""] * hits.position.numel()
    complement = ta.DNA.complement_codes().to(torch.int64)
    starts = texts.offsets[hits.text] + hits.position
    for p in torch.unique(hits.pattern).tolist():
        idx = torch.nonzero(hits.pattern == p).flatten()
        pcodes = patterns[p].to(torch.int64)
        m = pcodes.numel()
        window = texts.codes[starts[idx, None] + torch.arange(m)].to(torch.int64)
        reverse = hits.strand[idx, None].bool()
        window = torch.where(reverse, complement[window].flip(1), window)
        if table is None:
            mismatch = window != pcodes
        else:
            mismatch = table[pcodes.expand_as(window), window] == 0
        chars = np.where(mismatch.numpy(), _LOWER[window.numpy()], _UPPER[window.numpy()]).tobytes().decode()
        for j, i in enumerate(idx.tolist()):
            out[i] = chars[j * m : (j + 1) * m]
    return out
