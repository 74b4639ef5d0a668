"""Error-rate metrics of text (ASR, OCR, generation): CER, WER, MER and edit distance.

``CharErrorRate``, ``WordErrorRate``, ``MatchErrorRate`` and ``EditDistance`` are
``torchmetrics.Metric`` classes (``pip install "torchalign[metrics]"``; imported on first
use, so ``import torchalign.metrics`` needs only torch); ``char_error_rate``,
``word_error_rate``, ``match_error_rate`` and ``edit_distance`` are plain functions. All
take ``preds`` and ``target``, a str or a list of str, and compute the edit distances of
the whole batch with one ``ta.levenshtein`` call on the metric's device (the functions'
``device=``, default CPU): characters as unicode code points (all-ASCII batches as bytes,
the same characters), words as ids from a vocabulary of the batch.

Definitions and results are torchmetrics' (``torchmetrics.functional.text``, checked in
the tests on random, real and Unicode text, empty strings and whitespace runs):
characters are those of the Python str, whitespace included, nothing stripped; words are
``str.split()``'s; CER and WER divide by the references' length, MER by the sum of the
longer side of each pair; references with no characters (words) at all give inf, or nan
with no errors. The metrics' states are torchmetrics' (float32 sums), so DDP reduces
them as torchmetrics does. Where torchalign differs from torchmetrics:

- ``EditDistance`` / ``edit_distance`` are exact. torchmetrics' keeps only a band of 25
  cells (more for very unequal lengths) around the length-scaled diagonal of the DP (a
  tercom speed-up): for pairs whose best alignment leaves it, possible once a string has
  27 characters (unrelated strings, or lengths far apart: "a" vs "a" + 26 "b" gives 27
  there, 26 here), it reports more than the edit distance; rapidfuzz, jiwer and
  torchmetrics' own CER agree with ours. Similar strings give equal results.
- ``preds`` and ``target`` of different lengths raise ValueError (torchmetrics' CER, WER
  and MER drop the extra strings); items that are not str raise TypeError.

jiwer 4 (``jiwer.cer``, ``wer``, ``mer``; arguments in the order reference, hypothesis)
gives the same numbers except where its default transforms or definitions differ:

- CER: jiwer strips leading and trailing whitespace of each string first.
- WER / MER words: jiwer replaces runs of two or more whitespace characters by one space,
  strips, and splits at " ": a single tab, newline or no-break space between two words
  keeps them one word in jiwer (``str.split()`` here and in torchmetrics splits them).
- MER: jiwer divides by hits + substitutions + deletions + insertions of the alignment
  rapidfuzz picks, torchmetrics and torchalign by max(len(pred), len(target)) per pair;
  they differ when an optimal alignment has both insertions and deletions: pred
  "b c d e" vs target "a b c d" gives 0.5 here, 0.4 in jiwer.
- References without any words (characters): jiwer's WER (CER) is the number of
  insertions and its MER 0 or 1, not inf or nan.

>>> import torchalign.metrics as tam
>>> tam.char_error_rate(["kitten sat"], ["sitting sat"]), tam.word_error_rate("a b c", "a x c d")
(tensor(0.2727), tensor(0.5000))
"""

from .functional import char_error_rate, edit_distance, match_error_rate, word_error_rate

METRICS = ("CharErrorRate", "WordErrorRate", "MatchErrorRate", "EditDistance")

__all__ = ["char_error_rate", "word_error_rate", "match_error_rate", "edit_distance", *METRICS]


def __getattr__(name: str):
    if name in METRICS:  # the Metric classes need torchmetrics: imported when first asked for
        from . import modules

        return getattr(modules, name)
    raise AttributeError(f"module 'torchalign.metrics' has no attribute {name!r}")
