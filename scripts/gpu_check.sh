#!/usr/bin/env bash
# One command on a GPU machine: the test suite (CPU + GPU tests, compute-sanitizer memcheck
# and racecheck inside it), then the default benchmark against cuBLAS, logs in one folder.
#   scripts/gpu_check.sh [OUTDIR]          (default ./gpu-check)
# Extra arguments after OUTDIR go to `gemmlab bench` (e.g. --sizes 1024,4096).
# Runs from the source tree (PYTHONPATH=src), as the GPU machines have no package index.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-./gpu-check}" && cd "${1:-./gpu-check}" && pwd)
shift || true
export PYTHONPATH="$root/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export GEMMLAB_SANITIZER_LOGS="$out"
py=${PYTHON:-python3}
status=0

{ date -u +%FT%TZ; nvidia-smi || true; "$py" -m gemmlab.cli env; } > "$out/summary.txt" 2>&1

echo "== tests" | tee -a "$out/summary.txt"
(cd "$root" && "$py" -m pytest tests -q -rs -p no:cacheprovider 2>&1) | tee "$out/pytest.log" || status=1
tail -n 1 "$out/pytest.log" >> "$out/summary.txt"

echo "== benchmark" | tee -a "$out/summary.txt"
(cd "$out" && "$py" -m gemmlab.cli bench --db "$out/results/results.db" --markdown "$out/bench.md" "$@" 2>&1) | tee "$out/bench.log" || status=1

echo "gpu_check: exit $status, logs in $out" | tee -a "$out/summary.txt"
exit $status
