"""The kernels compile for a Hopper GPU (sm_90) on this CPU-only machine.

The interpreter runs kernels as NumPy and misses what only the GPU compiler rejects
(loop-carried variables changing type, constexpr misuse, dtype rules of tl.dot); Triton
compiles to PTX (its own ptxas) without a GPU, so every variant is compiled here.
"""

import pytest

triton = pytest.importorskip("triton")
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from torchalign_kernels import (align, align_scan, align_wave, asm_rows, levenshtein, myers, myers_band,  # noqa: E402
                                myers_wave, primers)

MYERS_ARGS = dict(codes_ptr="*u8", lane_pat_ptr="*i64", lane_start_ptr="*i64", lane_len_ptr="*i64",
                  lane_own_ptr="*i64", lane_tag_ptr="*i64", n_lanes="i32", pat_len_ptr="*i64", peq_ptr="*i64",
                  n_sym="i32", k="i32", q0="i32", out_ptr="*i64", out2_ptr="*i32", out3_ptr="*i32",
                  out4_ptr="*i64", out_stride="i32", counter_ptr="*i64", capacity="i32", q_first="i32")


def compile_for_hopper(fn, types: dict, constants: dict):
    names = list(fn.arg_names)
    sig = {name: "constexpr" if name in constants else types[name] for name in names}
    src = ASTSource(fn, sig, constexprs={(names.index(k),): v for k, v in constants.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32))


@pytest.mark.parametrize("mode", list(myers.MODES.values()))
@pytest.mark.parametrize("words", [1, 2])
def test_myers_kernel(mode, words):
    cutoffs = [False, True] if mode == myers.MODES["dist"] else [False]
    for cutoff in cutoffs:
        compile_for_hopper(myers.myers_kernel, MYERS_ARGS, dict(MODE=mode, PER_LANE_PATTERN=mode == myers.MODES["last"],
                                                               WORDS=words, BLOCK=128, CUTOFF=cutoff))


@pytest.mark.parametrize("mode", list(myers.MODES.values()))
def test_myers_band_kernel(mode):
    types = dict(MYERS_ARGS, n_words="i32", state_ptr="*i64", n_state="i32")
    compile_for_hopper(myers_band.myers_band_kernel, types,
                       dict(MODE=mode, PER_LANE_PATTERN=mode == myers.MODES["last"], BLOCK=64))


@pytest.mark.parametrize("mode", list(myers.MODES.values()))
def test_myers_wave_kernel(mode):
    types = dict(MYERS_ARGS, n_words="i32", scratch_ptr="*i32")
    compile_for_hopper(myers_wave.myers_wave_kernel, types,
                       dict(MODE=mode, PER_LANE_PATTERN=mode == myers.MODES["last"], W=16, C=4))


@pytest.mark.parametrize("cdist", [False, True])
def test_levenshtein_rows_kernel(cdist):
    types = dict(codes_ptr="*i32", a_start_ptr="*i64", a_len_ptr="*i64", b_start_ptr="*i64", b_len_ptr="*i64",
                 n_pairs="i64", nb="i32", scratch_ptr="*i32", scratch_stride="i64", out_ptr="*i32")
    compile_for_hopper(levenshtein.levenshtein_rows_kernel, types, dict(CDIST=cdist, BLOCK=128))


@pytest.mark.parametrize("mode", list(asm_rows.MODES.values()))
def test_asm_rows_kernel(mode):
    types = dict(text_ptr="*u8", pat_ptr="*u8", pat_start_ptr="*i64", pat_len_ptr="*i64", n_chunks="i32",
                 n_items="i32", scan_ptr="*i64", len_ptr="*i64", own_ptr="*i64", tid_ptr="*i64", row_ptr0="*i64",
                 row_stride="i64", k="i32", out_ptr="*i64", out2_ptr="*i32", out3_ptr="*i32", out4_ptr="*i64",
                 out5_ptr="*i64", out_stride="i64", counter_ptr="*i64", capacity="i64")
    compile_for_hopper(asm_rows.asm_rows_kernel, types, dict(MODE=mode, BLOCK=256))


TRACEBACK_ARGS = dict(q_ptr="*u8", q_start_ptr="*i64", t_ptr="*u8", t_start_ptr="*i64", rows_ptr="*i64",
                      cols_ptr="*i64", dir_ptr="*u8", dir_at_ptr="*i64")


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_traceback_kernels(mode):
    from torchalign_kernels import traceback

    types = dict(TRACEBACK_ARGS, table_ptr="*i32", width="i32", gap_open="i32", gap_extend="i32",
                 scratch_ptr="*i32", scratch_at_ptr="*i64")
    compile_for_hopper(traceback.traceback_dp_kernel, types, dict(MODE=mode, BLOCK=traceback.BLOCK))
    types = dict(TRACEBACK_ARGS, out_ptr="*u8", out_at_ptr="*i64", len_ptr="*i64", q_from_ptr="*i64",
                 t_from_ptr="*i64")
    compile_for_hopper(traceback.traceback_walk_kernel, types, dict(MODE=mode))


ALIGN_ARGS = dict(q_ptr="*u8", q_start_ptr="*i64", q_len_ptr="*i64", t_ptr="*u8", t_start_ptr="*i64",
                  t_len_ptr="*i64", pair_q_ptr="*i64", pair_t_ptr="*i64", table_ptr="*i32", width="i32",
                  gap_open="i32", gap_extend="i32", score_ptr="*i32", q_end_ptr="*i64", t_end_ptr="*i64")


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("track", [False, True])
def test_align_kernel(mode, track):
    types = dict(ALIGN_ARGS, n_pairs="i32", scratch_ptr="*i32", scratch_at_ptr="*i64")
    compile_for_hopper(align.align_kernel, types, dict(MODE=mode, TRACK=track, ROWS=align.ROWS, BLOCK=align.BLOCK))


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("track", [False, True])
def test_align_wave_kernel(mode, track):
    types = dict(ALIGN_ARGS, row_ptr="*i32", row_at_ptr="*i64", buf_ptr="*i32")
    compile_for_hopper(align_wave.align_wave_kernel, types, dict(MODE=mode, TRACK=track, ROWS=align.ROWS, W=64))


@pytest.mark.parametrize("dpx", [False, True])
def test_align_scan_kernel(dpx):
    """The packed int16 scan; DPX=True is the inline-PTX path (add/max.s16x2) the GPU runs."""
    types = dict(q_ptr="*u8", q_off_ptr="*i64", qi="i32", pair_ptr="*i32", pair_width="i32", db_ptr="*u8",
                 chunk_off_ptr="*i64", chunk_len_ptr="*i64", chunk0="i32", scratch_ptr="*i32", best_ptr="*i32",
                 neg_open="i32", neg_extend="i32", pad="i32")
    c = compile_for_hopper(align_scan.scan_kernel, types, dict(ROWS=align_scan.ROWS, LANES=align_scan.LANES, DPX=dpx))
    if dpx:
        assert "max.s16x2" in c.asm["ptx"] and "add.s16x2" in c.asm["ptx"]


def test_primers_kernel():
    types = dict(text_ptr="*u8", stretch_start_ptr="*i64", stretch_len_ptr="*i64", bits_ptr="*i64", n_bits_words="i32",
                 n_sym="i32", lane_pos_ptr="*i64", lane_rows_ptr="*i64", lane_seed_ptr="*i64", n_lanes="i32", K="i32",
                 state_ptr="*i64", n_state="i32", best_ptr="*i32")
    for block in (32, primers.LAUNCH[0], 128):
        compile_for_hopper(primers.primers_kernel, types, dict(BLOCK=block))
