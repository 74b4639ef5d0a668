"""Alphabets and SequenceBatch: encoding, conversions, device packing."""

import numpy as np
import pytest
import torch

import torchalign as ta


def test_dna_codes_case_and_iupac():
    assert ta.encode("acgtN", "dna").codes.tolist() == [0, 1, 2, 3, 4]
    assert ta.encode("RYSWKMBDHV", "dna").codes.tolist() == list(range(5, 15))
    assert ta.encode("ACGU", "rna").codes.tolist() == [0, 1, 2, 3]
    comp = ta.DNA.complement_codes()
    assert ta.DNA.decode(comp[ta.encode("ACGTNRYKMBV", "dna").codes.long()]) == "TGCANYRMKVB"


def test_protein_order_is_blosum():
    assert ta.PROTEIN.symbols[:24] == "ARNDCQEGHILKMFPSTWYVBZX*"
    assert ta.encode("arnX*UO", "protein").codes.tolist() == [0, 1, 2, 22, 23, 24, 25]


def test_iupac_table_subset_rule():
    t = ta.DNA.iupac_match_table()
    code = {c: i for i, c in enumerate(ta.DNA.symbols)}
    assert t[code["N"]].all()  # N allows every text code
    assert t[code["R"], code["A"]] and t[code["R"], code["G"]] and t[code["R"], code["R"]]
    assert not t[code["R"], code["C"]] and not t[code["A"], code["N"]]


def test_roundtrip_strings_bytes_decode():
    seqs = ["ACGT", "", "NNA", "g"]
    b = ta.encode(seqs, "dna")
    assert b.decode() == [s.upper() for s in seqs] and b.lengths.tolist() == [4, 0, 3, 1]
    raw = ta.encode([b"\x00\xffab", "é"], "bytes")
    assert raw.lengths.tolist() == [4, 2]  # str -> UTF-8 bytes
    assert ta.encode("a") .alphabet.name == "bytes"


def test_unicode_code_points():
    b = ta.encode(["naïve", "日本語", "", "\U0001F600"], "unicode")
    assert b.codes.dtype == torch.int32 and b.lengths.tolist() == [5, 3, 0, 1]
    assert b.decode() == ["naïve", "日本語", "", "\U0001F600"]
    assert ta.encode([b"caf\xc3\xa9"], "unicode").codes.tolist() == [99, 97, 102, 233]  # bytes: UTF-8


def test_from_padded_numpy_nested_tokens():
    padded = torch.tensor([[0, 1, 2, 3], [3, 3, 0, 0]], dtype=torch.uint8)
    b = ta.SequenceBatch.from_padded(padded, torch.tensor([4, 2]), "dna")
    assert b.decode() == ["ACGT", "TT"]
    back, lengths = b.to_padded(pad=9)
    assert back.tolist() == [[0, 1, 2, 3], [3, 3, 9, 9]] and lengths.tolist() == [4, 2]
    assert ta.encode((padded, torch.tensor([4, 2])), "dna").decode() == ["ACGT", "TT"]
    assert ta.encode([np.array([1, 2]), np.array([3])], "dna").decode() == ["CG", "T"]
    nt = b.to_nested()
    assert ta.SequenceBatch.from_nested(nt, "dna").decode() == ["ACGT", "TT"]
    tok = ta.encode([torch.tensor([5, 70000], dtype=torch.int32), torch.tensor([1], dtype=torch.int32)])
    assert tok.alphabet.name == "tokens" and tok.codes.dtype == torch.int32
    assert ta.hamming(tok, ta.encode([torch.tensor([5, 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32)])).tolist() == [1, 0]


def test_encode_errors():
    with pytest.raises(ValueError, match="lengths must lie in"):
        ta.SequenceBatch.from_padded(torch.zeros(2, 3, dtype=torch.uint8), torch.tensor([1, 4]), "dna")
    with pytest.raises(ValueError, match=r"codes must lie in \[0, 15\)"):
        ta.encode(torch.tensor([[0, 20]]), "dna")
    with pytest.raises(ValueError, match="unknown 'klingon'"):
        ta.encode("AC", "klingon")
    with pytest.raises(TypeError, match="expected str, bytes"):
        ta.encode(3.5)
    with pytest.raises(TypeError, match="offsets must be int64"):
        ta.SequenceBatch(torch.zeros(2, dtype=torch.uint8), torch.tensor([0, 2], dtype=torch.int32), "dna")


@pytest.mark.parametrize("lanes", [1, 4, 32])
def test_pack_interleaves_sorted_chunks(lanes):
    seqs = ["ACGTACG", "", "A", "CCCCCCCCCCCC", "GT", "TTTA"] * 3
    b = ta.encode(seqs, "dna")
    p = b.pack(lanes)
    assert p is b.pack(lanes)  # cached
    assert p.lengths.tolist() == sorted(b.lengths.tolist(), reverse=True)
    for r, i in enumerate(p.order.tolist()):
        c, lane = divmod(r, lanes)
        base = int(p.chunk_offsets[c])
        got = [int(p.codes[base + j * lanes + lane]) for j in range(int(p.chunk_lengths[c]))]
        n = len(seqs[i])
        assert got[:n] == b[i].tolist() and all(x == p.pad for x in got[n:])


def test_pack_empty_batch():
    p = ta.encode([], "dna").pack(8)
    assert p.codes.numel() == 0 and p.chunk_offsets.tolist() == [0]


@pytest.mark.gpu
def test_to_device_and_pinned():
    b = ta.encode(["ACGT", "GA"], "dna").pin_memory()
    assert b.codes.is_pinned()
    g = b.to("cuda", non_blocking=True)
    assert g.device.type == "cuda" and g.decode() == ["ACGT", "GA"]
    p = g.pack(2)
    assert p.codes.device.type == "cuda"


@pytest.mark.parametrize("alphabet, seqs", [("protein", ["MKVLAAGIW", "", "PAWHEAE*X"]), ("dna", ["ACGTN", "A"]),
                                            ("unicode", ["naïve", "€"])])
def test_save_load_round_trip(tmp_path, alphabet, seqs):
    b = ta.encode(seqs, alphabet)
    b.save(tmp_path / "db.pt")
    got = ta.SequenceBatch.load(tmp_path / "db.pt")
    assert got.alphabet is b.alphabet and got.decode() == seqs
    assert torch.equal(got.codes, b.codes) and torch.equal(got.offsets, b.offsets)
    assert (got.max_code, got.max_length) == (b.max_code, b.max_length)
    # a search on the loaded database is the same search
    if alphabet == "protein":
        r1, r2 = ta.search(["HEAGAWGHEE"], got, top_k=3), ta.search(["HEAGAWGHEE"], b, top_k=3)
        assert all(torch.equal(x, y) for x, y in zip(r1, r2))


def test_save_refuses_a_custom_alphabet(tmp_path):
    from torchalign.alphabet import Alphabet

    custom = Alphabet("protein", "ab")  # a built-in's name, other symbols: load could not rebuild it
    with pytest.raises(ValueError, match="not a built-in one"):
        ta.SequenceBatch(torch.tensor([0, 1], dtype=custom.dtype), torch.tensor([0, 2]), custom).save(tmp_path / "x.pt")
