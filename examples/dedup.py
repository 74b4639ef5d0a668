"""Deduplicate text lines by edit distance, then find each kept line's nearest neighbour,
with no N x N matrix (the lines are compared in tiles on the device).

    python examples/dedup.py [FILE] [--max-distance 3] [--device cpu]

FILE holds one line per sample (default: a few built-in sentences with planted near
duplicates). A line is dropped when an earlier line is within --max-distance edits of it.
"""

import argparse

import torch

import torchalign as ta

LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Pack my box with five dozen liquor jugs.",
    "The quick brown fox jumped over the lazy dog.",
    "How vexingly quick daft zebras jump!",
    "the quick brown fox jumps over the lazy dog",
    "Pack my box with five dozen liquor jugs!",
    "Sphinx of black quartz, judge my vow.",
    "How vexingly quick daft zebras jump.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", help="one line per sample (default: built-in sentences)")
    ap.add_argument("--max-distance", type=int, default=3, help="most edits between near duplicates (default 3)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    lines = LINES
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            lines = [line for line in f.read().splitlines() if line]
    seqs = ta.encode(lines, "bytes", args.device)  # bytes: exact, case-sensitive; "unicode" for characters

    i, j, d = ta.near_duplicates(seqs, args.max_distance)  # every pair i < j within max_distance
    for a, b, x in zip(i.tolist(), j.tolist(), d.tolist()):
        print(f"{x} edits: line {a} {lines[a]!r} ~ line {b} {lines[b]!r}")
    drop = set(j.tolist())  # each line with a near duplicate before it
    kept = [n for n in range(len(lines)) if n not in drop]
    print(f"kept {len(kept)} of {len(lines)} lines")

    # each kept line's nearest other kept line: k=2, as the first is the line itself
    keep = ta.encode([lines[n] for n in kept], "bytes", args.device)
    dist, idx = ta.levenshtein_topk(keep, keep, k=2)
    for row, (x, m) in enumerate(zip(dist[:, 1].tolist(), idx[:, 1].tolist())):
        if m >= 0:
            print(f"line {kept[row]}: nearest kept line {kept[m]} at {x} edits")


if __name__ == "__main__":
    main()
