export PYTHONPATH=src PYTHONUNBUFFERED=1
for p in "BM=128,BN=128,BK=32,WM=64,WN=64,STAGES=4" "BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=3" "BM=256,BN=128,BK=32,WM=64,WN=64,STAGES=3" "BM=128,BN=256,BK=32,WM=64,WN=64,STAGES=4" "BM=128,BN=128,BK=64,WM=64,WN=64,STAGES=3" "BM=256,BN=128,BK=32,WM=64,WN=64,STAGES=4" "BM=128,BN=256,BK=64,WM=64,WN=64,STAGES=2" "BM=128,BN=128,BK=32,WM=64,WN=32,STAGES=5"; do
  echo "== $p"
  timeout 100 python3 -m gemmlab.cli bench --op hgemm --dtype bf16 --impl mma_sync,cublas --sizes 4096,8192 --params "$p" --db /tmp/t.db 2>&1 | sed -n '/share of cublas/,/└/p' | grep -a "mma_sync\|ERROR\|error"
done
