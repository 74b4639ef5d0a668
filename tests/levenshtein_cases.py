"""Levenshtein checks shared by the three tiers (CPU, interpreter, GPU), against rapidfuzz
and the plain reference, on fresh random inputs."""

import random

import torch
from rapidfuzz.distance import Levenshtein

import torchalign as ta

from . import reference as ref
from .hamming_cases import mutate, rand_seq


def related_pairs(rng: random.Random, lengths, n: int, symbols="ACGT"):
    """Pairs whose first side has a length from ``lengths``; the second is an edited copy
    (so distances span small to large), or unrelated."""
    a, b = [], []
    for _ in range(n):
        x = rand_seq(rng, rng.choice(lengths), symbols)
        if rng.random() < 0.7:
            y = list(mutate(rng, x, rng.randint(0, max(1, len(x) // 4)), symbols))
            for _ in range(rng.randint(0, 3)):  # indels
                if y and rng.random() < 0.5:
                    del y[rng.randrange(len(y))]
                else:
                    y.insert(rng.randint(0, len(y)), rng.choice(symbols))
            y = "".join(y)
        else:
            y = rand_seq(rng, rng.choice(lengths), symbols)
        a.append(x)
        b.append(y)
    return a, b


def check_pairs(device, rng, lengths=(0, 1, 5, 63, 64, 65, 130), n=30, alphabet="dna", symbols="ACGT",
                algorithm="auto"):
    a, b = related_pairs(rng, lengths, n, symbols)
    got = ta.levenshtein(ta.encode(a, alphabet, device), ta.encode(b, alphabet, device), algorithm=algorithm)
    assert got.dtype == torch.int32 and got.device.type == torch.device(device).type
    as_encoded = (lambda s: s.encode()) if alphabet == "bytes" else (lambda s: s)  # noqa: E731  (UTF-8)
    assert got.tolist() == [Levenshtein.distance(as_encoded(x), as_encoded(y)) for x, y in zip(a, b)]


def check_cdist(device, rng, lengths=(0, 1, 7, 33, 64, 65), na=9, nb=7, alphabet="dna", algorithm="auto"):
    a, b = related_pairs(rng, lengths, max(na, nb))
    a, b = a[:na], b[:nb]
    got = ta.levenshtein_cdist(ta.encode(a, alphabet, device), ta.encode(b, alphabet, device), algorithm=algorithm)
    assert got.shape == (na, nb)
    assert got.tolist() == [[Levenshtein.distance(x, y) for y in b] for x in a]


def check_tokens(device, rng, n=12, max_len=40, algorithm="auto"):
    a = [[rng.randrange(100_000) for _ in range(rng.randint(0, max_len))] for _ in range(n)]
    b = [x[: rng.randint(0, len(x))] + [rng.randrange(5) for _ in range(rng.randint(0, 5))] for x in a]
    tok = lambda seqs: ta.encode([torch.tensor(s, dtype=torch.int32) for s in seqs], "tokens", device)  # noqa: E731
    got = ta.levenshtein(tok(a), tok(b), algorithm=algorithm)
    assert got.tolist() == [Levenshtein.distance(x, y) for x, y in zip(a, b)]


def check_unicode_bytes(device, algorithm="auto"):
    a = ["naïve café", "Straße", "日本語のテキスト", ""]
    b = ["naive cafe", "Strasse", "日本語テキスト", "ü"]
    got = ta.levenshtein(ta.encode(a, device=device), ta.encode(b, device=device), algorithm=algorithm)  # UTF-8
    assert got.tolist() == [Levenshtein.distance(x.encode(), y.encode()) for x, y in zip(a, b)]


def check_unicode_chars(device, rng, n=8, algorithm="auto"):
    """alphabet="unicode": one code per character (CER), against rapidfuzz on the strings."""
    symbols = "aéz日本語\U0001F600 "
    a, b = related_pairs(rng, (0, 1, 9, 30), n, symbols)
    got = ta.levenshtein(ta.encode(a, "unicode", device), ta.encode(b, "unicode", device), algorithm=algorithm)
    assert got.tolist() == [Levenshtein.distance(x, y) for x, y in zip(a, b)]


def check_max_distance_boundaries(device, rng, n=20, algorithm="auto"):
    a, b = related_pairs(rng, (10, 40), n)
    d = [ref.levenshtein(x, y) for x, y in zip(a, b)]
    A, B = ta.encode(a, "dna", device), ta.encode(b, "dna", device)
    for i, di in enumerate(d):  # d = k reports d; d = k + 1 reports k + 1 (= d)
        for k in (di, di - 1):
            if k >= 0:
                got = ta.levenshtein(A, B, max_distance=k, algorithm=algorithm)[i].item()
                assert got == min(di, k + 1)
    got = ta.levenshtein_cdist(A, B, max_distance=3, algorithm=algorithm)
    want = [[min(ref.levenshtein(x, y), 4) for y in b] for x in a]
    assert got.tolist() == want


def check_band(device, rng, lengths=(130, 200), bounds=(0, 5, 64), n=5, boundaries=True):
    """max_distance on multiword sequences (Ukkonen's band): min(d, K + 1) for every pair,
    for pairs and the matrix, and each pair at K = d and K = d - 1. rapidfuzz is the truth
    (it is exact and fast on long pairs)."""
    a, b = related_pairs(rng, lengths, n)
    d = [Levenshtein.distance(x, y) for x, y in zip(a, b)]
    A, B = ta.encode(a, "dna", device), ta.encode(b, "dna", device)
    for k in bounds:
        assert ta.levenshtein(A, B, max_distance=k).tolist() == [min(x, k + 1) for x in d]
        want = [[min(Levenshtein.distance(x, y), k + 1) for y in b] for x in a]
        assert ta.levenshtein_cdist(A, B, max_distance=k).tolist() == want
    for x, y, di in zip(a, b, d) if boundaries else ():
        for k in (di, di - 1):
            if k >= 0:
                got = ta.levenshtein(ta.encode([x], "dna", device), ta.encode([y], "dna", device), max_distance=k)
                assert got.item() == min(di, k + 1)
