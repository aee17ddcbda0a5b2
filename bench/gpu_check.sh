#!/usr/bin/env bash
# One call on the GPU machine: the flash kernels' own check, the CUDA tests, the GPU benchmark and
# a profile. Run from the repository root there, with the bundle scripts/device-bundle.sh made from
# a CUDA build carried beside it:
#   bash bench/gpu_check.sh [--export DIR] [--tests "FILTER:SECONDS ..."] [--no-tests] [--no-flash-bench]
#                           [--profile CONFIG] [--generate] [gpu_bench.sh's arguments...]
#   --export: where the test logs and any hang report go, and the benchmark's table and logs under bench/ (e.g. "$OUT")
#   --tests: groups of gtest filters, each run with its own time limit (default: the flash plugin's
#            end-to-end tests (flash, flash_bf16) alone, then every other CUDA test and the plugin probe)
#   --no-flash-bench: skip strata_flash_attention_gpu_bench (bench/gpu/flash_attention_bench.cu: both
#            flash kernels against a float64 reference, then timed), which runs first otherwise
#   --matmul-bench: also strata_matmul_gpu_bench (bench/gpu/matmul_bench.cu: GPT-2 124M's block
#            products as the backend runs them, against cuBLAS alone and all-bf16 products)
# Always: strata_host_update_bench (bench/host_update_bench.cpp: the host's update of offloaded
#            optimizer state, GPT-2 124M's parameters on every core), a few seconds.
#   --profile: after the benchmark, `strata train bench/gpu/CONFIG.toml --profile` (per-kernel device times)
#   --generate: then `strata generate` on the GPU against PyTorch eager with a static KV cache
#            (bench/generate_bench.sh 128 2 cuda:0: GPT-2 124M and a 110M LLaMA, f32, greedy)
# A group that outlives its limit is stopped, after a report of where its processes stood (their
# threads' kernel stacks, and cuda-gdb's backtraces) is written to DIR/hang-N.txt: one stuck test
# costs its limit, not the whole call. The console gets each group's failures and summary, so the
# end of the output holds the benchmark's table.
set -uo pipefail
export_dir=runs/gpu-check run_tests=1 flash_bench=1 matmul_bench=0 profile="" generate=0 bench_args=()
groups='CudaTraining.Flash*:90 BackendConformance*:Cuda*:Decoding.Cuda*:PluginProbe*:-CudaTraining.Flash*:210'
while [ $# -gt 0 ]; do
  case $1 in
    --tests) groups=$2; shift 2 ;;
    --no-tests) run_tests=0; shift ;;
    --no-flash-bench) flash_bench=0; shift ;;
    --matmul-bench) matmul_bench=1; shift ;;
    --profile) profile=$2; shift 2 ;;
    --generate) generate=1; shift ;;
    --export) export_dir=$2; bench_args+=(--export "$2/bench"); shift 2 ;;
    *) bench_args+=("$1"); shift ;;
  esac
done
[ -f bench/gpu_check.sh ] || { echo "gpu_check.sh: run it from the repository root" >&2; exit 2; }
mkdir -p "$export_dir"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader

# hang_report PID FILE: where the process tree under PID stands.
hang_report() {
  {
    echo "== $(date -u +%T) process tree"
    ps -eo pid,ppid,stat,wchan:32,etime,args --forest 2>&1 | grep -v ' ps -eo' | tail -n 60
    for pid in $1 $(pgrep -P "$1"); do
      for task in /proc/"$pid"/task/*; do
        echo "== $task: $(cat "$task"/comm 2>/dev/null) wchan $(cat "$task"/wchan 2>/dev/null)"
        cat "$task"/stack 2>/dev/null | head -n 12
      done
      if command -v cuda-gdb >/dev/null; then
        echo "== cuda-gdb backtraces of $pid"
        timeout 60 cuda-gdb -p "$pid" -batch -ex 'thread apply all bt 20' 2>&1 | grep -E '^(Thread|#)' | head -n 150
      fi
    done
  } > "$2" 2>&1
}

tests_rc=0
if [ "$flash_bench" = 1 ]; then
  start=$SECONDS
  (. .device-bundle/env.sh && timeout -k 5 120 strata_flash_attention_gpu_bench) > "$export_dir/flash-bench.log" 2>&1
  rc=$?
  [ "$rc" != 0 ] && tests_rc=1
  grep -vE ' ok$' "$export_dir/flash-bench.log" | tail -n 20
  echo "== flash kernels' check and timing: exit $rc, $((SECONDS - start)) s (log: $export_dir/flash-bench.log)"
fi
if [ "$matmul_bench" = 1 ]; then
  (. .device-bundle/env.sh && timeout -k 5 120 strata_matmul_gpu_bench) > "$export_dir/matmul-bench.log" 2>&1
  rc=$?
  [ "$rc" != 0 ] && tests_rc=1
  cat "$export_dir/matmul-bench.log"
  echo "== block matmuls' timing: exit $rc"
fi
# The host's share of an offloaded update (bench/host_update_bench.cpp): AdamW, the CUDA-order
# norm and the bf16 rounding of GPT-2 124M's parameters on this machine's cores.
(. .device-bundle/env.sh && OMP_NUM_THREADS=$(nproc) timeout -k 5 120 strata_host_update_bench --rounds 5) \
  > "$export_dir/host-update-bench.log" 2>&1
echo "== the host's update: exit $?"
cat "$export_dir/host-update-bench.log"
if [ "$run_tests" = 1 ]; then
  index=0
  for group in $groups; do
    index=$((index + 1))
    filter=${group%:*} limit=${group##*:}
    start=$SECONDS
    bash .device-bundle/run-tests.sh --gtest_filter="$filter" > "$export_dir/tests-$index.log" 2>&1 &
    runner=$!
    while kill -0 "$runner" 2>/dev/null && [ $((SECONDS - start)) -lt "$limit" ]; do sleep 1; done
    if kill -0 "$runner" 2>/dev/null; then
      stuck=$(pgrep -P "$runner" | head -n 1)
      echo "== tests '$filter': still running after $limit s (pid ${stuck:-?}); report in $export_dir/hang-$index.txt"
      [ -n "$stuck" ] && hang_report "$stuck" "$export_dir/hang-$index.txt"
      # Only this group's processes: a pattern match could also end the shell that started this script.
      [ -n "$stuck" ] && kill -KILL "$stuck" 2>/dev/null
      kill -KILL "$runner" 2>/dev/null
      wait "$runner" 2>/dev/null
      rc=124
    else
      wait "$runner"
      rc=$?
    fi
    [ "$rc" != 0 ] && tests_rc=1
    grep -E '^(\[  (PASSED|FAILED|SKIPPED) |.*Failure$|[a-z0-9]+ .*(difference|loss).*[0-9])' "$export_dir/tests-$index.log" | head -n 60
    echo "== tests '$filter': exit $rc, $((SECONDS - start)) s (log: $export_dir/tests-$index.log)"
  done
fi
bash bench/gpu_bench.sh "${bench_args[@]}"
bench_rc=$?
if [ -n "$profile" ]; then
  (. .device-bundle/env.sh && timeout -k 5 90 strata train "bench/gpu/$profile.toml" --profile --set train.steps=8 \
    --set "telemetry.0.path=\"runs/gpu-check-profile.jsonl\"") > "$export_dir/profile.log" 2>&1
  echo "== profile of $profile: exit $? (log: $export_dir/profile.log)"
  grep -A 30 -iE '^(kernel|profile)' "$export_dir/profile.log" | tail -n 30
fi
if [ "$generate" = 1 ]; then
  (. .device-bundle/env.sh && STRATA=strata PYTHON=${PYTHON:-python3} BENCH_WORK=runs/gpu-generate \
    timeout -k 5 240 bash bench/generate_bench.sh 128 2 cuda:0) > "$export_dir/generate.log" 2>&1
  echo "== generate on the GPU against PyTorch: exit $? (log: $export_dir/generate.log)"
  tail -n 12 "$export_dir/generate.log"
fi
echo "== gpu_check: tests exit $tests_rc, benchmark exit $bench_rc"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
