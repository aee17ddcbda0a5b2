#!/usr/bin/env bash
# One call on the GPU machine: the CUDA tests, then the GPU benchmark. Run from the repository
# root there, with the bundle scripts/device-bundle.sh made from a CUDA build carried beside it:
#   bash bench/gpu_check.sh [--export DIR] [--tests "FILTER:SECONDS ..."] [--no-tests] [gpu_bench.sh's arguments...]
#   --export: where the test logs and any hang report go, and the benchmark's table and logs under bench/ (e.g. "$OUT")
#   --tests: groups of gtest filters, each run with its own time limit (default: the flash plugin's
#            end-to-end test alone, then every other CUDA test and the plugin probe)
# A group that outlives its limit is stopped, after a report of where its processes stood (their
# threads' kernel stacks, and cuda-gdb's backtraces) is written to DIR/hang-N.txt: one stuck test
# costs its limit, not the whole call. The console gets each group's failures and summary, so the
# end of the output holds the benchmark's table.
set -uo pipefail
export_dir=runs/gpu-check run_tests=1 bench_args=()
groups='CudaTraining.FlashAttentionPluginMatchesTheCpu:75 BackendConformance*:Cuda*:Decoding.Cuda*:PluginProbe*:-CudaTraining.FlashAttentionPluginMatchesTheCpu:120'
while [ $# -gt 0 ]; do
  case $1 in
    --tests) groups=$2; shift 2 ;;
    --no-tests) run_tests=0; shift ;;
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
echo "== gpu_check: tests exit $tests_rc, benchmark exit $bench_rc"
[ "$tests_rc" = 0 ] && [ "$bench_rc" = 0 ]
