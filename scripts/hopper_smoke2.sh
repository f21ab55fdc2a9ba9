export PYTHONPATH=src PYTHONUNBUFFERED=1 GEMMLAB_CACHE=/tmp/gemmlab-cache
python3 - <<'PY'
import cupy as cp
for n in (4096, 8192):
    B = cp.random.rand(n, n, dtype=cp.float32); Bt = cp.empty((n, n), cp.float32)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    for _ in range(3): Bt[...] = B.T
    s.record()
    for _ in range(10): Bt[...] = B.T
    e.record(); e.synchronize()
    print(f"cupy transpose {n}: {cp.cuda.get_elapsed_time(s, e)/10*1000:.1f} us")
PY
b() { timeout 250 python3 -m gemmlab.cli bench --op hgemm --db $OUT/bench.db "$@" 2>&1 | sed -n '/GFLOP/,/└/p;/share of cublas/,/└/p'; }
echo "=== tf32"; b --dtype tf32 --impl tf32_wgmma,cublas --sizes 4096,8192
echo "=== bf16"; b --dtype bf16 --impl all --sizes 1024,2048,4096,8192,4097,1000x3000x2000 --markdown $OUT/bf16.md
echo "=== fp16"; b --dtype fp16 --impl mma_sync,tma_wgmma,warp_specialized,persistent,cublas --sizes 4096,8192,4097 --markdown $OUT/fp16.md
