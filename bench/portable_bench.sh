#!/usr/bin/env bash
# Portable over native (run by hand): median ms/step of two builds of the same sources, in
# alternating rounds, on the quickstart model (60 steps) and GPT-2 124M (T 64, B 4, 6 steps).
#   cmake -S . -B build-native -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_NATIVE=ON && cmake --build build-native
#   bash bench/portable_bench.sh build/bin/strata build-native/bin/strata [rounds]
set -euo pipefail
portable=$1
native=$2
rounds=${3:-3}
out=runs/bench && mkdir -p "$out"
python3 bench/make_gpt2_tokens.py "$out/gpt2_tokens.bin"
quickstart=(--set train.steps=60)
gpt2=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab=50257
  --set model.seq_len=64 --set train.batch=4 --set "data.train=\"$out/gpt2_tokens.bin\"" --set train.steps=6
  --set train.eval_batches=1 --set 'device.memory_limit="8GiB"')
median_ms() {  # median_ms BINARY ARGS...: one run, its summary's median ms/step
  local binary=$1; shift
  rm -rf "$out/portable_ckpt"
  "$binary" train examples/quickstart.toml "$@" --set train.eval_every=0 \
    --set "checkpoint.dir=\"$out/portable_ckpt\"" --metrics "$out/portable.jsonl" > /dev/null 2>&1
  python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["median_ms"])' "$out/portable.jsonl"
}
for round in $(seq 1 "$rounds"); do
  for shape in quickstart gpt2; do
    declare -n args=$shape
    p=$(median_ms "$portable" "${args[@]}")
    n=$(median_ms "$native" "${args[@]}")
    python3 -c 'import sys; p, n = map(float, sys.argv[3:])
print("round %s %-10s portable %.2f native %.2f ratio %.2f" % (sys.argv[1], sys.argv[2], p, n, p / n))' \
      "$round" "$shape" "$p" "$n"
  done
done
