"""k-difference primer checks shared by the tiers (CPU, interpreter, GPU), against
brute-force references on fresh random inputs."""

import random

import torch

import torchalign as ta

from .hamming_cases import mutate, rand_seq


# ---- references -------------------------------------------------------------
def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def brute_primers(alpha: str, beta: str, k: int) -> list[int]:
    """The definition, literally: for each r the least L with ED(alpha[r:r+L], s) >= k for
    every substring s of beta (the empty one included), else 0. For tiny inputs."""
    subs = {beta[i:j] for i in range(len(beta) + 1) for j in range(i, len(beta) + 1)}
    out = []
    for r in range(len(alpha)):
        found = 0
        for L in range(1, len(alpha) - r + 1):
            if min(edit_distance(alpha[r : r + L], s) for s in subs) >= k:
                found = L
                break
        out.append(found)
    return out


def dp_primers(alpha: str, beta: str, k: int) -> list[int]:
    """The same by the semi-global DP (row i: prefix alpha[r:r+i] against beta, a match
    starting anywhere), row by row until the row minimum reaches k. Plain loops."""
    out = []
    for r in range(len(alpha)):
        row, found = [0] * (len(beta) + 1), 0
        for i in range(1, len(alpha) - r + 1):
            cur = [i]
            for j, y in enumerate(beta, 1):
                cur.append(min(row[j] + 1, cur[j - 1] + 1, row[j - 1] + (alpha[r + i - 1] != y)))
            row = cur
            if min(row) >= k:
                found = i
                break
        out.append(found)
    return out


# ---- checks -----------------------------------------------------------------
def related(rng: random.Random, n_alpha: int, n_beta: int, rate: float, symbols: str = "ACGT") -> tuple[str, str]:
    """alpha random; beta holds mutated copies of alpha's segments (so answers vary)."""
    alpha = rand_seq(rng, n_alpha, symbols)
    beta = ""
    while len(beta) < n_beta:
        if alpha and rng.random() < 0.6:
            i = rng.randrange(len(alpha))
            seg = list(mutate(rng, alpha[i : i + rng.randint(1, 30)], 0, symbols))
            for _ in range(int(len(seg) * rate)):
                at = rng.randrange(len(seg) + 1)
                op = rng.randrange(3)
                if op == 0:
                    seg.insert(at, rng.choice(symbols))
                elif at < len(seg):
                    if op == 1:
                        del seg[at]
                    else:
                        seg[at] = rng.choice(symbols)
            beta += "".join(seg)
        else:
            beta += rand_seq(rng, rng.randint(1, 10), symbols)
    return alpha, beta[:n_beta]


def check_random(device, rng: random.Random, n: int = 20, max_len: int = 40, ks=range(1, 7)):
    """Random pairs of lengths 0..max_len, k in ks, against the DP reference."""
    for _ in range(n):
        alpha, beta = related(rng, rng.randint(0, max_len), rng.randint(0, max_len), rng.choice([0.1, 0.2, 0.4]))
        k = rng.choice(list(ks))
        got = ta.kdiff_primers(ta.encode(alpha, "dna", device), ta.encode(beta, "dna", device), k)
        assert got.dtype == torch.int32 and got.device.type == torch.device(device).type
        assert got.tolist() == dp_primers(alpha, beta, k), (alpha, beta, k)


def check_batch(device, rng: random.Random, n_alpha: int = 4, max_len: int = 60, k: int = 3):
    """Several alphas against several beta records at once, in the flat layout."""
    alphas = [rand_seq(rng, rng.randint(0, max_len)) for _ in range(n_alpha)]
    records = ["", rand_seq(rng, 20)] + [mutate(rng, a[: rng.randint(0, len(a))], 2) for a in alphas]
    got = ta.kdiff_primers(ta.encode(alphas, "dna", device), ta.encode(records, "dna", device), k)
    want = []
    for a in alphas:  # over records: the longest prefix within k - 1 of any record wins
        per = [[L - 1 if L else len(a) - r for r, L in enumerate(dp_primers(a, rec, k))] for rec in records]
        longest = [max(col) for col in zip(*per)]
        want += [i + 1 if i < len(a) - r else 0 for r, i in enumerate(longest)]
    assert got.tolist() == want, (alphas, records, k)
    return got


def check_long(device, rng: random.Random, n_alpha: int = 150, n_beta: int = 300, k: int = 12):
    """Answers across several 64-row words (and caps), against the CPU implementation."""
    alpha, beta = related(rng, n_alpha, n_beta, 0.05)
    beta = beta + mutate(rng, alpha[10 : n_alpha - 10], n_alpha // 40)  # a long near copy: long answers
    a, b = ta.encode(alpha, "dna", device), ta.encode(beta, "dna", device)
    got = ta.kdiff_primers(a, b, k)
    want = ta.kdiff_primers(a.to("cpu"), b.to("cpu"), k)
    assert torch.equal(got.cpu(), want)
    assert want.max() > min(64, n_alpha // 2)  # the answers reach past one 64-row block where they can
    return got
