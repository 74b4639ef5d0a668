"""Times kernel variants (block shapes, warps, one-hot placement) on the benchmark sizes.

    python benchmarks/tune_hamming.py [--genome BP]

Calls the launch helpers directly; every variant must give the first variant's integers.
"""

import argparse

import torch
import triton

from torchalign_kernels import hamming as K


def bench(fn):
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")


def tune_cdist():
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randint(0, 4, (8192, 256), device="cuda", dtype=torch.uint8, generator=g)
    b = torch.randint(0, 4, (8192, 256), device="cuda", dtype=torch.uint8, generator=g)
    want = None
    for loop in (True, False):
        for bm, bn, warps, stages in ((128, 128, 4, 3), (64, 128, 4, 3)):
            fn = lambda: K.hamming_cdist(a, b, 4, block_m=bm, block_n=bn,  # noqa: E731
                                         num_warps=warps, num_stages=stages, for_loop=loop)
            try:
                out = fn()
                want = out if want is None else want
                ok = torch.equal(out, want)
                print(f"cdist for={loop} BM={bm:3d} BN={bn:3d} warps={warps} stages={stages}: "
                      f"{bench(fn):.3f} ms {'ok' if ok else 'WRONG'}", flush=True)
            except Exception as e:  # a shape that does not fit the chip
                print(f"cdist for={loop} BM={bm} BN={bn} warps={warps}: failed {type(e).__name__}: {str(e)[:80]}")


def tune_windows(genome_bp: int):
    g = torch.Generator(device="cuda").manual_seed(1)
    text = torch.randint(0, 4, (genome_bp,), device="cuda", dtype=torch.uint8, generator=g)
    offs = torch.tensor([0, genome_bp], device="cuda")
    n_pat, m = 2048, 23
    starts = torch.randint(0, genome_bp - m, (n_pat,), device="cuda", generator=g)
    pat = text[starts[:, None] + torch.arange(m, device="cuda")].reshape(-1).contiguous()
    pst = torch.arange(n_pat, device="cuda") * m
    plen = torch.full((n_pat,), m, device="cuda")
    want = None
    for bm, bn, warps, stages, loop in ((128, 64, 4, 3, True), (128, 64, 2, 3, True), (128, 32, 2, 3, True),
                                        (256, 64, 4, 3, True), (64, 64, 2, 3, True), (256, 32, 4, 3, True)):
        fn = lambda: K.hamming_windows(text, offs, pat, pst, plen, m, 4, None, 3, search=True,  # noqa: E731
                                       capacity=1 << 16, block_m=bm, block_n=bn, num_warps=warps,
                                       num_stages=stages, for_loop=loop)
        try:
            cnt = int(fn()[0])
            want = cnt if want is None else want
            ms = bench(fn)
            print(f"windows BM={bm:3d} BN={bn:3d} warps={warps} stages={stages} for={loop}: {ms:.2f} ms, "
                  f"{n_pat * genome_bp / ms / 1e9:.2f} e12 comparisons/s, hits {cnt} {'ok' if cnt == want else 'WRONG'}",
                  flush=True)
        except Exception as e:
            print(f"windows BM={bm} BN={bn} warps={warps}: failed {type(e).__name__}: {str(e)[:80]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--genome", type=int, default=100_000_000)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "triton", triton.__version__)
    tune_cdist()
    tune_windows(args.genome)
