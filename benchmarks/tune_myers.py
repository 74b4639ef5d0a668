"""Variants of the Myers kernels on the lent GPU: launch shapes, chunk sizes, wavefront.

    python benchmarks/tune_myers.py

Prints the median time of each variant; the chosen defaults live in
torchalign_kernels.myers (LAUNCH, WAVE), torchalign_kernels.myers_wave (LANES) and
torchalign_kernels.asm (OVERLAP_SHARE).
"""

import torch
import triton.testing

import torchalign as ta
from torchalign_kernels import asm, myers, myers_wave


def ms(fn):
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")


def main():
    g = torch.Generator().manual_seed(1)
    text = torch.randint(0, 4, (100_000_000,), generator=g, dtype=torch.uint8).cuda()
    pats = torch.randint(0, 4, (256, 32), generator=g, dtype=torch.uint8).cuda()
    T, P = ta.encode(text, "dna"), ta.encode(pats, "dna")
    y = torch.randint(0, 2, (1 << 22,), generator=g, dtype=torch.uint8).cuda()
    x = torch.randint(0, 2, (1024,), generator=g, dtype=torch.uint8).cuda()
    Y, X = ta.encode(y, "dna"), ta.encode(x, "dna")
    a100 = ta.encode(torch.randint(0, 4, (4096, 100), generator=g, dtype=torch.uint8).cuda(), "dna")
    b100 = ta.encode(torch.randint(0, 4, (4096, 100), generator=g, dtype=torch.uint8).cuda(), "dna")
    a1k = ta.encode(torch.randint(0, 4, (2048, 1000), generator=g, dtype=torch.uint8).cuda(), "dna")
    b1k = ta.encode(torch.randint(0, 4, (2048, 1000), generator=g, dtype=torch.uint8).cuda(), "dna")
    t = ms(lambda: ta.levenshtein_cdist(a100, b100, check=False))
    print(f"cdist L=100 {t:.2f} ms ({4096**2 * 1e4 / t / 1e9:.1f} TCUPS)", flush=True)
    t = ms(lambda: ta.asm_search(T, P, 3, check=False))
    print(f"asm_search 256 x 32, 100 Mbp: {t:.1f} ms", flush=True)
    ref = ta.asm_best(Y, X)
    myers.WAVE = False
    t = ms(lambda: ta.asm_best(Y, X, check=False))
    print(f"column in memory: asm_best 1024 x 4Mi {t:.2f} ms", flush=True)
    myers.WAVE = True
    for lanes in (64, 128, 256):
        myers_wave.LANES = lanes
        for share in (1, 2, 4):
            asm.OVERLAP_SHARE = share
            got = ta.asm_best(Y, X)
            t = ms(lambda: ta.asm_best(Y, X, check=False))
            same = all(torch.equal(a, b) for a, b in zip(got, ref))
            print(f"wave lanes {lanes}, overlap share {share}: asm_best 1024 x 4Mi {t:.2f} ms (same: {same})",
                  flush=True)
        t = ms(lambda: ta.levenshtein_cdist(a1k, b1k, check=False))
        print(f"wave lanes {lanes}: cdist L=1000 {t:.1f} ms ({2048**2 * 1e6 / t / 1e9:.1f} TCUPS)", flush=True)


if __name__ == "__main__":
    main()
