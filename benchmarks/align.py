"""Alignment benchmark: Smith-Waterman database search (BLOSUM62, gaps 11 / 1) beside peers.

    python benchmarks/align.py [--commit HASH] [--out DIR] [--db N] [--peer-db N] [--small]

Workload (issue 4): the 20 bundled Swiss-Prot queries (torchalign/data) (144..5,478 residues)
against a generated database of N sequences (default 570,000, ~200 M residues) with
Swiss-Prot-like lengths (lognormal, mean ~350) and the residue composition of the bundled
proteome. ``ta.search(top_k=10)``, one call per query and one for all 20; GCUPS = query
length x database residues / time. Peers in the same run, on the first --peer-db database
sequences (default 20,000), scores checked against ours on that slice: parasail
``sw_striped_profile_sat`` (8/16/32-bit ladder, one profile per query) on all host CPUs
over database slices; pyopal (OPAL) on all host CPUs; stringzillas-cuda
``SmithWatermanScores`` on the GPU, on that slice and on the whole database (in a child
process under a timeout); and the vectorised torch DP (torchalign.cpu.align on the GPU),
the shortest query against 2,000 sequences. Also: the time to pack the database
(sort by length, interleave), which every GPU search call does.

With ``--cudasw BUILD_DIR`` (CUDASW++ 4.0 built by benchmarks/peers/cudasw.sh; NOTES.md,
"CUDASW++ 4.0 as a peer"): CUDASW++ on the whole database, the bundled proteome and the
20,000-sequence slice, ``align --dpx`` and its default half2 kernels, top 10, 3 runs each,
the time it reports and the process's wall time, top-10 scores checked against ours.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import Clock, Row, bench, data_file, fill_ratios, git_commit, markdown_table, pick_device, write_json  # noqa: E402

import torchalign as ta  # noqa: E402
from torchalign.cpu import align as torch_dp  # noqa: E402

SEED = 5
_DB: list[str] = []  # parasail workers read the database through fork


def read_fasta(path: str) -> list[str]:
    seqs, cur = [], []
    for line in open(path):
        if line.startswith(">"):
            if cur:
                seqs.append("".join(cur))
            cur = []
        else:
            cur.append(line.strip())
    if cur:
        seqs.append("".join(cur))
    return seqs


def database(n: int, rng: np.random.Generator) -> list[str]:
    """n sequences, lognormal lengths (mean ~350), residues drawn with the composition of
    the bundled proteome (the 20 standard amino acids)."""
    proteome = "".join(read_fasta(data_file("proteome_HG003687.fa")))
    letters = np.array(list("ARNDCQEGHILKMFPSTWYV"))
    counts = np.array([proteome.count(c) for c in letters], dtype=float)
    lengths = np.clip(rng.lognormal(np.log(350) - 0.245, 0.7, n).astype(int), 10, 35000)
    flat = rng.choice(letters, size=int(lengths.sum()), p=counts / counts.sum())
    cuts = np.cumsum(lengths)[:-1]
    return ["".join(x) for x in np.split(flat, cuts)]


def _parasail_slice(args):
    import parasail

    query, lo, hi = args
    profile = parasail.profile_create_sat(query, parasail.blosum62)
    return [parasail.sw_striped_profile_sat(profile, t, 11, 1).score for t in _DB[lo:hi]]


def parasail_all(pool, query: str, workers: int) -> list[int]:
    step = -(-len(_DB) // (workers * 4))
    parts = pool.map(_parasail_slice, [(query, lo, min(len(_DB), lo + step)) for lo in range(0, len(_DB), step)])
    return [s for part in parts for s in part]


def main() -> int:
    global _DB
    ap = argparse.ArgumentParser()
    ap.add_argument("--commit")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    ap.add_argument("--db", type=int, default=570_000)
    ap.add_argument("--peer-db", type=int, default=20_000)
    ap.add_argument("--small", action="store_true", help="2,000 database sequences, 4 queries (smoke run)")
    ap.add_argument("--no-peers", action="store_true", help="ours only (the search rows and the packing)")
    ap.add_argument("--cli", action="store_true",
                    help="time `torchalign search q.fa db.fa` on the large database, alone and through a server")
    ap.add_argument("--cudasw", metavar="BUILD_DIR",
                    help="CUDASW++ 4.0 built there (benchmarks/peers/cudasw.sh) as a peer on the three databases")
    ap.add_argument("--stringzillas-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.stringzillas_child:
        stringzillas_child(args.stringzillas_child)
        return 0
    device = pick_device()
    rng = np.random.default_rng(SEED)
    n_db = 2000 if args.small else args.db
    queries = read_fasta(data_file("swissprot_queries20.fa"))
    queries = sorted(queries, key=len)[:: 5 if args.small else 1]
    db = database(n_db, rng)
    residues = sum(map(len, db))
    sc = ta.Scoring()
    D = ta.encode(db, "protein", device)
    rows, skipped, clock = [], [], Clock()
    print(clock(), f"database: {n_db} sequences, {residues} residues", flush=True)
    ta.search([queries[0]], D, sc)  # compile both kernel variants
    total_cells = 0.0
    per_query_ms = 0.0
    for q in queries:
        cells = float(len(q)) * residues
        ta.search([q], D, sc)  # warm-up (a new kernel variant compiles on its first call)
        ms, spread = time_runs(lambda: ta.search([q], D, sc), device)
        rows.append(Row(f"search {len(q)} aa vs {n_db} seqs ({residues / 1e6:.0f} M aa)", "torchalign", ms, cells,
                        "CUPS", note=spread))
        total_cells += cells
        per_query_ms += ms
        print(clock(), f"{len(q)} aa: {ms:.1f} ms ({spread}), {cells / ms / 1e9:.2f} TCUPS", flush=True)
    overall = f"search, {len(queries)} queries vs {n_db} seqs, overall"
    rows.append(Row(overall, "torchalign, one call per query (sum)", per_query_ms, total_cells, "CUPS",
                    note="sum of the per-query medians"))
    Q = ta.encode(queries, "protein", device)  # read once, as the command does (its encoding is not timed)
    ta.search(Q, D, sc)
    ms, spread = time_runs(lambda: ta.search(Q, D, sc), device)
    rows.append(Row(overall, "torchalign, one call for all queries", ms, total_cells, "CUPS",
                    "torchalign, one call per query (sum)", note=spread))
    print(clock(), overall, f"{ms:.1f} ms ({spread})", flush=True)
    # issue 13's small databases: the bundled default search and a 20,000-sequence slice, one call
    q_res = sum(map(len, queries))
    small = (("bundled proteome (2,100 proteins)", read_fasta(data_file("proteome_HG003687.fa"))),
             (f"{min(20_000, n_db):,}-sequence slice", db[:20_000]))
    for name, seqs in small:
        B = ta.encode(seqs, "protein", device)
        ta.search(Q, B, sc)
        ms, spread = time_runs(lambda: ta.search(Q, B, sc), device, calls=10)
        rows.append(Row(f"search, {len(queries)} queries vs the {name}", "torchalign, one call", ms,
                        float(q_res) * sum(map(len, seqs)), "CUPS", note=spread))
        print(clock(), name, f"{ms:.2f} ms ({spread})", flush=True)
    if args.cli and device.type == "cuda":  # the command line on the same files, a fresh process each run
        for r in cli_rows(queries, db, device, overall):
            rows.append(r)
            print(clock(), r.impl, f"{r.time_ms:.1f} ms ({r.note})", flush=True)
    cudasw_info: dict = {}
    if args.cudasw:  # CUDASW++ 4.0 on the same three databases (runs with --no-peers too)
        cw_rows, why, cudasw_info = cudasw_rows(
            args.cudasw, queries, [(overall, "torchalign, one call for all queries", db)]
            + [(f"search, {len(queries)} queries vs the {name}", "torchalign, one call", seqs) for name, seqs in small],
            sc, device)
        rows += cw_rows
        skipped += why
        for r in cw_rows:
            print(clock(), r.impl, r.workload, f"{r.time_ms:.1f} ms ({r.note}), verified {r.verified}", flush=True)
    else:
        skipped.append("CUDASW++ 4.0: no --cudasw BUILD_DIR given (build: bash benchmarks/peers/cudasw.sh "
                       ".peers/cudasw4 .peers/build, then --cudasw .peers/build)")
    _DB = db[: args.peer_db]
    if not args.no_peers:  # peers on a slice of the database
        sub_res = sum(map(len, _DB))
        sub_cells = float(sum(map(len, queries))) * sub_res
        peer_wl = peer_workload(len(queries), _DB)
        S = ta.encode(_DB, "protein", device)
        ours = ta.search(queries, S, sc, top_k=len(_DB))
        ta.search(queries, S, sc)
        ms, spread = time_runs(lambda: ta.search(queries, S, sc), device)
        rows.append(Row(peer_wl, "torchalign", ms, sub_cells, "CUPS", note=spread))
        workers = os.cpu_count() or 1
        try:
            import parasail  # noqa: F401

            with mp.get_context("fork").Pool(workers) as pool:
                t0 = time.perf_counter()
                theirs = [parasail_all(pool, q, workers) for q in queries]
                ms_p = (time.perf_counter() - t0) * 1e3
            ok = all(ours.scores[i].tolist() == sorted(th, reverse=True) for i, th in enumerate(theirs))
            rows.append(Row(peer_wl, f"parasail sw_striped_profile_sat, {workers} processes", ms_p, sub_cells, "CUPS",
                            "torchalign", "yes" if ok else "NO"))
            print(clock(), "parasail", f"{ms_p:.1f} ms", flush=True)
        except ImportError as e:
            skipped.append(f"parasail: {e}")
        try:
            import pyopal

            opal_db = pyopal.Database(_DB)
            pyopal.align(queries[0], opal_db, "BLOSUM62", gap_open=11, gap_extend=1, threads=workers)  # warm-up
            t0 = time.perf_counter()
            theirs = [[h.score for h in pyopal.align(q, opal_db, "BLOSUM62", gap_open=11, gap_extend=1, threads=workers)]
                      for q in queries]
            ms_o = (time.perf_counter() - t0) * 1e3
            ok = all(ours.scores[i].tolist() == sorted(th, reverse=True) for i, th in enumerate(theirs))
            rows.append(Row(peer_wl, f"pyopal (OPAL, SIMD), {workers} threads", ms_o, sub_cells, "CUPS", "torchalign",
                            "yes" if ok else "NO"))
            print(clock(), "pyopal", f"{ms_o:.1f} ms", flush=True)
        except ImportError as e:
            skipped.append(f"pyopal: {e}")
        if device.type == "cuda":
            sz_rows, why = stringzillas_rows(queries, db, len(_DB), overall, sc, device)
            skipped += [why] if why else []
            rows += sz_rows
            for r in sz_rows:
                print(clock(), r.impl, r.workload, f"{r.time_ms:.1f} ms", flush=True)
    # the database packing (sort + interleave) that every GPU search call does
    from torchalign.batch import _pack

    ms = bench(lambda: _pack(D.codes, D.offsets, 64), device, warmup=1, rep=3, cpu_runs=1)
    rows.append(Row(f"pack the {n_db}-sequence database (sort by length, interleave)", "torchalign", ms,
                    float(residues), "residues"))
    if not args.no_peers:
        # the vectorised torch DP on the device: the shortest query against 2,000 targets
        q, sub = queries[0], min(n_db, 2000)
        Tq = ta.encode(db[:sub], "protein", device)
        Qq = ta.encode([q] * sub, "protein", device)
        dp_cells = float(len(q)) * sum(map(len, db[:sub]))

        def dp():
            return torch_dp.align_score(Qq.codes, Qq.offsets[:-1], Qq.offsets[1:] - Qq.offsets[:-1], Tq.codes,
                                        Tq.offsets[:-1], Tq.offsets[1:] - Tq.offsets[:-1], sc.table.to(device), 11, 1,
                                        "local")[0]

        wl = f"align_score {len(q)} aa x {sub} pairs"
        ms = bench(lambda: ta.align_score(Qq, Tq, sc), device, warmup=2, rep=5, cpu_runs=1)
        rows.append(Row(wl, "torchalign", ms, dp_cells, "CUPS"))
        same = torch.equal(dp().cpu(), ta.align_score(Qq, Tq, sc).score.cpu())
        ms = bench(dp, device, warmup=1, rep=3, cpu_runs=1)
        rows.append(Row(wl, "torch DP vectorised over pairs (torchalign.cpu.align)", ms, dp_cells, "CUPS",
                        "torchalign", "yes" if same else "NO"))
    fill_ratios(rows)
    print(markdown_table(rows))
    for s in skipped:
        print("skipped peer:", s)
    path = write_json(args.out, "align", device, git_commit(args.commit), rows,
                      {"seed": SEED, "db": n_db, "peer_db": len(_DB), "skipped": skipped, "cudasw": cudasw_info},
                      "-small" if args.small else "")
    print("wrote", path)
    return 0 if all(not r.verified.startswith("NO") for r in rows) else 1


CLIENT = "import sys; from torchalign_client import entry; sys.argv[0] = 'torchalign'; entry()"  # the console script


def cli_rows(queries, db, device, overall, runs: int = 3) -> list[Row]:
    """Wall time of ``torchalign search q.fa db.fa`` (its TSV kept), ``runs`` timed runs after
    one untimed (the kernels' cache): a process of its own (``--no-server``), then the same
    command through a ``torchalign serve db.fa`` started beforehand (its start timed apart).
    The two outputs must be identical."""
    import contextlib
    import signal
    import subprocess
    import tempfile

    from peers import cudasw

    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(device.index if device.index is not None else 0))
    cells = float(sum(map(len, queries))) * sum(map(len, db))
    rows, outputs = [], []
    with tempfile.TemporaryDirectory(prefix="cli-") as work, contextlib.ExitStack() as stack:
        qfa, dfa = os.path.join(work, "q.fa"), os.path.join(work, "db.fa")
        cudasw.write_fasta(qfa, queries, "q")
        cudasw.write_fasta(dfa, db, "d")
        env["TORCHALIGN_SERVER"] = os.path.join(work, "s.sock")
        cmd = [sys.executable, "-c", CLIENT, "search", qfa, dfa]
        for served in (False, True):
            server, note = None, ""
            if served:
                t0 = time.perf_counter()
                log = stack.enter_context(open(os.path.join(work, "serve.log"), "w"))
                server = subprocess.Popen([sys.executable, "-m", "torchalign", "serve", dfa], env=env,
                                          stdout=subprocess.DEVNULL, stderr=log)
                while "listening at" not in Path(log.name).read_text():
                    if server.poll() is not None:
                        raise RuntimeError("torchalign serve failed: " + Path(log.name).read_text()[-2000:])
                    time.sleep(0.05)
                note = f"; the server's start (read, pack, warm-up) {time.perf_counter() - t0:.1f} s"
            times = []
            for i in range(runs + 1):
                t0 = time.perf_counter()
                out = subprocess.run(cmd + ([] if served else ["--no-server"]), env=env, capture_output=True,
                                     text=True, check=True)
                if i:
                    times.append((time.perf_counter() - t0) * 1e3)
            assert ("run by the torchalign server" in out.stderr) == served, out.stderr[-2000:]
            print(*out.stderr.strip().splitlines()[-2:], sep="\n", flush=True)  # its summary: search, align
            outputs.append(out.stdout)
            if server:
                server.send_signal(signal.SIGINT)
                server.wait(timeout=60)
            times.sort()
            what = ("through `torchalign serve db.fa` (process wall: start, relay, search, align hits)" if served
                    else "a process of its own (process wall: start, read, pack, search, align hits)")
            rows.append(Row(overall, f"torchalign search q.fa db.fa, {what}", times[len(times) // 2], cells, "CUPS",
                            "torchalign, one call for all queries",
                            note=f"{runs} runs: {times[0]:.0f}..{times[-1]:.0f} ms{note}"))
    if outputs[0] != outputs[1] or len(outputs[0].splitlines()) != 1 + 10 * len(queries):
        raise RuntimeError("the served command's output differs from its own process's")
    return rows


def cudasw_rows(build_dir, queries, dbs, sc, device) -> tuple[list[Row], list[str], dict]:
    """CUDASW++ 4.0 (built into build_dir by benchmarks/peers/cudasw.sh) on each database of
    ``dbs`` ((workload label, the impl of our row it compares with, sequences)), the same
    queries as FASTA: its makedb (timed, not counted), then ``align --dpx`` and its default
    (half2), top 10, 3 timed runs each: a row for the search time it reports and one for
    the align process's wall time; its top-10 scores checked against ta.search's (sorted:
    ties may order differently). A failure skips that database with the reason.
    (rows, skip reasons, build and command record)."""
    import tempfile

    from peers import cudasw

    why = cudasw.missing_binaries(build_dir) or (None if device.type == "cuda" else "needs a CUDA device")
    if why:
        return [], [f"CUDASW++ 4.0: {why}"], {}
    info_path = os.path.join(build_dir, "BUILD_INFO")
    info = {"build": open(info_path).read().strip() if os.path.exists(info_path) else "unknown", "runs": []}
    env = cudasw.single_gpu_env(device.index if device.index is not None else torch.cuda.current_device())
    rows, skipped, q_res = [], [], sum(map(len, queries))
    with tempfile.TemporaryDirectory(prefix="cudasw-") as work:
        qfa = os.path.join(work, "queries.fa")
        cudasw.write_fasta(qfa, queries, "q")
        for k, (label, ref, seqs) in enumerate(dbs):
            S = ta.encode(seqs, "protein", device)
            ours = ta.search(queries, S, sc, top_k=10).scores.tolist()
            note = ""
            if not cudasw.only_standard(seqs):  # it scores X, *, ... -4 against anything: check against that
                plain = ours
                cw_sc = ta.Scoring(torch.tensor(cudasw.cudasw_table(sc.symbols, sc.table.tolist())), sc.gap_open,
                                   sc.gap_extend, alphabet="protein")
                ours = ta.search(queries, S, cw_sc, top_k=10).scores.tolist()
                differ = sum(a != b for a, b in zip(ours, plain))
                note = (f"; checked against ta.search with CUDASW++'s matrix (letters beyond the 20 score -4): "
                        f"BLOSUM62 proper differs on {differ} of {len(queries)} queries")
            del S
            torch.cuda.empty_cache()  # CUDASW++ sizes its buffers by the free GPU memory
            cells = float(q_res) * sum(map(len, seqs))
            try:
                prefix, makedb_s = cudasw.makedb(build_dir, os.path.join(work, f"db{k}"), seqs, env)
                for dpx in (True, False):
                    r = cudasw.search(build_dir, qfa, prefix, len(queries), dpx, env, gap_open=sc.gap_open,
                                      gap_extend=sc.gap_extend)
                    bad = [i for i, th in enumerate(r["scores"])
                           if sorted(th, reverse=True) != sorted(ours[i], reverse=True)]
                    verified = "yes" if not bad else f"NO (queries {bad})"
                    name = "CUDASW++ 4.0 --dpx" if dpx else "CUDASW++ 4.0 half2 (default)"
                    (ms, spread), (wall, wall_spread) = r["reported_ms"], r["wall_ms"]
                    rows.append(Row(label, f"{name}, search time it reports", ms, cells, "CUPS", ref, verified,
                                    note=f"{spread}; makedb {makedb_s:.1f} s not counted{note}"))
                    rows.append(Row(label, f"{name}, align process wall time (DB read and upload, CUDA start)", wall,
                                    cells, "CUPS", ref, verified, note=wall_spread))
                    info["runs"].append({"workload": label, "makedb_s": makedb_s, "command": r["command"]})
            except cudasw.PeerError as e:
                skipped.append(f"CUDASW++ 4.0 on {label}: {e}")
            finally:  # the next database's files need the room
                shutil.rmtree(os.path.join(work, f"db{k}"), ignore_errors=True)
    return rows, skipped, info


STRINGZILLAS_FIRST = 200  # database sequences of the first stage (reported only if nothing larger finishes)
STRINGZILLAS_TIMEOUT = 200  # seconds for all stages


def stringzillas_rows(queries, db, peer_n, overall, sc, device) -> tuple[list[Row], str | None]:
    """stringzillas-cuda SmithWatermanScores, in a child process that a timeout can stop:
    the queries against the first 200 sequences, the peer slice (peer_n) and the whole
    database ``db`` (workload ``overall``); a row per finished stage beside our time on
    the same queries, top-10 scores per query checked against ours. stringzillas-cuda
    5.3.2 fails (CUDA_ERROR_INVALID_VALUE) on queries past ~3,000 residues: such a
    query is left out of the stage and the row says so. (rows, or [] and why)."""
    import subprocess
    import tempfile

    stages = sorted({min(STRINGZILLAS_FIRST, peer_n), peer_n, len(db)})
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"queries": queries, "db": db, "stages": stages}, f)
    note = ""
    try:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--stringzillas-child", f.name],
                             capture_output=True, text=True, timeout=STRINGZILLAS_TIMEOUT)
        done, err = out.stdout, out.stderr
    except subprocess.TimeoutExpired as e:
        done = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, note = "", f"; the next stage ran past the {STRINGZILLAS_TIMEOUT} s timeout"
    finally:
        os.unlink(f.name)
    finished = [json.loads(line) for line in done.splitlines() if line.startswith("{")]
    if not finished or not finished[0]["ran"]:
        return [], f"stringzillas-cuda: no stage finished{note} {err.strip()[-300:]}"
    rows = []
    for st in finished[1:] or finished:
        n, qs = st["n"], [queries[i] for i in st["ran"]]
        S = ta.encode(db[:n], "protein", device)
        cells = float(sum(map(len, qs))) * sum(map(len, db[:n]))
        label = overall if n == len(db) else peer_workload(len(queries), db[:n])
        if len(qs) < len(queries):
            label += f", the {len(qs)} queries it ran (<= {max(map(len, qs))} aa)"
        ours = ta.search(qs, S, sc, 10).scores.tolist()
        rows.append(Row(label, "torchalign, one call", time_runs(lambda: ta.search(qs, S, sc), device)[0], cells, "CUPS"))
        failed = sorted(len(queries[int(i)]) for i in st["failed"])
        name = ("stringzillas-cuda SmithWatermanScores, one call per query" + (note if st is finished[-1] else "")
                + (f"; failed ({next(iter(st['failed'].values()))}) on the queries of {failed} aa" if failed else ""))
        rows.append(Row(label, name, st["ms"], cells, "CUPS", "torchalign, one call",
                        "yes" if ours == st["top"] else "NO (different scores)"))
    return rows, None


def peer_workload(n_queries, db) -> str:
    return f"search, {n_queries} queries vs the first {len(db)} seqs ({sum(map(len, db)) / 1e6:.1f} M aa)"


def stringzillas_child(path: str) -> None:
    """The child of stringzillas_rows: one JSON line per finished stage (n, ms, top-10 scores
    per query). Its gap convention is ours (a gap of L costs open + (L - 1) x extend: open
    -11 gave our 17 for HEAGAWGHEE / PAWHEAE, -10 gave 18)."""
    import stringzilla as sz
    import stringzillas as szs

    job = json.load(open(path))
    sc = ta.Scoring()
    byte_to_class = np.full(256, sc.symbols.index("X"), dtype=np.uint8)
    for i, c in enumerate(sc.symbols):
        byte_to_class[ord(c)] = i
    costs = np.zeros((32, 32), dtype=np.int8)
    costs[: len(sc.symbols), : len(sc.symbols)] = sc.table.numpy()
    scope = szs.DeviceScope(gpu_device=0)

    eng = szs.SmithWatermanScores(byte_to_class=byte_to_class, class_substitution_costs=costs, open=-11, extend=-1,
                                  capabilities=scope)

    def run(q, targets):  # it scores the cross product: a [1, targets] matrix here
        return sorted(np.asarray(eng(sz.Strs([q]), sz.Strs(targets), device=scope))[0].tolist(), reverse=True)[:10]

    queries, failed = job["queries"], {}
    run(queries[0], job["db"][: job["stages"][0]])  # warm-up
    for n in job["stages"]:
        targets, top, ran = job["db"][:n], [], []
        t0 = time.perf_counter()
        for i, q in enumerate(queries):
            if i in failed:
                continue
            try:
                top.append(run(q, targets))
                ran.append(i)
            except ValueError as e:
                failed[i] = str(e)
        ms = (time.perf_counter() - t0) * 1e3
        print(json.dumps({"n": n, "ms": ms, "ran": ran, "top": top, "failed": failed}), flush=True)


def time_runs(fn, device, runs: int = 3, calls: int = 1) -> tuple[float, str]:
    """Median milliseconds of ``runs`` runs (warm-up done by the caller) and their spread as
    text; a run is one call, or the median of ``calls`` calls (a call of a few ms varies by
    10-15 % with the host's scheduling)."""
    times = []
    for _ in range(runs):
        one = []
        for _ in range(calls):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            t0 = time.perf_counter()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            one.append((time.perf_counter() - t0) * 1e3)
        times.append(statistics.median(one))
    times.sort()
    per = f" of the median of {calls} calls" if calls > 1 else ""
    return times[len(times) // 2], f"{runs} runs{per}: {times[0]:.1f}..{times[-1]:.1f} ms"


if __name__ == "__main__":
    sys.exit(main())
