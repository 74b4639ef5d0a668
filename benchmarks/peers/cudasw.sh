#!/usr/bin/env bash
# Build CUDASW++ 4.0 (its `align` and `makedb`) from its public source tree for this
# machine's GPU, out of the source tree:
#
#   bash benchmarks/peers/cudasw.sh SRC_DIR BUILD_DIR      # e.g. .peers/cudasw4 .peers/build
#
# SRC_DIR is a plain copy of github.com/asbschmidt/CUDASW4 (kept in the git-ignored .peers/,
# never committed). The compute capability comes from nvidia-smi (else torch); SM=90 (or 80,
# ...) sets it, e.g. to compile on a machine with no GPU. Prints the exact build command.
# The upstream Makefile's flags, with three changes for CUDA 13: -arch=sm_XX instead of
# -arch=native (the build does not depend on the GPU it runs on); no -lnvToolsExt (the
# NVTX v2 library is gone from CUDA 13, its nvtx3 headers need no library); every source
# compiled as CUDA (-x cu): CUDA 13's thrust headers, included by makedb.cpp, fail to
# compile in nvcc's host-only mode for .cpp files ("__cvta_generic_to_shared was not
# declared").
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: bash $0 SRC_DIR BUILD_DIR" >&2
    exit 2
fi
src=$(realpath "$1")
out=$(realpath -m "$2")
if [ ! -f "$src/Makefile" ] || [ ! -f "$src/src/main.cu" ]; then
    echo "cudasw.sh: $src is not a CUDASW++ 4.0 source tree (no Makefile or src/main.cu)" >&2
    exit 2
fi
case "$out/" in "$src/"*) echo "cudasw.sh: BUILD_DIR must lie outside SRC_DIR" >&2; exit 2 ;; esac
command -v nvcc >/dev/null || { echo "cudasw.sh: nvcc is not on PATH" >&2; exit 2; }

sm=${SM:-}
if [ -z "$sm" ] && command -v nvidia-smi >/dev/null; then
    sm=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
fi
if [ -z "$sm" ]; then
    sm=$(python3 -c 'import torch; a, b = torch.cuda.get_device_capability(); print(f"{a}{b}")' 2>/dev/null || true)
fi
if ! [[ "$sm" =~ ^[0-9]+$ ]]; then
    echo "cudasw.sh: no compute capability (got '${sm}' from SM / nvidia-smi / torch.cuda); set SM=90 or SM=80" >&2
    exit 2
fi

mkdir -p "$out"
cp -a "$src/." "$out/"  # the Makefile writes build/ and the binaries where it runs (-a: a rerun rebuilds only what changed)
flags="-arch=sm_$sm -lineinfo --expt-relaxed-constexpr -rdc=true --extended-lambda -Xcompiler=-fopenmp"
compile='$(COMPILER) $(NVCC_FLAGS) -x cu $(DIALECT) $(OPTIMIZATION) $(WARNINGS) -c $< -o $@'
cmd=(make -C "$out" -j"$(nproc)" align makedb "NVCC_FLAGS=$flags" "COMPILE=$compile")
if [ "$(cat "$out/.flags" 2>/dev/null || true)" != "$flags" ]; then
    rm -rf "$out/build" "$out/align" "$out/makedb"  # built with other flags (another GPU): make would keep them
fi
echo "$flags" > "$out/.flags"
echo "nvcc: $(nvcc --version | tail -1)"
printf '+'; printf ' %q' "${cmd[@]}"; echo
"${cmd[@]}"
for exe in align makedb; do
    [ -x "$out/$exe" ] || { echo "cudasw.sh: the build made no $out/$exe" >&2; exit 1; }
done
{ echo "source: $src"; echo "nvcc: $(nvcc --version | tail -1)"; printf 'command:'; printf ' %q' "${cmd[@]}"; echo; } \
    > "$out/BUILD_INFO"
echo "built $out/align and $out/makedb for sm_$sm (recorded in $out/BUILD_INFO)"
