#!/usr/bin/env bash
# Quick device check of the Hopper tensor-core rungs (3-6): verify each in its own process (a
# hang or a fault stays contained), then short benchmarks against cuBLAS. Logs under $1.
set -u
OUT=${1:-out}; mkdir -p "$OUT"
export PYTHONPATH=src PYTHONUNBUFFERED=1 GEMMLAB_CACHE=/tmp/gemmlab-cache
VERIFY=${VERIFY:-"persistent:bf16 tf32_wgmma:tf32"}
for spec in $VERIFY; do
  impl=${spec%%:*}; dt=${spec##*:}
  echo "=== verify $impl $dt"
  timeout 120 python3 -m gemmlab.cli verify --op hgemm --impl "$impl" --dtype "$dt" > "$OUT/verify_${impl}_$dt.log" 2>&1
  echo "rc=$?"; tail -n 1 "$OUT/verify_${impl}_$dt.log"; grep -a -E "FAIL|ERROR" "$OUT/verify_${impl}_$dt.log" | head -n 6
done
python3 - <<'PY'
from gemmlab import registry
from gemmlab.ops.hgemm import HgemmRunner
from gemmlab.ops.hgemm_tma import max_active_clusters
from gemmlab.problem import GemmProblem
for cm in (1, 2):
    r = HgemmRunner(registry.get("persistent", "hgemm"), {"CM": cm}, "bf16")
    g = r.impl.launch(GemmProblem(8192, 8192, 8192, dtype="bf16"), r.params)
    print("CM", cm, "max active clusters", max_active_clusters(r.compiled, g), "grid", g.grid)
PY
bench() { timeout 200 python3 -m gemmlab.cli bench --op hgemm --db "$OUT/smoke.db" "$@" 2>&1 | sed -n '/share of cublas/,/└/p'; }
for p in ${PARAMS:-"CM=2" "CM=1"}; do
  echo "=== persistent $p"; bench --dtype bf16 --impl persistent,cublas --sizes 4096,8192 --params "$p"
done
echo "=== tf32"; bench --dtype tf32 --impl tf32_wgmma,cublas --sizes 4096,8192
