export PYTHONPATH=src PYTHONUNBUFFERED=1
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_hgemm_kernels.py -k "other_parameters and (persistent or tf32)" 2>&1 | tail -2
for p in "CM=1" "CM=2" "CM=2,GROUP_M=16" "CM=2,GROUP_M=4"; do
  echo "== $p"
  timeout 100 python3 -m gemmlab.cli bench --op hgemm --dtype bf16 --impl persistent,cublas --sizes 4096,8192 --params "$p" --db /tmp/t.db 2>&1 | sed -n '/share of cublas/,/└/p' | grep -a "persistent\|ERROR\|error"
done
for p in "CM=1" "CM=2"; do
  echo "== tf32 $p"
  timeout 100 python3 -m gemmlab.cli bench --op hgemm --dtype tf32 --impl tf32_wgmma,cublas --sizes 4096,8192 --params "$p" --db /tmp/t.db 2>&1 | sed -n '/share of cublas/,/└/p' | grep -a "tf32_wgmma\|ERROR\|error"
done
