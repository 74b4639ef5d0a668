#!/usr/bin/env bash
# One call on the lent GPU: install, GPU tests, interpreter tests under its triton, benchmarks.
#   run with carry [".whl"] (wheels: biopython, parasail, rapidfuzz, the peers; the data is in the repository):
#   [SKIP_TESTS=1] [SKIP_INTERPRET=1] [BENCH="levenshtein asm"] bash benchmarks/device_run.sh COMMIT
set -uo pipefail
commit=${1:-unknown}; shift || true
export PYTHONUNBUFFERED=1 OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -n 2
if ls .whl/*.whl >/dev/null 2>&1; then  # carried wheels (Biopython for the CLI)
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
if [ -z "${SKIP_TESTS:-}" ]; then
  s=$(date +%s)
  python3 -m pytest -q -m gpu -n 4 --dist loadscope -p no:cacheprovider --durations=30 2>&1 | tee "$OUT/gpu_tests.log" | tail -n 60
  echo "GPU tier: $(( $(date +%s) - s )) s (Triton cache: ${TRITON_CACHE_DIR:-default})"
  [ -n "${SKIP_INTERPRET:-}" ] || TRITON_INTERPRET=1 python3 -m pytest -q -m interpret -p no:cacheprovider 2>&1 | tail -n 3
  torchalign grep TTAATTAATGC -k 2 --both-strands --device cuda > "$OUT/grep.tsv"; head -n 4 "$OUT/grep.tsv"
  torchalign grep TTAATTAATGC -k 2 --edits --both-strands --device cuda > "$OUT/grep-edits.tsv"; head -n 4 "$OUT/grep-edits.tsv"
fi
for b in ${BENCH-hamming levenshtein asm}; do
  python3 benchmarks/$b.py --commit "$commit" --out "$OUT" "$@" 2>&1 | tee "$OUT/bench-$b.log"
done
