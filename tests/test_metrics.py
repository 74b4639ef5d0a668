"""torchalign.metrics against torchmetrics (the definitions it follows) and jiwer: random,
real and Unicode text, empty strings, whitespace of every kind, many updates, the states;
where jiwer or torchmetrics differ, the documented difference itself."""

import doctest
import itertools
import random
import subprocess
import sys

import jiwer
import pytest
import torch
import torchmetrics.functional.text as TMF
import torchmetrics.text as TM
from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import Levenshtein

import torchalign.metrics as tam
from torchalign.metrics import text as tat

from .conftest import REPO

FUNCTIONS = [(tam.char_error_rate, TMF.char_error_rate), (tam.word_error_rate, TMF.word_error_rate),
             (tam.match_error_rate, TMF.match_error_rate)]
RATES = [("CharErrorRate", TM.CharErrorRate), ("WordErrorRate", TM.WordErrorRate),
         ("MatchErrorRate", TM.MatchErrorRate)]
REDUCTIONS = ["mean", "sum", "none", None]
WHITESPACE = [chr(c) for c in range(tat.SPACE_LAST + 1) if chr(c).isspace()]
# real sentences beyond ASCII (scripts, combining marks, emoji, no-break and ideographic spaces)
UNICODE_LINES = [
    "Größere Straßen führen über die Brücke nach Köln.",
    "Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "我们明天早上九点在火车站见面。",
    "東京都の天気は　晴れのち曇り　です。",
    "नमस्ते, आप कैसे हैं? मैं ठीक हूँ।",
    "مرحبا بكم في المكتبة العامة",
    "naïve café — déjà vu, coöperate, résumé",
    "e\u0301te\u0301 (combining accents) and ﬁ ligatures",
    "ship it 🚀🚀 then 👩\u200d💻 fixes the bug\u00a0again",
    "한국어 문장도 띄어쓰기를 합니다",
    "Ünïcödé\u2003spaces\u2009everywhere\u3000here",
]


def same(got, want):
    """Equal dtype and values (nan equal to nan), on any device."""
    got = got.cpu()
    assert got.dtype == want.dtype, (got, want)
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), (got, want)


# ---- data -----------------------------------------------------------------------------
def random_text(rng, alphabet, lo=0, hi=12):
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def random_batches(seed, n_batches=6, size=8):
    """Batches of random strings over small alphabets (many equal words and characters),
    whitespace of every kind, non-ASCII characters and empty strings."""
    rng = random.Random(seed)
    alphabets = ["ab ", "abc  \t\n", "xyz" + "".join(WHITESPACE), "aé漢😀 \u00a0\u3000\u0301", "ab\U0001F600 \ud800"]
    out = []
    for _ in range(n_batches):
        alpha = rng.choice(alphabets)
        n = rng.randint(0, size)
        out.append(([random_text(rng, alpha) for _ in range(n)], [random_text(rng, alpha) for _ in range(n)]))
    return out


def real_lines():
    """Lines of the repository's README and sources (real text, indentation included)."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    for name in ("levenshtein.py", "batch.py", "alphabet.py"):
        lines += (REPO / "torchalign" / name).read_text(encoding="utf-8").splitlines()
    return [line[:120] for line in lines] + UNICODE_LINES


def corrupt(line, rng, vocab):
    """What a recogniser might make of ``line``: words dropped, inserted or replaced,
    typos, case changes, doubled spaces and tabs."""
    words = line.split(" ")
    for _ in range(rng.randint(0, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(words) + 1)
        if op == 0 and i < len(words):
            del words[i]
        elif op == 1:
            words.insert(i, rng.choice(vocab))
        elif op == 2 and i < len(words):
            words[i] = rng.choice(vocab)
        elif op == 3 and i < len(words) and words[i]:
            w = words[i]
            j = rng.randrange(len(w))
            words[i] = w[:j] + rng.choice("aeiou漢") + w[j + 1 :]
        elif op == 4 and i < len(words):
            words[i] = words[i].swapcase()
        else:
            words.insert(i, rng.choice(["", "\t"]))
    return " ".join(words)


def real_pairs(seed, n=120):
    """(preds, target): real lines and corrupted copies, some lines against unrelated ones."""
    rng = random.Random(seed)
    lines = real_lines()
    vocab = [w for line in lines for w in line.split()]
    target = rng.sample(lines, n)
    preds = [corrupt(t, rng, vocab) if rng.random() < 0.9 else rng.choice(lines) for t in target]
    return preds, target


# ---- the functions ---------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_functions_equal_torchmetrics_random(seed):
    for preds, target in random_batches(seed):
        for ours, theirs in FUNCTIONS:
            same(ours(preds, target), theirs(preds, target))


def test_functions_equal_torchmetrics_real():
    for seed in range(2):
        preds, target = real_pairs(seed)
        for ours, theirs in FUNCTIONS:
            same(ours(preds, target), theirs(preds, target))
    same(tam.char_error_rate(UNICODE_LINES[::-1], UNICODE_LINES), TMF.char_error_rate(UNICODE_LINES[::-1],
                                                                                       UNICODE_LINES))


@given(st.lists(st.tuples(st.text(st.sampled_from("ab é漢😀" + "".join(WHITESPACE[:8])), max_size=10),
                          st.text(st.sampled_from("ab é漢😀 \t\n\u3000"), max_size=10)), max_size=6))
@settings(deadline=None, max_examples=150)
def test_functions_equal_torchmetrics_property(batch):
    preds, target = [p for p, _ in batch], [t for _, t in batch]
    for ours, theirs in FUNCTIONS:
        same(ours(preds, target), theirs(preds, target))
    same(tam.edit_distance(preds, target, reduction="none"), TMF.edit_distance(preds, target, reduction="none"))


def test_strings_and_edge_cases():
    """A str is one text; empty strings, whitespace-only strings, empty references (inf or
    nan, as torchmetrics gives them), empty batches, lone surrogates, every whitespace."""
    ws = "".join(WHITESPACE)
    cases = [("abc", "abd"), ("", ""), ("abc", ""), ("", "abc"), ([], []), ([""], [""]), (["", "a"], ["", ""]),
             ([" ", "\t\n"], ["", "   "]), (["a b"], ["a  b "]), ([f"x{ws}y{ws}"], [f"{ws}x y"]),
             (["a\u0085b\x1cc"], ["a b c"]), (["a\ud800b c"], ["a\ud800b d"]), (["\u3000"], ["a\u3000a"]),
             ([ws], [ws[::-1]]), (("tuple", "of str"), ("tuples", "of strs"))]
    for preds, target in cases:
        for ours, theirs in FUNCTIONS:
            same(ours(preds, target), theirs(preds, target))
        for cost in (0, 1, 2):
            for reduction in REDUCTIONS:
                same(tam.edit_distance(preds, target, cost, reduction), TMF.edit_distance(preds, target, cost, reduction))


def test_empty_references_give_inf_and_nan():
    assert tam.word_error_rate(["a b"], [" "]).item() == float("inf")
    assert tam.char_error_rate([""], [""]).isnan()
    assert tam.match_error_rate([], []).isnan()


def test_words_split_as_str_split(monkeypatch):
    """The device tokenizer numbers equal words equally and different words differently,
    words exactly where str.split() puts them (no hash collision: the host is not asked)."""
    monkeypatch.setattr(tat, "_words_host", None)
    rng = random.Random(5)
    alphabet = "ab" + "".join(WHITESPACE) + "\ud800é"
    texts = [random_text(rng, alphabet, 0, 30) for _ in range(200)] + real_lines()[:100]
    a, b = tat.encode_pairs(texts[:150], texts[150:], "words", torch.device("cpu"))
    ids = a.codes.tolist() + b.codes.tolist()
    offsets = a.offsets.tolist() + (b.offsets[1:] + a.offsets[-1]).tolist()
    words = [w for t in texts for w in t.split()]
    assert len(ids) == len(words) and offsets == [0, *itertools.accumulate(len(t.split()) for t in texts)]
    first = {}
    for i, w in zip(ids, words):
        assert first.setdefault(i, w) == w
    assert len(first) == len(set(words))


def test_no_whitespace_above_the_table():
    assert not any(chr(c).isspace() for c in range(tat.SPACE_LAST + 1, sys.maxunicode + 1))
    assert tat._SPACE[: tat.SPACE_LAST + 1].tolist() == [chr(c).isspace() for c in range(tat.SPACE_LAST + 1)]


# word hashes that collide: every word's (-GOLDEN per character cancels the length term);
# words of one length; words of one length and first character
COLLIDING = {"all": lambda c, k: torch.full_like(c, -tat._GOLDEN), "length": lambda c, k: torch.zeros_like(c),
             "first": lambda c, k: torch.where(k == 0, c, 0)}


@pytest.mark.parametrize("kind", COLLIDING)
def test_hash_collisions_fall_back_to_the_host(monkeypatch, kind):
    """Words whose hashes collide are caught (by length or by character) and numbered on
    the host: the same results."""
    calls = []
    host = tat._words_host
    monkeypatch.setattr(tat, "_words_host", lambda *a: calls.append(1) or host(*a))
    monkeypatch.setattr(tat, "word_hash", COLLIDING[kind])
    preds, target = real_pairs(3, 40)
    for ours, theirs in FUNCTIONS[1:]:
        same(ours(preds, target), theirs(preds, target))
    assert len(calls) == 2
    cases = [(["abc xyz"], ["xyz abd"]), (["abc abd", "a"], ["abd", ""])]
    if kind == "all":
        cases.append((["abc ab"], ["ab abc"]))  # only the lengths tell these apart
    for preds, target in cases:
        same(tam.word_error_rate(preds, target), TMF.word_error_rate(preds, target))
    assert len(calls) == 2 + len(cases)
    same(tam.word_error_rate(["ab ab"], ["ab"]), TMF.word_error_rate(["ab ab"], ["ab"]))  # no collision
    assert len(calls) == 2 + len(cases)


# ---- edit distance ---------------------------------------------------------------------
@pytest.mark.parametrize("cost", [0, 1, 2, 3])
def test_edit_distance_equals_torchmetrics(cost):
    """Short random strings and similar real lines: those inside torchmetrics' band (its
    +-12 cells around the length-scaled diagonal; a path of distance d stays within d of
    the main diagonal, which is within the length difference of the scaled one). The real
    lines come from the README and the sources, so which pairs are similar changes with them."""
    batches = random_batches(7 + cost, n_batches=4)
    preds, target = real_pairs(cost, 40)
    inside = [Levenshtein.distance(p, t, weights=(1, 1, cost)) + abs(len(p) - len(t)) <= 12
              for p, t in zip(preds, target)]
    assert sum(inside) >= 10, sum(inside)  # (enough real pairs to mean something)
    batches.append(([p for p, ok in zip(preds, inside) if ok], [t for t, ok in zip(target, inside) if ok]))
    for preds, target in batches:
        for reduction in REDUCTIONS:
            same(tam.edit_distance(preds, target, cost, reduction), TMF.edit_distance(preds, target, cost, reduction))
        want = [Levenshtein.distance(p, t, weights=(1, 1, cost)) for p, t in zip(preds, target)]
        assert tam.functional.distances(preds, target, cost).tolist() == want


def test_edit_distance_is_exact_where_torchmetrics_band_is_not():
    """Unrelated strings of 60..120 characters: ours equals the DP (rapidfuzz) for every
    pair; torchmetrics' band reports more on some (the difference documented in
    torchalign.metrics)."""
    rng = random.Random(0)
    preds = [random_text(rng, "abcd", 60, 120) for _ in range(40)]
    target = [p[rng.randint(0, 40):] + random_text(rng, "abcd", 0, 40) for p in preds]
    for cost in (1, 2):
        want = [Levenshtein.distance(p, t, weights=(1, 1, cost)) for p, t in zip(preds, target)]
        ours = tam.edit_distance(preds, target, cost, None)
        assert ours.tolist() == want
        theirs = TMF.edit_distance(preds, target, cost, None).tolist()
        assert all(x >= w for x, w in zip(theirs, want)) and theirs != want
    short, long = ["a"], ["a" + "b" * 26]  # the docstring's example
    assert tam.edit_distance(short, long, reduction="sum").item() == 26
    assert TMF.edit_distance(short, long, reduction="sum").item() == 27


def test_edit_distance_options_and_errors(monkeypatch):
    assert tam.edit_distance([], []).dtype == torch.int32
    with pytest.raises(ValueError, match="substitution_cost"):
        tam.edit_distance(["a"], ["b"], substitution_cost=-1)
    with pytest.raises(ValueError, match="reduction"):
        tam.edit_distance(["a"], ["b"], reduction="max")
    monkeypatch.setattr(tam.functional, "MAX_WEIGHTED_SYMBOLS", 4)
    with pytest.raises(ValueError, match="5 distinct characters .* at most 4"):
        tam.edit_distance(["abcde"], ["a"], substitution_cost=2)


def test_bad_input():
    with pytest.raises(ValueError, match="preds has 2 strings and target 1"):
        tam.char_error_rate(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="preds has 1 strings and target 2"):
        tam.word_error_rate("a", ["a", "b"])
    with pytest.raises(TypeError, match="target: .* item 1 is a bytes"):
        tam.word_error_rate(["a", "b"], ["a", b"b"])
    with pytest.raises(TypeError, match="preds: .* item 0 is a list"):
        tam.edit_distance([["a", "b"]], ["ab"])
    with pytest.raises(TypeError, match="preds: expected a str or a list of str, got int"):
        tam.char_error_rate(3, "a")


# ---- the Metric classes ----------------------------------------------------------------
def _metric_batches(seed):
    preds, target = real_pairs(seed, 60)
    out = [(preds[i : i + 15], target[i : i + 15]) for i in range(0, 60, 15)]
    return out + random_batches(seed, n_batches=4) + [("one string", "one str"), ([], [])]


@pytest.mark.parametrize("name, theirs", RATES)
def test_rate_metrics_over_many_updates(name, theirs):
    """forward's batch values, the summed states and compute equal torchmetrics'."""
    ours_m, theirs_m = getattr(tam, name)(), theirs()
    assert isinstance(ours_m, theirs)
    for preds, target in _metric_batches(1):
        same(ours_m(preds, target), theirs_m(preds, target))
        same(ours_m.errors, theirs_m.errors)
        same(ours_m.total, theirs_m.total)
    same(ours_m.compute(), theirs_m.compute())
    ours_m.reset()
    theirs_m.reset()
    for m in (ours_m, theirs_m):
        m.update(["x", ""], ["", ""])
    same(ours_m.compute(), theirs_m.compute())  # inf, or 1 for MER


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("cost", [1, 2])
def test_edit_distance_metric_over_many_updates(reduction, cost):
    ours_m, theirs_m = tam.EditDistance(cost, reduction), TM.EditDistance(cost, reduction)
    for preds, target in random_batches(cost, n_batches=5) + [([], []), ("rain", "shine")]:
        same(ours_m(preds, target), theirs_m(preds, target))
    same(ours_m.compute(), theirs_m.compute())
    with pytest.raises(ValueError, match="substitution_cost"):
        tam.EditDistance(-1)


def test_import_needs_no_torchmetrics():
    code = ("import sys; sys.modules['torchmetrics'] = None\n"
            "import torchalign.metrics as tam\n"
            "assert abs(tam.word_error_rate('a b', 'a c').item() - 0.5) < 1e-7\n"
            "try:\n    tam.CharErrorRate\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert "pip install 'torchalign[metrics]'" in out.stdout


# ---- jiwer -----------------------------------------------------------------------------
def test_equal_jiwer_where_its_transforms_change_nothing():
    """Real and random text without leading/trailing whitespace and with only spaces (or
    runs of whitespace) between words: jiwer's CER and WER equal ours."""
    rng = random.Random(2)
    preds, target = real_pairs(4, 150)
    pairs = [(" ".join(p.split()), " ".join(t.split())) for p, t in zip(preds, target)]
    pairs += [(random_text(rng, "ab é漢", 1, 12).strip() or "a", random_text(rng, "ab é漢", 1, 12).strip() or "b")
              for _ in range(60)]
    pairs += [("run  of\t\tspaces", "run of spaces")]
    preds, target = [p for p, _ in pairs], [t for _, t in pairs]
    same(tam.char_error_rate(preds, target), torch.tensor(jiwer.cer(target, preds), dtype=torch.float32))
    same(tam.word_error_rate(preds, target), torch.tensor(jiwer.wer(target, preds), dtype=torch.float32))


def test_mer_equals_jiwer_without_insertions_beside_deletions():
    """Predictions that only drop words, or only add words: every optimal alignment has no
    insertions (or no deletions), and jiwer's MER equals ours."""
    rng = random.Random(3)
    lines = [" ".join(t.split()) for t in real_lines() if len(t.split()) > 3]
    target = rng.sample(lines, 80)
    preds = []
    for t in target:
        words = t.split()
        if rng.random() < 0.5:
            words = [w for w in words if rng.random() < 0.7] or words[:1]
        else:
            for _ in range(rng.randint(1, 4)):
                words.insert(rng.randrange(len(words) + 1), rng.choice(["uh", "um", "the"]))
        preds.append(" ".join(words))
    same(tam.match_error_rate(preds, target), torch.tensor(jiwer.mer(target, preds), dtype=torch.float32))


def test_documented_differences_from_jiwer():
    """The differences named in torchalign.metrics' docstring (ours = torchmetrics')."""
    def both(ours, theirs, preds, target):
        got = ours(preds, target)
        same(got, theirs(preds, target))
        return got.item()

    # CER: jiwer strips leading and trailing whitespace
    assert both(tam.char_error_rate, TMF.char_error_rate, " abc", "abc") == pytest.approx(1 / 3)
    assert jiwer.cer("abc", " abc") == 0
    # words: a single tab (or newline, no-break space) splits here, not in jiwer
    for sep in "\t\n\u00a0":
        assert both(tam.word_error_rate, TMF.word_error_rate, f"a{sep}b", "a b") == 0
        assert jiwer.wer("a b", f"a{sep}b") == 1
    # MER: jiwer counts the insertions of its alignment
    assert both(tam.match_error_rate, TMF.match_error_rate, "b c d e", "a b c d") == 0.5
    assert jiwer.mer("a b c d", "b c d e") == pytest.approx(0.4)
    # references without words
    assert both(tam.word_error_rate, TMF.word_error_rate, "a b", "") == float("inf")
    assert jiwer.wer("", "a b") == 2


# ---- docs and the example --------------------------------------------------------------
@pytest.mark.parametrize("module", ["torchalign.metrics", "torchalign.metrics.functional",
                                    "torchalign.metrics.modules"])
def test_docstring_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_example_runs():
    out = subprocess.run([sys.executable, str(REPO / "examples" / "metrics.py"), "--device", "cpu"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    assert "CER" in out and "WER" in out and "matches torchmetrics: True" in out


# ---- the Triton kernels ----------------------------------------------------------------
@pytest.mark.interpret
@pytest.mark.usefixtures("kernels_on_cpu")
def test_metrics_through_the_kernels():
    """Under the interpreter, the CUDA path's kernels: Myers (ASCII bytes, word ids), the
    DP (code points past 255), the global alignment (substitution_cost=2)."""
    rng = random.Random(8)
    batches = [([random_text(rng, alpha, 0, 14) for _ in range(5)], [random_text(rng, alpha, 0, 14) for _ in range(5)])
               for alpha in ("ab c", "aé漢 \u3000")]
    for preds, target in batches:
        for ours, theirs in FUNCTIONS:
            same(ours(preds, target), theirs(preds, target))
        same(tam.edit_distance(preds, target, 2, None), TMF.edit_distance(preds, target, 2, None))


# ---- GPU -------------------------------------------------------------------------------
@pytest.mark.gpu
def test_metrics_on_cuda_equal_cpu_and_torchmetrics(monkeypatch):
    """Every metric computed on CUDA (ASCII and Unicode batches, a hash-collision
    fallback) equals the CPU result and torchmetrics'."""
    batches = _metric_batches(2) + [(UNICODE_LINES[::-1], UNICODE_LINES)]
    for name, theirs in RATES:
        ours_m = getattr(tam, name)().to("cuda")
        theirs_m = theirs()
        for preds, target in batches:
            same(ours_m(preds, target), theirs_m(preds, target))
        assert ours_m.errors.is_cuda
        same(ours_m.compute(), theirs_m.compute())
    for cost in (1, 2):
        ours_m, on_cpu = tam.EditDistance(cost, "none").to("cuda"), tam.EditDistance(cost, "none")
        for preds, target in batches:
            same(ours_m(preds, target), on_cpu(preds, target))
        want = [Levenshtein.distance(p, t, weights=(1, 1, cost)) for b in batches for p, t in zip(*tat.pairs(*b))]
        assert ours_m.compute().tolist() == want
    preds, target = real_pairs(5, 200)
    for ours, _ in FUNCTIONS:
        same(ours(preds, target, device="cuda"), ours(preds, target))
    monkeypatch.setattr(tat, "word_hash", lambda c, k: torch.zeros_like(c))
    same(tam.word_error_rate(preds, target, device="cuda"), TMF.word_error_rate(preds, target))
