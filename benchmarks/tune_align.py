"""Tile height (ROWS), lanes per program (BLOCK) and the long-target threshold of the alignment kernels.

    python benchmarks/tune_align.py

One query of 1,000 residues against 20,000 generated targets (align.py's database), local
mode, BLOSUM62 11 / 1; GCUPS per variant, same integers checked.
"""

import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from align import database  # noqa: E402
from common import bench  # noqa: E402

import torchalign as ta  # noqa: E402
from torchalign_kernels import align as K  # noqa: E402


def main():
    db = database(20_000, np.random.default_rng(1))
    q = "".join(np.random.default_rng(2).choice(list("ARNDCQEGHILKMFPSTWYV"), 1000))
    T = ta.encode(db, "protein", "cuda")
    Q = ta.encode([q] * len(db), "protein", "cuda")
    table = ta.Scoring().table.cuda()
    args = (Q.codes, Q.offsets[:-1], Q.offsets[1:] - Q.offsets[:-1], T.codes, T.offsets[:-1],
            T.offsets[1:] - T.offsets[:-1], table, 11, 1, 0)
    cells = 1000.0 * T.codes.numel()
    want = None
    for long in (1 << 30, 2048, 1024, 512):
        K.LONG_TARGET = long
        for rows in (16, 32, 48):
            for block in (32, 64):
                got = K.align_score(*args, rows=rows, block=block)[0]
                want = got if want is None else want
                ms = bench(lambda: K.align_score(*args, rows=rows, block=block), torch.device("cuda"), warmup=2,
                           rep=5)
                print(f"LONG_TARGET={long:10d} ROWS={rows:3d} BLOCK={block:4d}: {ms:8.2f} ms "
                      f"{cells / ms / 1e6:7.1f} GCUPS  {'same' if torch.equal(got, want) else 'DIFFERENT'}", flush=True)


if __name__ == "__main__":
    main()
