"""Lanes per program, tile height and the long-chunk threshold of the packed int16 scan.

    python benchmarks/tune_scan.py [--db N]

One 1,000-residue query against N generated proteins (align.py's database; default
100,000), ta.search local, BLOSUM62 11 / 1; GCUPS per variant, the same top hits checked.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from align import database  # noqa: E402
from common import bench  # noqa: E402

import torchalign as ta  # noqa: E402
from torchalign_kernels import align as K  # noqa: E402
from torchalign_kernels import align_scan as S  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", type=int, default=100_000)
    args = ap.parse_args()
    db = ta.encode(database(args.db, np.random.default_rng(1)), "protein", "cuda")
    q = ta.encode(["".join(np.random.default_rng(2).choice(list("ARNDCQEGHILKMFPSTWYV"), 1000))], "protein", "cuda")
    cells = 1000.0 * db.codes.numel()
    want = None
    for long in (1024, 2048, 4096):
        K.LONG_TARGET = long
        for lanes, rows in ((32, 48), (32, 64)):
            S.LANES, S.ROWS = lanes, rows
            got = ta.search(q, db, top_k=50)
            want = got if want is None else want
            same = all(torch.equal(a, b) for a, b in zip(got, want))
            ms = bench(lambda: ta.search(q, db, top_k=50), torch.device("cuda"), warmup=1, rep=5)
            print(f"LONG_TARGET={long:10d} LANES={lanes:4d} ROWS={rows:3d}: {ms:8.2f} ms {cells / ms / 1e6:7.1f} GCUPS "
                  f"{'same' if same else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    main()
