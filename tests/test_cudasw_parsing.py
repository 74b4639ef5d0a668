"""CUDASW++ 4.0 as a peer of benchmarks/align.py (benchmarks/peers/cudasw.py), on the CPU:
its output read back (samples written here in the format its src/main.cu prints), its
gap options checked against torchalign's scores through a DP with its recurrence, its
matrix for letters beyond the 20, and the runner against a stand-in ``align`` program
(the real one needs a GPU; the benchmark must skip, not crash, when it fails)."""

import importlib.util
import os
import random
import stat
import sys
from pathlib import Path

import pytest
import torch

import torchalign as ta

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "peers" / "cudasw.py"
_spec = importlib.util.spec_from_file_location("cudasw_peer", _PATH)
cudasw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cudasw)

TSV_HEADER = ("Query number\tQuery length\tQuery header\tResult number\tResult score\tReference length\t"
              "Reference header\tReference ID in DB")
# two queries, three results each, as `align --tsv --top 3` writes them (reference ids are
# its own numbering after makedb; the reference header is our FASTA name)
TSV = "\n".join([
    TSV_HEADER,
    "0\t144\tq0\t0\t541\t148\tt2233\t4711",
    "0\t144\tq0\t1\t444\t144\tt17\t12",
    "0\t144\tq0\t2\t444\t151\tt90001\t88",
    "1\t5478\tq1\t0\t27764\t5478\tt5\t3",
    "1\t5478\tq1\t1\t73\t310\tt123456\t99",
    "1\t5478\tq1\t2\t61\t77\tt0\t100",
]) + "\n"

STDOUT = """Selected options:
verbose: 1
numTopOutputs: 3
gop: -11
gex: -1
Output mode: TSV
Output file: /tmp/x/db0/db-dpx.tsv
Will use GPU 0
Reading Database: 
# elapsed time (Read DB): 0.0412s
570000 sequences, 199712345 characters
Min length 10, max length 35000, avg length 350
Transferred DB data in advance to GPU(s) 0 
# elapsed time (transfer DB to GPUs): 0.0213s
Processing query file /tmp/x/queries.fa
Processing query 0 ... Done. Scan time: 0.0213 s, 1349.51 GCUPS
Processing query 1 ... Done. Scan time: 2.5e-05 s, 4.37e+07 GCUPS
Total time: 1.99234 s, 4180.12 GCUPS
"""


def test_parse_tsv_scores_and_targets():
    scores, targets = cudasw.parse_tsv(TSV, 2)
    assert scores == [[541, 444, 444], [27764, 73, 61]]
    assert targets == [[2233, 17, 90001], [5, 123456, 0]]


@pytest.mark.parametrize("text, why", [
    ("0\t144\tq0\t0\t541\t148\tt2233\t4711\n", "no TSV header"),
    (TSV_HEADER + "\n0\t144\tq0\t0\t541\t148\tt2233\t4711\n", r"no results for queries \[1\]"),
    (TSV_HEADER + "\n0\t144\tq0\t1\t541\t148\tt2233\t4711\n1\t5\tq1\t0\t9\t5\tt1\t1\n", "out of order"),
    (TSV_HEADER + "\n0\t144\tq0\t0\t541\t148\tUniRef50_P02233\t4711\n", "reference named t<index>"),
    (TSV_HEADER + "\nResult 0. Score: 541. Length: 148. Header t1. referenceId 1\n", "8 tab-separated"),
])
def test_parse_tsv_rejects_what_it_cannot_read(text, why):
    with pytest.raises(ValueError, match=why):
        cudasw.parse_tsv(text, 2)


def test_parse_times():
    total, scans = cudasw.parse_times(STDOUT)
    assert total == 1.99234
    assert scans == [0.0213, 2.5e-05]
    with pytest.raises(ValueError, match="Total time"):
        cudasw.parse_times(STDOUT.replace("Total time", "Total"))


def cudasw_dp(q: str, t: str, gop: int, gex: int, score) -> int:
    """Local alignment score by CUDASW++'s recurrence (its host check, written anew here):
    gop / gex are negative scores added to H to open, to E / F to extend."""
    neg = -(1 << 20)
    h_prev, f_prev, best = [0] * (len(t) + 1), [neg] * (len(t) + 1), 0
    for a in q:
        h, f, e = [0] * (len(t) + 1), [neg] * (len(t) + 1), neg
        for j, b in enumerate(t, 1):
            e = max(e + gex, h[j - 1] + gop)
            f[j] = max(f_prev[j] + gex, h_prev[j] + gop)
            h[j] = max(0, h_prev[j - 1] + score(a, b), e, f[j])
            best = max(best, h[j])
        h_prev, f_prev = h, f
    return best


def _pairs(rng: random.Random, letters: str, n: int):
    out = []
    for _ in range(n):
        a = "".join(rng.choice(letters) for _ in range(rng.randint(5, 40)))
        b = list(a)  # a related target: substitutions and indels, so the best alignment has gaps
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(len(b))
            op = rng.random()
            if op < 0.4:
                b[i] = rng.choice(letters)
            elif op < 0.7:
                del b[i:i + rng.randint(1, 4)]
            else:
                b[i:i] = rng.choices(letters, k=rng.randint(1, 4))
        out.append((a, "".join(b) or "A"))
    return out


def test_gap_translation_gives_our_scores():
    """Ours 11 / 1 -> --gop -11 --gex -1; through CUDASW++'s recurrence that gives
    ta.align_score's local scores, and the off-by-one reading (-12, as NCBI BLAST's
    11 / 1 would be) does not."""
    assert cudasw.gap_args(11, 1) == ["--gop", "-11", "--gex", "-1"]
    assert cudasw.gap_args(10, 2) == ["--gop", "-10", "--gex", "-2"]
    with pytest.raises(ValueError, match="gap_open"):
        cudasw.gap_args(-11, -1)
    sc = ta.Scoring()
    pairs = [("HEAGAWGHEE", "PAWHEAE")] + _pairs(random.Random(3), cudasw.STANDARD, 40)
    ours = ta.align_score([a for a, _ in pairs], [b for _, b in pairs], sc).score.tolist()
    gop, gex = (int(x) for x in cudasw.gap_args(sc.gap_open, sc.gap_extend)[1::2])
    theirs = [cudasw_dp(a, b, gop, gex, sc.score) for a, b in pairs]
    assert theirs == ours
    assert ours[0] == 17
    assert [cudasw_dp(a, b, gop - 1, gex, sc.score) for a, b in pairs] != ours


def test_cudasw_table_scores_other_letters_minus_4():
    sc = ta.Scoring()
    table = cudasw.cudasw_table(sc.symbols, sc.table.tolist())
    idx = {c: i for i, c in enumerate(sc.symbols)}
    assert table[idx["W"]][idx["W"]] == 11 and table[idx["A"]][idx["R"]] == -1  # BLOSUM62 kept
    for c in "BZX*UO":
        assert all(v == cudasw.OTHER_SCORE for v in table[idx[c]])
        assert all(row[idx[c]] == cudasw.OTHER_SCORE for row in table)
    # ta with that table gives what CUDASW++'s recurrence gives with its rule for such letters
    cw = ta.Scoring(torch.tensor(table), sc.gap_open, sc.gap_extend, alphabet="protein")
    pairs = _pairs(random.Random(4), cudasw.STANDARD + "XX*BU", 30)

    def their_score(a, b):
        return sc.score(a, b) if a in cudasw.STANDARD and b in cudasw.STANDARD else cudasw.OTHER_SCORE

    ours = ta.align_score([a for a, _ in pairs], [b for _, b in pairs], cw).score.tolist()
    assert ours == [cudasw_dp(a, b, -11, -1, their_score) for a, b in pairs]
    assert ours != ta.align_score([a for a, _ in pairs], [b for _, b in pairs], sc).score.tolist()
    assert cudasw.only_standard(["ACDW", "Y"]) and not cudasw.only_standard(["ACDX"])
    with pytest.raises(ValueError, match="table"):
        cudasw.cudasw_table("AR", [[1, 2]])


def test_fasta_and_commands(tmp_path):
    path = tmp_path / "db.fa"
    cudasw.write_fasta(str(path), ["MKV", "W*X"], "t")
    assert path.read_text() == ">t0\nMKV\n>t1\nW*X\n"
    with pytest.raises(ValueError, match="sequence 1 is empty"):
        cudasw.write_fasta(str(path), ["MKV", ""], "t")
    assert cudasw.makedb_command("/b", "/w/db.fa", "/w/db") == ["/b/makedb", "/w/db.fa", "/w/db"]
    dpx = cudasw.align_command("/b", "/w/q.fa", "/w/db", "/w/o.tsv", dpx=True)
    half = cudasw.align_command("/b", "/w/q.fa", "/w/db", "/w/o.tsv", dpx=False)
    assert dpx == half + ["--dpx"]
    assert half[0] == "/b/align"
    assert {k: half[half.index(k) + 1] for k in ("--query", "--db", "--top", "--mat", "--gop", "--gex", "--of")} == {
        "--query": "/w/q.fa", "--db": "/w/db", "--top": "10", "--mat": "blosum62", "--gop": "-11", "--gex": "-1",
        "--of": "/w/o.tsv"}
    assert {"--tsv", "--verbose", "--uploadFull", "--prefetchDBFile"} <= set(half)


def test_single_gpu_env():
    assert cudasw.single_gpu_env(0, {})["CUDA_VISIBLE_DEVICES"] == "0"
    assert cudasw.single_gpu_env(2, {"PATH": "/bin"}) == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "2"}
    assert cudasw.single_gpu_env(1, {"CUDA_VISIBLE_DEVICES": "3, 5"})["CUDA_VISIBLE_DEVICES"] == "5"


FAKE_ALIGN = r'''# stands in for CUDASW++'s align: writes the TSV sample to --of and the verbose stdout
import sys
args = sys.argv[1:]
if "{mode}" == "fail":
    print("CUDA error: no CUDA-capable device is detected", file=sys.stderr)
    sys.exit(1)
open(args[args.index("--of") + 1], "w").write({tsv!r})
print({stdout!r}.replace("1.99234", "1.5" if "--dpx" in args else "2.5"))
'''


def _fake_build(tmp_path, mode: str) -> str:
    build = tmp_path / f"build-{mode}"
    build.mkdir()
    (build / "align.py").write_text(FAKE_ALIGN.format(mode=mode, tsv=TSV, stdout=STDOUT))
    scripts = {"align": f'exec "{sys.executable}" "{build / "align.py"}" "$@"', "makedb": 'touch "$2"0chars'}
    for name, body in scripts.items():
        exe = build / name
        exe.write_text(f"#!/bin/sh\n{body}\n")
        exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return str(build)


def test_runner_reads_a_run(tmp_path):
    build = _fake_build(tmp_path, "ok")
    env = dict(os.environ)
    prefix, makedb_s = cudasw.makedb(build, str(tmp_path / "db0"), ["MKV", "WWY"], env)
    assert prefix == str(tmp_path / "db0" / "db") and makedb_s >= 0
    assert (tmp_path / "db0" / "db.fa").read_text() == ">t0\nMKV\n>t1\nWWY\n"
    qfa = str(tmp_path / "q.fa")
    cudasw.write_fasta(qfa, ["MKV", "WWY"], "q")
    r = cudasw.search(build, qfa, prefix, 2, dpx=True, env=env, runs=3)
    assert r["scores"] == [[541, 444, 444], [27764, 73, 61]]
    assert r["reported_ms"][0] == 1500.0 and r["reported_ms"][1] == "3 runs: 1500.0..1500.0 ms"
    assert r["wall_ms"][0] > 0 and r["command"][-1] == "--dpx"
    assert cudasw.search(build, qfa, prefix, 2, dpx=False, env=env, runs=1)["reported_ms"][0] == 2500.0


def test_runner_failures_are_reasons_not_crashes(tmp_path):
    assert "no executable align / makedb" in cudasw.missing_binaries(str(tmp_path))
    assert cudasw.missing_binaries(_fake_build(tmp_path, "ok")) is None
    build = _fake_build(tmp_path, "fail")
    with pytest.raises(cudasw.PeerError, match="align exited 1: CUDA error: no CUDA-capable device"):
        cudasw.search(build, "q.fa", str(tmp_path / "db"), 2, dpx=True, env=dict(os.environ))
    with pytest.raises(cudasw.PeerError, match="cannot run"):
        cudasw.search(str(tmp_path / "nowhere"), "q.fa", "db", 2, dpx=True, env=dict(os.environ))
