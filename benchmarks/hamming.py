"""Hamming benchmark: ta.hamming_cdist and ta.kmismatch_search beside torch baselines.

    python benchmarks/hamming.py [--small] [--commit HASH] [--out benchmarks/results]

Workload 1, hamming_cdist: 8,192 x 8,192 random DNA sequences of length 256 (codes 0..3).
  Peers: torch.cdist(p=0) on floats, a chunked broadcast compare, torch._int_mm on
  one-hot int8 codes. Every result is checked against the chunked compare.
Workload 2, kmismatch_search: a random 100 Mbp genome, 1,024 patterns of length 23
  sampled from it (half from the reverse strand) with 0..3 substitutions, k = 3, both
  strands. Peers run on the first 1 Mbp (all patterns): unfold + compare, and one-hot
  GEMMs (torch._int_mm, fp16 matmul) with nonzero for the hits; ours runs on that subset
  too and its hits must equal theirs. On the full genome every planted hit must be found.

CUDA if available (timed with triton.testing.do_bench, median); else CPU with tiny sizes
(time.perf_counter, median). ``--small`` shrinks the GPU sizes for a smoke run.
Never imports Biopython.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (Clock, Row, bench, fill_ratios, git_commit, markdown_table, pick_device, report_end, si,  # noqa: E402
                    sync, write_json)

try:
    import torchalign as ta
except ImportError as e:  # pragma: no cover
    sys.exit(f"cannot import torchalign ({e}); install it: pip install --no-deps --no-build-isolation -e .")

SEED = 1234
K = 3
PAT_LEN = 23
SIZES = {
    #            cdist rows, length, genome bp,  patterns, peer subset bp
    "full": dict(n=8192, L=256, genome=100_000_000, n_pat=1024, sub=1_000_000),
    "small": dict(n=2048, L=256, genome=1_000_000, n_pat=1024, sub=1_000_000),
    "cpu": dict(n=384, L=256, genome=100_000, n_pat=64, sub=50_000),
}
MEM_BUDGET = 4 << 30  # bytes of the intermediates of one torch-baseline chunk
CLOCK = Clock()
FLOOR: list[str] = []  # the sizes / op counts printed under the table
FAILURES: list[str] = []  # verification failures: reported after the table, then exit 1
ERRORS: list[str] = []  # peers that raised (OOM, unsupported op): reported, run goes on


def kernel_k(n_symbols: int, length: int) -> int:
    """K of the kernels' one-hot int8 dot for one sequence pair: length rounded up to whole
    K-tiles of JB positions x S symbols (mirrors torchalign_kernels.hamming._dot_shape)."""
    try:
        from torchalign_kernels.hamming import DOT_K, _dot_shape

        S, use_dot, jb = _dot_shape(n_symbols)
    except Exception:  # noqa: BLE001  (only for the printout)
        DOT_K, S = 128, max(2, 1 << max(0, n_symbols - 1).bit_length())
        use_dot, jb = S <= 32, 128 // S
    return -(-length // jb) * DOT_K if use_dot else length


def measure(rows, wl, impl, ref_impl, fn, work, unit, device, verify=None, note="", **bench_kw):
    """Verify (verify(result) -> "yes" / "NO"), time, append a Row; a peer that raises is
    recorded in ERRORS and skipped."""
    try:
        verified = verify(fn()) if verify is not None else ("ref" if ref_impl is None else "n/a")
        ms = bench(fn, device, **bench_kw)
    except Exception as e:  # noqa: BLE001  (a failing peer must not lose the run)
        if ref_impl is None:
            raise
        ERRORS.append(f"{wl}: {impl}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        print(f"{CLOCK()}   {impl}: FAILED ({ERRORS[-1]})", flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        return
    rows.append(Row(wl, impl, ms, work, unit, ref_impl, verified, note))
    print(f"{CLOCK()}   {impl}: {ms:.3f} ms, {si(work / ms * 1e3)}{unit}, verified {verified}", flush=True)


def fail(msg: str) -> str:
    FAILURES.append(msg)
    print(f"{CLOCK()}   VERIFICATION FAILED: {msg}", flush=True)
    return "NO"


# ====================================================================================
# workload 1: all-vs-all
# ====================================================================================
def cdist_chunked(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(a[:, None] != b[None]).sum(-1), in row chunks: the bool compare (1 B/element) and
    the int32 copy that sum() casts it to (4 B/element) stay within MEM_BUDGET."""
    na, L = a.shape
    nb = b.shape[0]
    rows = max(1, MEM_BUDGET // max(1, 5 * nb * L))
    out = torch.empty((na, nb), dtype=torch.int32, device=a.device)
    for i in range(0, na, rows):
        out[i : i + rows] = (a[i : i + rows, None, :] != b[None]).sum(-1, dtype=torch.int32)
    return out


def onehot_i8(codes: torch.Tensor, S: int = 4, k_pad: int | None = None) -> torch.Tensor:
    """uint8 codes [R, L] -> int8 one-hot [R, L * S] (zero-padded to k_pad columns)."""
    R, L = codes.shape
    oh = (codes.unsqueeze(-1) == torch.arange(S, dtype=codes.dtype, device=codes.device)).to(torch.int8)
    oh = oh.reshape(R, L * S)
    if k_pad is not None and k_pad > L * S:
        oh = torch.nn.functional.pad(oh, (0, k_pad - L * S))
    return oh


def workload_cdist(device, sz, rows: list[Row], info: dict) -> None:
    n, L = sz["n"], sz["L"]
    g = torch.Generator(device=device).manual_seed(SEED)
    a = torch.randint(0, 4, (n, L), generator=g, device=device, dtype=torch.uint8)
    b = torch.randint(0, 4, (n, L), generator=g, device=device, dtype=torch.uint8)
    lengths = torch.full((n,), L, dtype=torch.int64, device=device)
    A = ta.SequenceBatch.from_padded(a, lengths, "dna")
    B = ta.SequenceBatch.from_padded(b, lengths, "dna")
    wl = f"hamming_cdist {n}x{n} L={L}"
    work = float(n) * n * L  # element compares
    unit = "compares/s"
    ours = "torchalign check=False"
    print(f"{CLOCK()} [{wl}] inputs {n} x {L} uint8 x 2 = {2 * n * L / 2**20:.1f} MiB, output {n} x {n} int32 = "
          f"{n * n * 4 / 2**20:.0f} MiB; {work:.3g} element compares; useful one-hot MACs (S=4) "
          f"{work * 4:.3g}", flush=True)
    FLOOR.append(
        f"{wl}: in 2 x {n * L / 2**20:.1f} MiB uint8, out {n * n * 4 / 2**20:.0f} MiB int32; {work:.3g} element "
        f"compares; one-hot int8 MACs: useful (S=4) {work * 4:.3g}, as the kernel pads them "
        f"(codes 0..3 -> S=4) {float(n) * n * kernel_k(4, L):.3g}")
    info["cdist"] = dict(n=n, L=L, element_compares=work, input_bytes=2 * n * L, output_bytes=n * n * 4)

    t0 = time.perf_counter()
    ref = cdist_chunked(a, b)
    sync(device)
    print(f"{CLOCK()}   reference (chunked compare) built in {time.perf_counter() - t0:.2f} s", flush=True)

    def check(name):
        def verify(out):
            out = out.to(torch.int32)
            if torch.equal(out, ref):
                return "yes"
            bad = (out != ref).nonzero()[:5].tolist()
            return fail(f"{wl}: {name} differs from the chunked torch compare at {bad} "
                        f"({int((out != ref).sum())} entries)")
        return verify

    a_oh, b_oh = onehot_i8(a), onehot_i8(b)
    cases = [
        (ours, None, lambda: ta.hamming_cdist(A, B, check=False), ""),
        ("torchalign check=True", ours, lambda: ta.hamming_cdist(A, B, check=True), ""),
        ("torch.cdist p=0", ours, lambda: torch.cdist(a.float(), b.float(), p=0), "float32"),
        ("torch chunked (a[:,None]!=b[None]).sum(-1)", ours, lambda: cdist_chunked(a, b), "the reference"),
        ("torch._int_mm one-hot", ours, lambda: L - torch._int_mm(onehot_i8(a), onehot_i8(b).T),
         "incl. one-hot build"),
        ("torch._int_mm one-hot, GEMM only", ours, lambda: L - torch._int_mm(a_oh, b_oh.T), ""),
    ]
    for impl, ref_impl, fn, note in cases:
        verify = (lambda out: "ref") if note == "the reference" else check(impl)
        measure(rows, wl, impl, ref_impl, fn, work, unit, device, verify, note)
    del ref, a_oh, b_oh


# ====================================================================================
# workload 2: k-mismatch search
# ====================================================================================
def make_search_input(device, sz):
    """Genome codes, patterns [P, m], and the planted hits (pattern, position, strand, distance)."""
    G, P, m = sz["genome"], sz["n_pat"], PAT_LEN
    g = torch.Generator(device=device).manual_seed(SEED + 1)
    genome = torch.randint(0, 4, (G,), generator=g, device=device, dtype=torch.uint8)
    pos = torch.randint(0, G - m + 1, (P,), generator=g, device=device)
    n_in_sub = max(1, P // 16)  # a few sources inside the peers' subset, so it holds real hits
    pos[:n_in_sub] = torch.randint(0, sz["sub"] - m + 1, (n_in_sub,), generator=g, device=device)
    pats = genome[pos[:, None] + torch.arange(m, device=device)]
    strand = torch.randint(0, 2, (P,), generator=g, device=device)  # 1: taken from the reverse strand
    pats = torch.where(strand[:, None].bool(), (3 - pats).flip(-1), pats)
    n_mut = torch.randint(0, K + 1, (P,), generator=g, device=device)
    rank = torch.argsort(torch.rand((P, m), generator=g, device=device), dim=1).argsort(dim=1)
    mutate = rank < n_mut[:, None]  # n_mut distinct positions per pattern
    shift = torch.randint(1, 4, (P, m), generator=g, device=device, dtype=torch.uint8)
    pats = torch.where(mutate, (pats + shift) % 4, pats).contiguous()
    return genome, pats, (torch.arange(P, device=device), pos, strand, n_mut)


def both_strands(pats: torch.Tensor) -> torch.Tensor:
    """[P, m] -> [2P, m]: the patterns, then their reverse complements (complement = 3 - c)."""
    return torch.cat([pats, (3 - pats).flip(-1)])


def _hits(p2, w, d, P):
    """Peer hits (pattern index into both_strands, window, distance) -> our tuple layout."""
    strand = (p2 >= P).to(torch.int64)
    return p2.to(torch.int64) - strand * P, w.to(torch.int64), strand, d.to(torch.int32)


def search_unfold_eq(text: torch.Tensor, pats: torch.Tensor, k: int):
    """torch baseline: windows = text.unfold(0, m, 1); (pattern != window).sum(-1) <= k."""
    P, m = pats.shape
    p2 = both_strands(pats)
    win = text.unfold(0, m, 1)  # [W, m] view
    chunk = max(1, MEM_BUDGET // max(1, 3 * win.shape[0] * m))  # bool + its int16 copy in sum()
    out = []
    for c0 in range(0, 2 * P, chunk):
        d = (p2[c0 : c0 + chunk, None, :] != win[None]).sum(-1, dtype=torch.int16)  # [C, W]
        pi, wi = torch.nonzero(d <= k, as_tuple=True)
        out.append((pi + c0, wi, d[pi, wi]))
    return _hits(*(torch.cat(x) for x in zip(*out)), P)


def search_onehot_gemm(text: torch.Tensor, pats: torch.Tensor, k: int, kind: str):
    """torch baseline: one-hot windows [W, m*4] x one-hot patterns^T -> matches; nonzero(>= m-k).

    kind "int8": torch._int_mm (K padded to a multiple of 8, int32 out);
    kind "half": fp16 matmul on CUDA (float32 on CPU); counts <= m are exact either way.
    """
    P, m = pats.shape
    p2 = both_strands(pats)
    win = text.unfold(0, m, 1)
    k_pad = (m * 4 + 7) // 8 * 8
    w_oh, p_oh = onehot_i8(win, 4, k_pad), onehot_i8(p2, 4, k_pad)
    if kind == "half":
        dt = torch.float16 if text.is_cuda else torch.float32
        w_oh, p_oh = w_oh.to(dt), p_oh.to(dt)
    bt = p_oh.T
    rows = max(17, MEM_BUDGET // 4 // (4 * 2 * P))  # int32 / fp out chunk <= MEM_BUDGET / 4
    out = []
    for r0 in range(0, w_oh.shape[0], rows):
        a = w_oh[r0 : r0 + rows]
        if kind == "int8" and a.shape[0] <= 16:  # _int_mm wants more than 16 rows
            a = torch.nn.functional.pad(a, (0, 0, 0, 17 - a.shape[0]))
        mt = torch._int_mm(a, bt) if kind == "int8" else a @ bt
        wi, pi = torch.nonzero(mt >= m - k, as_tuple=True)
        keep = wi < w_oh.shape[0] - r0
        wi, pi = wi[keep], pi[keep]
        out.append((pi, wi + r0, m - mt[wi, pi].to(torch.int32)))
    return _hits(*(torch.cat(x) for x in zip(*out)), P)


def sort_hits(pattern, pos, strand, dist, total):
    key = pattern * (2 * total) + pos * 2 + strand
    o = torch.argsort(key)
    return pattern[o], pos[o], strand[o], dist[o]


def ours_tuple(h):
    """Hits (one text) -> (pattern, position, strand, distance), already sorted that way."""
    return h.pattern, h.position, h.strand.to(torch.int64), h.distance


def same_hits(x, y) -> bool:
    return all(torch.equal(u.cpu(), v.cpu()) for u, v in zip(x, y))


def workload_search(device, sz, rows: list[Row], info: dict) -> None:
    G, P, m, SUB = sz["genome"], sz["n_pat"], PAT_LEN, sz["sub"]
    genome, pats, planted = make_search_input(device, sz)
    lengths = torch.full((P,), m, dtype=torch.int64, device=device)
    pat_batch = ta.SequenceBatch.from_padded(pats, lengths, "dna")
    text = ta.SequenceBatch(genome, torch.tensor([0, G], dtype=torch.int64, device=device), "dna")
    sub_codes = genome[:SUB].contiguous()
    sub = ta.SequenceBatch(sub_codes, torch.tensor([0, SUB], dtype=torch.int64, device=device), "dna")

    n_win, n_win_sub = G - m + 1, SUB - m + 1
    work, work_sub = float(P) * 2 * n_win, float(P) * 2 * n_win_sub
    unit = "comparisons/s"
    wl, wl_sub = f"kmismatch_search {G / 1e6:g} Mbp", f"kmismatch_search {SUB / 1e6:g} Mbp subset"
    print(f"{CLOCK()} [{wl}] genome {G:,} B uint8, patterns {P} x {m} (x2 strands), k={K}; "
          f"{work:.3g} pattern x position comparisons = {work * m:.3g} element compares; "
          f"useful one-hot MACs (S=4) {work * m * 4:.3g}; peers on the first {SUB:,} bp "
          f"({work_sub:.3g} comparisons)", flush=True)
    FLOOR.append(
        f"{wl}: genome {G / 2**20:.1f} MiB uint8, patterns {P} x {m} x 2 strands; {work:.3g} comparisons = "
        f"{work * m:.3g} element compares; one-hot int8 MACs: useful (S=4) {work * m * 4:.3g}, as the kernel "
        f"pads them (S=4, 32 positions) {work * kernel_k(4, m):.3g}; "
        f"peer subset {SUB / 2**20:.2f} MiB, {work_sub:.3g} comparisons")
    info["search"] = dict(genome=G, n_patterns=P, pattern_length=m, k=K, both_strands=True, subset=SUB,
                          comparisons=work, comparisons_subset=work_sub)

    ours = "torchalign check=True"
    run = lambda t, check=True: ta.kmismatch_search(t, pat_batch, K, both_strands=True, check=check)  # noqa: E731

    # full genome: every planted hit must be there
    h = run(text)
    found = pattern_key(ours_tuple(h), G)
    want = pattern_key((planted[0], planted[1], planted[2], planted[3].to(torch.int32)), G)
    missing = int((~torch.isin(want, found)).sum())
    print(f"{CLOCK()}   ours: {h.pattern.numel()} hits; {P - missing} of {P} planted hits found", flush=True)
    info["search"]["hits_full"] = int(h.pattern.numel())

    def planted_ok(out):
        if missing:
            return fail(f"{wl}: {missing} of {P} planted hits (pattern, position, strand, distance) not found")
        return "planted"

    def same_as_default(out):
        return "yes" if same_hits(ours_tuple(out), ours_tuple(h)) else fail(
            f"{wl}: check=False hits differ from check=True hits")

    measure(rows, wl, ours, None, lambda: run(text), work, unit, device, planted_ok)
    measure(rows, wl, "torchalign check=False", ours, lambda: run(text, check=False), work, unit, device,
            same_as_default)
    del h, found

    # subset: ours and the torch peers on the same input, hits compared exactly
    ours_sub = f"{ours} (subset)"
    mine = ours_tuple(run(sub))
    info["search"]["hits_subset"] = int(mine[0].numel())
    print(f"{CLOCK()}   subset: ours {mine[0].numel()} hits", flush=True)

    def same_as_ours(name):
        def verify(out):
            theirs = sort_hits(*out, SUB)
            if same_hits(theirs, mine):
                return "yes"
            return fail(f"{wl_sub}: {name} finds {theirs[0].numel()} hits, ours {mine[0].numel()}; they differ")
        return verify

    cases = [
        (ours_sub, None, lambda: run(sub), ""),
        ("torch unfold + compare", ours_sub, lambda: search_unfold_eq(sub_codes, pats, K), "(p!=w).sum(-1), chunked"),
        ("torch._int_mm one-hot windows", ours_sub, lambda: search_onehot_gemm(sub_codes, pats, K, "int8"),
         "+ nonzero"),
        ("torch one-hot matmul", ours_sub, lambda: search_onehot_gemm(sub_codes, pats, K, "half"),
         ("fp16" if device.type == "cuda" else "fp32") + " + nonzero"),
    ]
    for impl, ref_impl, fn, note in cases:
        measure(rows, wl_sub, impl, ref_impl, fn, work_sub, unit, device,
                None if ref_impl is None else same_as_ours(impl), note, warmup=10, rep=50)


def pattern_key(t, total):
    pattern, pos, strand, dist = t
    return ((pattern * (2 * total) + pos * 2 + strand) * 64 + dist.to(torch.int64)).to(torch.int64)


# ====================================================================================
def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="small sizes (a quick smoke run)")
    ap.add_argument("--commit", default=None, help="commit hash to record (else git rev-parse HEAD)")
    ap.add_argument("--out", default=os.path.join("benchmarks", "results"), help="folder for the JSON")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    ap.add_argument("--only", choices=("cdist", "search"), default=None, help="run one workload")
    args = ap.parse_args(argv)

    device = pick_device(args.device)
    size = "cpu" if device.type != "cuda" else ("small" if args.small else "full")
    sz = SIZES[size]
    commit = git_commit(args.commit)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, sizes '{size}', commit {commit}", flush=True)
    t0 = time.perf_counter()
    rows: list[Row] = []
    info: dict = {"sizes": size, "seed": SEED}
    for name, workload in (("cdist", workload_cdist), ("search", workload_search)):
        if args.only not in (None, name):
            continue
        try:
            with torch.no_grad():
                workload(device, sz, rows, info)
        except Exception as e:  # noqa: BLE001  (keep the other workload and the record)
            traceback.print_exc()
            FAILURES.append(f"workload {name} raised {type(e).__name__}: {str(e).splitlines()[0][:300]}")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    fill_ratios(rows)
    info["wall_s"] = round(time.perf_counter() - t0, 1)
    info["verification_failures"] = FAILURES
    info["peer_errors"] = ERRORS
    info["floor"] = FLOOR
    path = write_json(args.out, "hamming", device, commit, rows, info, suffix="-small" if size == "small" else "")
    print()
    print(markdown_table(rows))
    print()
    for line in FLOOR:
        print(line)
    print("vs ours: ours' throughput / this row's, on the same input (>1: ours is faster). "
          "verified: same integers as the reference row (cdist: the chunked compare; "
          "search subset: ours' hits; 'planted': every planted hit found).")
    report_end(path, info, ERRORS, FAILURES)


if __name__ == "__main__":
    main()
