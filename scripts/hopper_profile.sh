export PYTHONPATH=src PYTHONUNBUFFERED=1
M="sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes.sum"
for args in "mma_sync bf16 4096" "persistent bf16 4096 CM=1" "persistent bf16 4096 CM=2"; do
  echo "=== $args"
  timeout 120 ncu --clock-control none -k regex:hgemm_ --launch-skip 2 --launch-count 1 --metrics "$M" \
     --section WarpStateStats python3 scripts/profile_hgemm.py $args 2>&1 | grep -a -v "^==PROF==" | grep -a -E "ran |hgemm_|pct|duration|per_second|bytes|Stall|stall|Warp Cycles|Issued" | head -30
done
