"""torchalign: batched sequence comparison operators for PyTorch, written in Triton."""

from .align import Scores, SearchResult, align_score, needleman_wunsch, search, smith_waterman
from .alphabet import BYTES, DNA, PROTEIN, RNA, TOKENS, UNICODE, Alphabet
from .asm import asm_best, asm_profile, asm_search
from .batch import PackedBatch, SequenceBatch, encode
from .hamming import hamming, hamming_cdist, hamming_profile, kmismatch_search
from .hits import EditHits, Hits
from .levenshtein import levenshtein, levenshtein_cdist
from .primers import kdiff_primers
from .scoring import Scoring
from .soft_align import soft_align, soft_alignment
from .soft_dtw import soft_dtw, soft_dtw_divergence
from .topk import NearDuplicates, Neighbours, levenshtein_topk, near_duplicates
from .traceback import Alignment, traceback

__version__ = "0.1.0"

__all__ = [
    "Alphabet", "DNA", "RNA", "PROTEIN", "BYTES", "TOKENS", "UNICODE",
    "SequenceBatch", "PackedBatch", "encode", "Hits", "EditHits",
    "hamming", "hamming_cdist", "hamming_profile", "kmismatch_search",
    "levenshtein", "levenshtein_cdist", "levenshtein_topk", "near_duplicates", "Neighbours", "NearDuplicates",
    "asm_search", "asm_best", "asm_profile",
    "kdiff_primers",
    "Scoring", "Scores", "SearchResult", "align_score", "smith_waterman", "needleman_wunsch", "search",
    "Alignment", "traceback",
    "soft_align", "soft_alignment",
    "soft_dtw", "soft_dtw_divergence",
]
