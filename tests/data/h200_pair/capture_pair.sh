# Run beside pair_attention.py on the H200 machine; OUT receives the files.
# Per variant: compile once with TORCH_LOGS=output_code (fresh cache: writes the fusion comments and
# warms the cache), then a Kineto trace with NVML clocks, then ncu kernel replay of the same region.
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,smsp__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_active.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_per_inst_issued.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__inst_executed.avg.per_cycle_active,smsp__average_thread_inst_executed_per_inst_executed.ratio,launch__registers_per_thread,l1tex__t_output_wavefronts_pipe_lsu_mem_local.sum,launch__shared_mem_per_block_dynamic
for V in base opt; do
  export TORCHINDUCTOR_CACHE_DIR=/tmp/ind_$V
  S=$SECONDS
  TORCH_LOGS=output_code python3 pair_attention.py $V region > /tmp/${V}_output_code.log 2>&1
  grep -E "Original ATen|async_compile.triton\('" /tmp/${V}_output_code.log | sed 's/^.*\[__output_code\] *//' > $OUT/${V}_fusion_comments.txt
  python3 pair_attention.py $V kineto $OUT/${V}_kineto.json $OUT/${V}_clocks.json > /dev/null 2>&1
  timeout 200 ncu --target-processes application-only --profile-from-start off --replay-mode kernel --clock-control none --metrics $M -o /tmp/$V python3 pair_attention.py $V region > /dev/null 2>&1
  ncu --import /tmp/$V.ncu-rep --csv --page raw --print-units base --metrics $M > $OUT/${V}_ncu_raw.csv 2>&1
  echo "$V $((SECONDS-S)) s"
done
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
python3 -c "import torch; print(torch.__version__)"; ncu --version | tail -1
ls -la $OUT; wc -l $OUT/*.csv
