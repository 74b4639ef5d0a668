"""``torchalign dedup FILE --max-distance K [--clusters]``: near-duplicate sequences or lines."""

from __future__ import annotations

import re
import sys
import time

import torchalign as ta

from .hamming import DEFAULT_MAX_HITS
from .io import read_named, require_residues

ALPHABETS = ("bytes", "unicode", "dna", "rna", "protein")


def add_parser(sub, device_help: str):
    s = sub.add_parser("dedup", help="pairs of sequences (or lines) within K edits of each other",
                       description="Compare every sequence of FILE with every other by edit distance and print "
                                   "each pair within --max-distance as a tab-separated line: i, j (0-based record "
                                   "numbers, i < j), the two names, the distance; sorted by (i, j). FILE is FASTA "
                                   "or FASTQ (.gz too; told by the extension, else by a first non-blank character "
                                   "'>' or '@'), or else text with one sequence per line (blank lines skipped, each "
                                   "named by its line number). With --clusters: the connected components of those "
                                   "pairs instead, one line per member (cluster, its size, index, name); sequences "
                                   "with no near duplicate are left out, and keeping each cluster's first member "
                                   "deduplicates the file.")
    s.add_argument("file", help="FASTA/FASTQ (.gz too) or a text file of one sequence per line")
    s.add_argument("--max-distance", type=int, required=True, help="most edits between near duplicates (>= 0)")
    s.add_argument("--clusters", action="store_true", help="print connected components instead of pairs")
    s.add_argument("--alphabet", default="bytes", choices=ALPHABETS,
                   help="how symbols compare (default bytes: exact, case-sensitive, UTF-8 bytes; unicode: "
                        "characters; dna/rna/protein: residues, any case)")
    s.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_HITS,
                   help=f"fail rather than find more pairs than this (default {DEFAULT_MAX_HITS})")
    s.add_argument("--device", choices=("cuda", "cpu"), help=device_help)
    s.set_defaults(command="dedup")
    return s


def run(args, device: str, usage_error) -> int:
    if args.max_distance < 0:
        raise usage_error(f"--max-distance must be >= 0, got {args.max_distance}")
    if args.max_pairs < 0:
        raise usage_error(f"--max-pairs must be >= 0, got {args.max_pairs}")
    names, seqs = read_named(args.file, args.alphabet, args.file)
    require_residues(args.file, names, seqs)
    start = time.perf_counter()
    try:
        i, j, d = ta.near_duplicates(seqs.to(device), args.max_distance, max_pairs=args.max_pairs)
    except ValueError as e:  # the input is valid by now: only the pair budget can be exceeded
        count = re.search(r"(\d+) pairs within", str(e))
        if count is None:
            raise
        raise usage_error(f"{count[1]} pairs within --max-distance {args.max_distance} exceed --max-pairs "
                          f"{args.max_pairs}; pass --max-pairs {count[1]} or more, or lower --max-distance") from None
    i, j, d = i.tolist(), j.tolist(), d.tolist()
    if args.clusters:
        out = ["#cluster\tsize\tindex\tname\n"]
        groups = clusters(len(names), i, j)
        for c, members in enumerate(groups):
            out += [f"{c}\t{len(members)}\t{m}\t{names[m]}\n" for m in members]
        what = f"{len(groups)} clusters ({sum(map(len, groups))} sequences)"
    else:
        out = ["#i\tj\tname_i\tname_j\tdistance\n"]
        out += [f"{a}\t{b}\t{names[a]}\t{names[b]}\t{x}\n" for a, b, x in zip(i, j, d)]
        what = f"{len(i)} pairs"
    sys.stdout.write("".join(out))
    print(f"{what} within {args.max_distance} edits among {len(names)} sequences in "
          f"{time.perf_counter() - start:.2f} s on {device}", file=sys.stderr)
    return 0


def clusters(n: int, i: list[int], j: list[int]) -> list[list[int]]:
    """Connected components of the pairs with two or more members (union-find), each in
    index order, ordered by their first member."""
    parent = list(range(n))

    def root(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]  # path halving
            x = parent[x]
        return x

    for a, b in zip(i, j):
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)  # the smaller index is the root
    members = {}
    for x in sorted(set(i) | set(j)):
        members.setdefault(root(x), []).append(x)
    return sorted(members.values())

