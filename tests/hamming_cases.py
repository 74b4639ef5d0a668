"""Hamming checks shared by the three tiers (CPU, interpreter, GPU).

Each check draws fresh random inputs, runs the public op on ``device`` and compares with
the plain-Python reference in tests/reference.py. ``n`` scales the sizes (the
interpreter runs small ones).
"""

import random

import torch

import torchalign as ta

from . import reference as ref

DNA = "ACGT"


def rand_seq(rng: random.Random, n: int, alphabet: str = DNA) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def mutate(rng: random.Random, s: str, n_changes: int, alphabet: str = DNA) -> str:
    s = list(s)
    for i in rng.sample(range(len(s)), min(n_changes, len(s))):
        s[i] = rng.choice(alphabet.replace(s[i], "") or alphabet)
    return "".join(s)


def check_pairs(device, rng: random.Random, n: int = 40, alphabet: str = "dna"):
    symbols = {"dna": "ACGTN", "protein": "ARNDCQEGHILKMFPSTWYVX", "bytes": "abcXYZ \x00\xff"}[alphabet]
    lengths = [0, 1] + [rng.randint(0, 3 * n) for _ in range(n)]
    a = [rand_seq(rng, m, symbols) for m in lengths]
    b = [mutate(rng, s, rng.randint(0, len(s)), symbols) for s in a]
    if alphabet == "bytes":
        a, b = [s.encode("latin-1") for s in a], [s.encode("latin-1") for s in b]
    got = ta.hamming(ta.encode(a, alphabet, device), ta.encode(b, alphabet, device))
    assert got.dtype == torch.int32 and got.device.type == torch.device(device).type
    assert got.tolist() == [ref.hamming(x, y) for x, y in zip(a, b)]


def check_cdist(device, rng: random.Random, na: int = 37, nb: int = 21, length: int = 45, alphabet="dna"):
    symbols = {"dna": DNA, "dna+n": "ACGTN", "protein": "ARNDCQEGHILKMFPSTWYV", "bytes": "abcdefgh\x01"}[alphabet]
    encode_as = "dna" if alphabet == "dna+n" else alphabet
    base = rand_seq(rng, length, symbols)
    a = [mutate(rng, base, rng.randint(0, length), symbols) for _ in range(na)]
    b = [mutate(rng, base, rng.randint(0, length), symbols) for _ in range(nb)]
    got = ta.hamming_cdist(ta.encode(a, encode_as, device), ta.encode(b, encode_as, device))
    assert got.shape == (na, nb) and got.dtype == torch.int32
    assert got.tolist() == [[ref.hamming(x, y) for y in b] for x in a]


def check_tokens_cdist(device, rng: random.Random, na=9, nb=7, length=13):
    a = torch.randint(0, 50_000, (na, length), dtype=torch.int32)
    b = a[torch.randint(0, na, (nb,))].clone()
    b[torch.rand(b.shape) < 0.3] = 7
    got = ta.hamming_cdist(ta.encode(a, "tokens", device), ta.encode(b, "tokens", device))
    assert got.tolist() == [[int((x != y).sum()) for y in b] for x in a]


def texts_and_patterns(rng: random.Random, n_texts=3, text_len=120, n_pat=5, max_pat=9, symbols=DNA):
    texts = [rand_seq(rng, rng.randint(0, text_len), symbols) for _ in range(n_texts)]
    texts.append(rand_seq(rng, max_pat - 1, symbols))  # shorter than the longest pattern
    patterns = []
    for _ in range(n_pat):
        m = rng.randint(1, max_pat)
        src = "".join(texts)
        if len(src) >= m and rng.random() < 0.7:  # mostly patterns that occur, mutated
            i = rng.randrange(len(src) - m + 1)
            patterns.append(mutate(rng, src[i : i + m], rng.randint(0, 2), symbols))
        else:
            patterns.append(rand_seq(rng, m, symbols))
    return texts, patterns


def check_profile(device, rng: random.Random, iupac=False, **sizes):
    texts, patterns = texts_and_patterns(rng, **sizes)
    if iupac:
        patterns = [p[:-1] + rng.choice("NRYSWKMBDHV") if len(p) > 1 else "N" for p in patterns]
    t, p = ta.encode(texts, "dna", device), ta.encode(patterns, "dna", device)
    got = ta.hamming_profile(t, p, iupac=iupac)
    assert got.shape == (len(patterns), sum(map(len, texts)))
    assert got.tolist() == ref.profile(texts, patterns, iupac=iupac)


def check_kmismatch(device, rng: random.Random, k=2, both_strands=False, iupac=False, **sizes):
    texts, patterns = texts_and_patterns(rng, **sizes)
    if iupac:
        patterns = [("N" + p[1:]) for p in patterns]
        texts = [t[: len(t) // 2] + "N" + t[len(t) // 2 :] for t in texts]  # N in the text too
    hits = ta.kmismatch_search(ta.encode(texts, "dna", device), ta.encode(patterns, "dna", device), k,
                               both_strands=both_strands, iupac=iupac)
    assert hits.pattern.dtype == torch.int64 and hits.distance.dtype == torch.int32
    assert hits.strand.dtype == torch.int8
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert got == ref.kmismatch(texts, patterns, k, both_strands=both_strands, iupac=iupac)
    return len(got)


def check_contig(device, name="contig_OFHT01000022.fna", n_pat=8, m=20, k=3, span=None):
    """Patterns cut from the real contig (then mutated), both strands, vs the CPU op and,
    on a window of the contig, vs the plain reference."""
    from .conftest import read_fasta

    rng = random.Random(7)
    seq = read_fasta(name)[0][1].upper()
    seq = seq if span is None else seq[:span]
    patterns = []
    for _ in range(n_pat):
        i = rng.randrange(len(seq) - m)
        p = mutate(rng, seq[i : i + m], rng.randint(0, k))
        patterns.append(ref.revcomp(p) if rng.random() < 0.5 else p)
    texts = [seq]
    hits = ta.kmismatch_search(ta.encode(texts, "dna", device), ta.encode(patterns, "dna", device), k,
                               both_strands=True)
    got = list(zip(*(x.tolist() for x in (hits.pattern, hits.text, hits.position, hits.distance, hits.strand))))
    assert len(got) >= n_pat  # every pattern came from the contig
    return got, texts, patterns
