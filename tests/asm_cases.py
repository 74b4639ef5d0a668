"""Approximate-matching (k differences) checks shared by the three tiers (CPU,
interpreter, GPU), against the plain reference and edlib, on fresh random inputs."""

import random

import edlib
import torch

import torchalign as ta

from . import reference as ref
from .hamming_cases import mutate, rand_seq


def texts_and_patterns(rng: random.Random, text_lens=(0, 1, 40, 150), pat_lens=(1, 5, 20), n_texts=3, n_pat=4,
                       symbols="ACGT"):
    """Random texts; patterns mostly cut from the texts with a few edits (so hits exist)."""
    texts = [rand_seq(rng, rng.choice(text_lens), symbols) for _ in range(n_texts)]
    patterns = []
    src = "".join(texts)
    for _ in range(n_pat):
        m = rng.choice(pat_lens)
        if len(src) >= m and rng.random() < 0.7:
            i = rng.randrange(len(src) - m + 1)
            p = list(mutate(rng, src[i : i + m], rng.randint(0, 2), symbols))
            if len(p) > 1 and rng.random() < 0.5:
                del p[rng.randrange(len(p))]  # an indel
            patterns.append("".join(p))
        else:
            patterns.append(rand_seq(rng, m, symbols))
    return texts, patterns


def hit_tuples(h):
    return list(zip(*(x.tolist() for x in (h.pattern, h.text, h.start, h.end, h.distance, h.strand))))


def check_search(device, rng, k=2, both_strands=False, alphabet="dna", algorithm="auto", **sizes):
    texts, patterns = texts_and_patterns(rng, **sizes)
    hits = ta.asm_search(ta.encode(texts, alphabet, device), ta.encode(patterns, alphabet, device), k,
                         both_strands=both_strands, algorithm=algorithm)
    assert hits.start.dtype == torch.int64 and hits.distance.dtype == torch.int32 and hits.strand.dtype == torch.int8
    assert hits.end.device.type == torch.device(device).type
    got = hit_tuples(hits)
    assert got == ref.asm_hits(texts, patterns, k, both_strands=both_strands)
    return got


def check_best_and_profile(device, rng, alphabet="dna", algorithm="auto", **sizes):
    texts, patterns = texts_and_patterns(rng, **sizes)
    t, p = ta.encode(texts, alphabet, device), ta.encode(patterns, alphabet, device)
    d, end = ta.asm_best(t, p, algorithm=algorithm)
    assert d.dtype == torch.int32 and end.dtype == torch.int64 and d.shape == (len(patterns), len(texts))
    assert (d.tolist(), end.tolist()) == ref.asm_best(texts, patterns)
    prof = ta.asm_profile(t, p, algorithm=algorithm)
    want = [sum((ref.asm_column(q, s)[1:] for s in texts), []) for q in patterns]
    assert prof.tolist() == want


def check_edlib(device, rng, n=6, text_len=300, m=30):
    """The best distance, every end reaching it and each one's start, as edlib's HW mode
    reports them (edlib: inclusive ends, the earliest start)."""
    for _ in range(n):
        t = rand_seq(rng, text_len)
        i = rng.randrange(text_len - m)
        p = mutate(rng, t[i : i + m], rng.randint(0, 4))
        p = p[:5] + p[6:] if rng.random() < 0.5 else p
        want = edlib.align(p, t, mode="HW", task="locations")
        d = want["editDistance"]
        best, _ = ta.asm_best(ta.encode(t, "dna", device), ta.encode(p, "dna", device))
        assert int(best) == d
        hits = ta.asm_search(ta.encode(t, "dna", device), ta.encode(p, "dna", device), d)
        at_best = [(s, e) for s, e, x in zip(hits.start.tolist(), hits.end.tolist(), hits.distance.tolist()) if x == d]
        assert at_best == [(s, e + 1) for s, e in want["locations"]]


def check_tokens_and_unicode(device, rng, algorithm="auto"):
    """Alphabets too big for match-mask tables (int32 token ids, unicode code points)."""
    texts = [[rng.randrange(5) * 100_003 for _ in range(rng.randint(0, 60))] for _ in range(3)]
    patterns = [texts[0][3:9] or [7], [100_003, 0, 999_999]]
    tok = lambda seqs: ta.encode([torch.tensor(s, dtype=torch.int32) for s in seqs], "tokens", device)  # noqa: E731
    got = hit_tuples(ta.asm_search(tok(texts), tok(patterns), 2, algorithm=algorithm))
    assert got == ref.asm_hits(texts, patterns, 2)
    words = ["naïve café au lait", "日本語のテキストです", ""]
    pats = ["cafe", "テキスト"]
    u = lambda s: ta.encode(s, "unicode", device)  # noqa: E731
    assert hit_tuples(ta.asm_search(u(words), u(pats), 1, algorithm=algorithm)) == ref.asm_hits(words, pats, 1)
    d, end = ta.asm_best(u(words), u(pats), algorithm=algorithm)
    assert (d.tolist(), end.tolist()) == ref.asm_best(words, pats)


def check_k_boundaries(device, rng, n=10):
    """A substring at exactly d edits is found with k = d and not with k = d - 1."""
    for _ in range(n):
        t = rand_seq(rng, 80)
        p = mutate(rng, t[20:45], rng.randint(1, 5))
        col = ref.asm_column(p, t)
        d = min(col)
        T, P = ta.encode(t, "dna", device), ta.encode(p, "dna", device)
        at_d = ta.asm_search(T, P, d)
        assert at_d.end.tolist() == [j for j, x in enumerate(col) if x <= d] and len(at_d.end) > 0
        assert ta.asm_search(T, P, d - 1).end.numel() == 0
