#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-14, ASan + UBSan) in build-fuzz and runs each one for RUNS
# executions (default 1000000), one after the other, from its checked-in seed corpus; prints
# libFuzzer's final line and the wall time of each. Inputs that found new coverage go to
# build-fuzz/corpus/<target>, crashes to build-fuzz/findings/. See docs/fuzzing.md.
#   bash scripts/fuzz.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1000000}

source scripts/install-packages.sh
install_missing clang-14 libclang-rt-14-dev llvm-14 cmake ninja-build libtomlplusplus-dev nlohmann-json3-dev libboost-dev \
  libxxhash-dev pkg-config libpcre2-dev libsentencepiece-dev libicu-dev

cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=Debug -DSTRATA_FUZZ=ON \
  -DSTRATA_WERROR=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)"

# Symbolized stacks in reports; leaks are findings too (detect_leaks is on by default).
export ASAN_OPTIONS=${ASAN_OPTIONS:-symbolize=1:external_symbolizer_path=/usr/lib/llvm-14/bin/llvm-symbolizer}
mkdir -p build-fuzz/findings
for target in manifest safetensors token_file hf_config hf_index tokenizer_json sentencepiece_model; do
  mkdir -p "build-fuzz/corpus/$target"
  dictionary=()
  [ -f "fuzz/$target.dict" ] && dictionary=("-dict=fuzz/$target.dict")
  echo "== fuzz_$target: $runs runs"
  start=$(date +%s%N)
  status=0
  # The first corpus directory receives new inputs; the checked-in seeds are only read.
  build-fuzz/fuzz/fuzz_"$target" -runs="$runs" -seed=1 -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/findings/$target-" "${dictionary[@]}" \
    "build-fuzz/corpus/$target" "fuzz/corpus/$target" >"build-fuzz/fuzz_$target.log" 2>&1 || status=$?
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  grep -E '^#[0-9]+[[:space:]]+DONE|^Done [0-9]+ runs|^stat::(number_of_executed_units|peak_rss_mb)' "build-fuzz/fuzz_$target.log" || true
  echo "fuzz_$target: exit $status, $((elapsed_ms / 1000)).$((elapsed_ms % 1000 / 100)) s wall"
  if [ "$status" -ne 0 ]; then
    tail -n 60 "build-fuzz/fuzz_$target.log"
    echo "fuzz_$target found a problem: the log is build-fuzz/fuzz_$target.log, the input in build-fuzz/findings/"
    exit 1
  fi
done
