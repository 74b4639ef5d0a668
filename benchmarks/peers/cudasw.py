"""CUDASW++ 4.0 as a peer of benchmarks/align.py: its input files, command lines, output
parsing, and the timed runs of its ``align`` process.

Pure Python (no torch), so tests/test_cudasw_parsing.py checks it on the CPU. Build the
peer first with ``bash benchmarks/peers/cudasw.sh SRC_DIR BUILD_DIR`` (NOTES.md, "CUDASW++
4.0 as a peer"). What its source says, and what this module relies on:

- Gaps: CUDASW++ adds its (negative) ``--gop`` to a cell's H to open a gap and its
  ``--gex`` to extend one (E = max(E + gex, H + gop)), so a gap of L costs
  -(gop + (L - 1) gex): torchalign's convention (and parasail's) with the signs flipped.
  Ours, open 11 / extend 1 (a gap of L costs 11 + (L - 1)), is ``--gop -11 --gex -1``,
  which is also its BLOSUM62 default. (NCBI BLAST's "11 / 1" charges 11 + L, our 12 / 1.)
- Letters: its BLOSUM62 knows the 20 standard amino acids (upper case); every other
  letter (B, Z, X, *, U, O, lower case) becomes one code that scores -4 against
  everything, itself included. ``cudasw_table`` gives that matrix over our codes, so
  ta.search can be checked against it where a database holds such letters.
- Output (``--tsv --of FILE``): a header line, then per query and result rank the
  tab-separated query number, query length, query header, rank, score, reference
  length, reference header (the FASTA name, up to the first blank), reference id.
- Time (``--verbose``, on stdout): per query "Done. Scan time: S s, G GCUPS", then
  "Total time: S s, G GCUPS": a CUDA-event timer from before the first query's scan to
  after the last one's results reached the host. With ``--uploadFull --prefetchDBFile``
  (its own benchmark scripts' flags) the database is read and copied to the GPU before
  that timer starts, as our database is on the GPU before ta.search is timed.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
from typing import Sequence

STANDARD = "ARNDCQEGHILKMFPSTWYV"  # CUDASW++'s 20 letters; any other byte is its code 20
OTHER_SCORE = -4  # its BLOSUM62's score of code 20 against any code
TIMEOUT_S = 600  # per makedb or align process

_FLOAT = r"([0-9.]+(?:[eE][-+]?[0-9]+)?|inf|nan)"
_TOTAL = re.compile(r"^Total time: " + _FLOAT + r" s, " + _FLOAT + r" GCUPS", re.M)
_SCAN = re.compile(r"Done\. Scan time: " + _FLOAT + r" s, " + _FLOAT + r" GCUPS")


def gap_args(gap_open: int, gap_extend: int) -> list[str]:
    """CUDASW++'s gap options for torchalign's gap costs (a gap of L costs
    gap_open + (L - 1) x gap_extend in both; it wants them as negative scores)."""
    if gap_open < 0 or gap_extend < 0:
        raise ValueError(f"gap_open / gap_extend: costs are >= 0 in torchalign's convention, got {gap_open} / "
                         f"{gap_extend}")
    return ["--gop", str(-gap_open), "--gex", str(-gap_extend)]


def cudasw_table(symbols: str, table: Sequence[Sequence[int]]) -> list[list[int]]:
    """The substitution matrix CUDASW++ scores with, over our codes (``symbols``, the rows
    and columns of ``table``, e.g. ta.Scoring().symbols / .table.tolist()): ours on the 20
    standard letters, OTHER_SCORE wherever either letter is another one."""
    if len(table) != len(symbols) or any(len(row) != len(symbols) for row in table):
        raise ValueError(f"table: expected {len(symbols)} x {len(symbols)} (one row and column per symbol)")
    std = [c in STANDARD for c in symbols]
    return [[int(table[i][j]) if std[i] and std[j] else OTHER_SCORE for j in range(len(symbols))]
            for i in range(len(symbols))]


def only_standard(seqs: Sequence[str]) -> bool:
    """True when every sequence holds only the 20 letters CUDASW++ scores as BLOSUM62 does."""
    allowed = set(STANDARD)
    return all(set(s) <= allowed for s in seqs)


def write_fasta(path: str, seqs: Sequence[str], prefix: str) -> None:
    """One record per sequence, named ``prefix`` + its index (no blank: the name is what
    CUDASW++ prints), the sequence on one line."""
    with open(path, "w") as f:
        for i, s in enumerate(seqs):
            if not s:
                raise ValueError(f"seqs: sequence {i} is empty; CUDASW++ would drop it and shift the indices")
            f.write(f">{prefix}{i}\n{s}\n")


def makedb_command(build_dir: str, fasta: str, db_prefix: str) -> list[str]:
    return [os.path.join(build_dir, "makedb"), fasta, db_prefix]


def align_command(build_dir: str, query_fasta: str, db_prefix: str, out_tsv: str, dpx: bool, top: int = 10,
                  gap_open: int = 11, gap_extend: int = 1) -> list[str]:
    """``align`` on one database, top ``top`` scores per query to ``out_tsv``; --dpx picks its
    DPX kernels (16-bit, 32-bit for long targets and overflows), else its default half2
    kernels (float for long targets and overflows)."""
    cmd = [os.path.join(build_dir, "align"), "--query", query_fasta, "--db", db_prefix, "--top", str(top),
           "--mat", "blosum62", *gap_args(gap_open, gap_extend), "--tsv", "--of", out_tsv,
           "--verbose", "--uploadFull", "--prefetchDBFile"]
    return cmd + (["--dpx"] if dpx else [])


def parse_tsv(text: str, n_queries: int, prefix: str = "t") -> tuple[list[list[int]], list[list[int]]]:
    """(scores, target indices) per query, in rank order, from ``align --tsv`` output whose
    reference names are ``prefix`` + index (write_fasta). Raises ValueError on a line it
    cannot read or a query missing."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("Query number\t"):
        raise ValueError("CUDASW++ output: no TSV header line (was --tsv given?)")
    scores: list[list[int]] = [[] for _ in range(n_queries)]
    targets: list[list[int]] = [[] for _ in range(n_queries)]
    for k, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        f = line.split("\t")
        if len(f) != 8 or not f[6].startswith(prefix):
            raise ValueError(f"CUDASW++ output line {k}: expected 8 tab-separated fields and a reference named "
                             f"{prefix}<index>, got {line!r}")
        q, rank = int(f[0]), int(f[3])
        if not 0 <= q < n_queries or rank != len(scores[q]):
            raise ValueError(f"CUDASW++ output line {k}: query {q} rank {rank} out of order")
        scores[q].append(int(f[4]))
        targets[q].append(int(f[6][len(prefix):]))
    missing = [q for q in range(n_queries) if not scores[q]]
    if missing:
        raise ValueError(f"CUDASW++ output: no results for queries {missing}")
    return scores, targets


def parse_times(stdout: str) -> tuple[float, list[float]]:
    """(the reported total search seconds, per-query scan seconds) from ``align --verbose``."""
    m = _TOTAL.search(stdout)
    if m is None:
        raise ValueError("CUDASW++ stdout: no 'Total time: ... s' line (was --verbose given?)")
    return float(m.group(1)), [float(s) for s, _ in _SCAN.findall(stdout)]


def single_gpu_env(index: int, environ: dict | None = None) -> dict:
    """The environment for a CUDASW++ process that sees only our GPU ``index`` (CUDA's
    index among the visible devices): it uses every GPU it sees."""
    env = dict(os.environ if environ is None else environ)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(index + 1)]
    env["CUDA_VISIBLE_DEVICES"] = ids[index]
    return env


class PeerError(RuntimeError):
    """CUDASW++ could not run or its output could not be read; the message says why."""


def _run(cmd: list[str], env: dict, timeout: float = TIMEOUT_S) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise PeerError(f"{os.path.basename(cmd[0])} ran past its {timeout} s timeout") from None
    except OSError as e:
        raise PeerError(f"cannot run {cmd[0]}: {e}") from None
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        tail = [line.strip() for line in (out.stdout + "\n" + out.stderr).splitlines() if line.strip()][-3:]
        raise PeerError(f"{os.path.basename(cmd[0])} exited {out.returncode}: {' | '.join(tail)[-400:]}")
    return wall, out.stdout


def missing_binaries(build_dir: str) -> str | None:
    """Why ``build_dir`` cannot be used (None when align and makedb are there)."""
    gone = [x for x in ("align", "makedb") if not os.access(os.path.join(build_dir, x), os.X_OK)]
    if gone:
        return (f"no executable {' / '.join(gone)} in {build_dir} (build it: bash benchmarks/peers/cudasw.sh "
                f".peers/cudasw4 {build_dir})")
    return None


def makedb(build_dir: str, db_dir: str, seqs: Sequence[str], env: dict) -> tuple[str, float]:
    """Write ``seqs`` as FASTA (names t0, t1, ...) into ``db_dir`` and build CUDASW++'s
    database of it there: (the database prefix, makedb's wall seconds)."""
    os.makedirs(db_dir, exist_ok=True)
    fasta, prefix = os.path.join(db_dir, "db.fa"), os.path.join(db_dir, "db")
    write_fasta(fasta, seqs, "t")
    wall, _ = _run(makedb_command(build_dir, fasta, prefix), env)
    return prefix, wall


def search(build_dir: str, query_fasta: str, db_prefix: str, n_queries: int, dpx: bool, env: dict,
           runs: int = 3, gap_open: int = 11, gap_extend: int = 1, top: int = 10) -> dict:
    """``runs`` timed ``align`` processes after one untimed warm-up (page cache, driver):
    the medians and spreads (ms) of the process wall time and of the search time it
    reports, and the top scores / target indices per query (the same in every run, else
    PeerError)."""
    out_tsv = f"{db_prefix}-{'dpx' if dpx else 'half2'}.tsv"
    cmd = align_command(build_dir, query_fasta, db_prefix, out_tsv, dpx, top, gap_open, gap_extend)
    walls, reported, first = [], [], None
    for k in range(runs + 1):
        if os.path.exists(out_tsv):
            os.unlink(out_tsv)
        wall, stdout = _run(cmd, env)
        try:
            total, _ = parse_times(stdout)
            with open(out_tsv) as f:
                result = parse_tsv(f.read(), n_queries)
        except (OSError, ValueError) as e:
            raise PeerError(str(e)) from None
        if first is None:
            first = result
        elif result[0] != first[0]:
            raise PeerError("the top scores differ between runs of the same command")
        if k:  # k == 0 is the warm-up
            walls.append(wall * 1e3)
            reported.append(total * 1e3)
    return {"command": cmd, "wall_ms": summary(walls), "reported_ms": summary(reported),
            "scores": first[0], "targets": first[1]}


def summary(ms: list[float]) -> tuple[float, str]:
    """(median, 'N runs: lo..hi ms'), the form of align.py's time_runs."""
    return statistics.median(ms), f"{len(ms)} runs: {min(ms):.1f}..{max(ms):.1f} ms"
