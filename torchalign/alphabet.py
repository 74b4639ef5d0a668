"""Alphabets: how symbols become integer codes.

Codes are what every op compares. DNA puts A C G T at 0..3 (so the complement is
``3 - code`` and 2-bit packing is free), then N, then the other IUPAC ambiguity codes.
PROTEIN follows Biopython's BLOSUM order so substitution-matrix rows index directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

# IUPAC nucleotide codes and the bases each may stand for.
_IUPAC_SETS = {
    "A": "A", "C": "C", "G": "G", "T": "T", "N": "ACGT",
    "R": "AG", "Y": "CT", "S": "CG", "W": "AT", "K": "GT", "M": "AC",
    "B": "CGT", "D": "AGT", "H": "ACT", "V": "ACG",
}
_COMPLEMENT = {"A": "T", "C": "G", "G": "C", "T": "A", "N": "N", "R": "Y", "Y": "R",
               "S": "S", "W": "W", "K": "M", "M": "K", "B": "V", "D": "H", "H": "D", "V": "B"}
_DNA = "ACGTNRYSWKMBDHV"


@dataclass(frozen=True)
class Alphabet:
    """A mapping from symbols to codes.

    ``symbols[i]`` is the symbol of code ``i``. ``case_sensitive=False`` accepts lower
    case too. ``tokens`` alphabets have no symbols: codes are int32 ids >= 0 given directly;
    ``unicode`` encodes str as int32 code points (one code per character).

    >>> import torchalign as ta
    >>> ta.DNA.encode_str("ACGTN").tolist()
    [0, 1, 2, 3, 4]
    """

    name: str
    symbols: str | None
    case_sensitive: bool = False
    aliases: dict = field(default_factory=dict)  # extra symbol -> code (RNA's T, say)
    _complement: str | None = None  # symbols, same order: the complement of each code
    _iupac: bool = False  # symbols are IUPAC nucleotide codes

    @property
    def is_tokens(self) -> bool:
        return self.symbols is None

    @property
    def size(self) -> int:
        """Number of codes (for tokens: 2**31, any non-negative int32)."""
        return 2**31 if self.symbols is None else len(self.symbols)

    @property
    def dtype(self) -> torch.dtype:
        return torch.int32 if self.is_tokens else torch.uint8

    @property
    def is_nucleotide(self) -> bool:
        return self._complement is not None

    def lookup_table(self) -> np.ndarray:
        """uint8[256]: byte -> code, 255 where the byte is not a symbol."""
        table = np.full(256, 255, dtype=np.uint8)
        if self.symbols is None:
            raise TypeError(f"alphabet {self.name!r} has no symbols: pass int32 token ids")
        for code, sym in enumerate(self.symbols):
            table[ord(sym)] = code
            if not self.case_sensitive:
                table[ord(sym.lower())] = code
                table[ord(sym.upper())] = code
        for sym, code in self.aliases.items():
            table[ord(sym)] = code
            if not self.case_sensitive:
                table[ord(sym.lower())] = code
        return table

    def encode_str(self, seq: str | bytes, what: str = "sequence") -> torch.Tensor:
        """Codes of one sequence as a CPU tensor; ValueError names the first bad symbol."""
        if self.name == "unicode":  # int32 code points: character-level distances (CER)
            text = seq if isinstance(seq, str) else _utf8(bytes(seq), what)
            return torch.from_numpy(np.frombuffer(_encode(text, "utf-32-le", what), dtype="<u4").astype(np.int32))
        if isinstance(seq, str):
            if self.name == "bytes":
                raw = _encode(seq, "utf-8", what)  # bytes alphabet: compare UTF-8 bytes
            else:
                if not seq.isascii():
                    i = next(i for i, c in enumerate(seq) if ord(c) > 127)
                    _encode(seq[: i + 1], "utf-8", what)  # a lone surrogate: not text at all
                    raise ValueError(f"{what}: symbol {seq[i]!r} at position {i} is not in the {self.name} "
                                     f"alphabet ({self.symbols}); clean the input or pick another alphabet")
                raw = seq.encode("ascii")
        else:
            raw = bytes(seq)
        arr = np.frombuffer(raw, dtype=np.uint8)
        if self.name == "bytes":
            return torch.from_numpy(arr.copy())
        codes = _TABLES.setdefault(self.name, self.lookup_table())[arr]
        bad = np.flatnonzero(codes == 255)
        if bad.size:
            i = int(bad[0])
            raise ValueError(
                f"{what}: symbol {chr(arr[i])!r} at position {i} is not in the {self.name} "
                f"alphabet ({self.symbols}); clean the input or pick another alphabet"
            )
        return torch.from_numpy(codes)

    def decode(self, codes) -> str:
        """Symbols of a 1-D code tensor or array (tokens: space-separated ids)."""
        codes = torch.as_tensor(codes).cpu().numpy()
        if self.name == "unicode":
            return "".join(map(chr, codes.tolist()))
        if self.symbols is None:
            return " ".join(str(int(c)) for c in codes)
        if self.name == "bytes":
            return codes.astype(np.uint8).tobytes().decode("latin-1")
        lut = np.frombuffer(self.symbols.encode("latin-1"), dtype=np.uint8)
        return lut[codes.astype(np.int64)].tobytes().decode("latin-1")

    def complement_list(self) -> list[int]:
        """code -> code of the complementary symbol (nucleotides only)."""
        if self._complement is None:
            raise ValueError(f"alphabet {self.name!r} has no complement; both_strands needs DNA or RNA")
        return [self.symbols.index(c) for c in self._complement]

    def complement_codes(self, device=None) -> torch.Tensor:
        """uint8[size] on ``device``: complement_list() as a tensor (made there: inside a
        compiled CUDA graph, work on a CPU tensor costs inductor a C++ compile)."""
        return torch.tensor(self.complement_list(), dtype=torch.uint8, device=device)

    def iupac_match_rows(self) -> list[list[int]]:
        """[p][t] = 1 when every base text code t may stand for is allowed by pattern code p
        (N allows everything; A allows only A)."""
        if not self._iupac:
            raise ValueError(f"alphabet {self.name!r} has no IUPAC codes; iupac=True needs DNA or RNA")
        syms = self.symbols.replace("U", "T")
        sets = [set(_IUPAC_SETS[s]) for s in syms]
        return [[int(t <= p) for t in sets] for p in sets]

    def iupac_match_table(self, device=None) -> torch.Tensor:
        """uint8[size, size] on ``device``: iupac_match_rows() as a tensor."""
        return torch.tensor(self.iupac_match_rows(), dtype=torch.uint8, device=device)


def _encode(text: str, codec: str, what: str) -> bytes:
    """text.encode(codec); a lone surrogate (no character: text decoded wrongly, or a file's
    non-UTF-8 byte kept by surrogateescape) raises ValueError naming where it is."""
    try:
        return text.encode(codec)
    except UnicodeEncodeError as e:
        c = text[e.start]
        found = (f"byte {ord(c) - 0xDC00:#04x}, which is not UTF-8" if 0xDC80 <= ord(c) <= 0xDCFF
                 else f"{c!r}, a lone surrogate (no character)")
        raise ValueError(f"{what}: position {e.start} holds {found}; decode the text correctly (a file: "
                         "convert it to UTF-8), or pass bytes") from None


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{what}: byte {raw[e.start]:#04x} at position {e.start} is not UTF-8; the unicode "
                         "alphabet takes str or UTF-8 bytes: decode with the text's codec, or use "
                         "alphabet='bytes'") from None


_TABLES: dict = {}

DNA = Alphabet("dna", _DNA, _complement="".join(_COMPLEMENT[c] for c in _DNA), _iupac=True)
RNA = Alphabet("rna", _DNA.replace("T", "U"), aliases={},
               _complement="".join(_COMPLEMENT[c] for c in _DNA).replace("T", "U"), _iupac=True)
PROTEIN = Alphabet("protein", "ARNDCQEGHILKMFPSTWYVBZX*UO")
BYTES = Alphabet("bytes", "".join(chr(i) for i in range(256)), case_sensitive=True)
TOKENS = Alphabet("tokens", None, case_sensitive=True)
UNICODE = Alphabet("unicode", None, case_sensitive=True)  # str -> int32 code points

_BY_NAME = {a.name: a for a in (DNA, RNA, PROTEIN, BYTES, TOKENS, UNICODE)}


def get_alphabet_or_none(name: str) -> Alphabet | None:
    """The built-in alphabet of this name, or None."""
    return _BY_NAME.get(name.lower())


def get_alphabet(alphabet: str | Alphabet) -> Alphabet:
    """An Alphabet from its name ("dna", "rna", "protein", "bytes", "tokens") or itself."""
    if isinstance(alphabet, Alphabet):
        return alphabet
    if isinstance(alphabet, str) and alphabet.lower() in _BY_NAME:
        return _BY_NAME[alphabet.lower()]
    raise ValueError(f"alphabet: unknown {alphabet!r}; use one of {sorted(_BY_NAME)} or an Alphabet")
