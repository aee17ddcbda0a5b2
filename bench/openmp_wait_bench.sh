#!/usr/bin/env bash
# OpenMP's waiting threads with and without a competing load: the median training step of the
# quickstart and GPT-2 124M shapes (bench/engine_bench.sh's), and greedy decoding on the quickstart
# model (tokens/s), for
#   strata          its default (hosts/strata/openmp_wait_policy.cpp: spin 10000 turns, then sleep)
#   strata-passive  OMP_WAIT_POLICY=passive (sleep at once)
#   strata-spin     libgomp's own default (spin 300000 turns, then sleep): GOMP_SPINCOUNT=300000
#   torch           Debian's PyTorch on its own default (bench/torch_reference.py), training only
# each on an idle machine and beside a load of one busy process per core (shell loops).
#   bash bench/openmp_wait_bench.sh [rounds]     (default 2)
#   bash bench/openmp_wait_bench.sh sweep        one round of the training steps for spin counts
#                                                0, 3000, 10000, 30000, 300000 (variants spin-N)
#   bash bench/openmp_wait_bench.sh startup      what the restart costs: 50 starts of
#                                                `strata --help` with and without it
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-2}
strata=./build/bin/strata
if [ "$mode" = startup ]; then
  starts() {  # mean ms of 50 starts of `strata --help` in this environment
    local begin end
    begin=$(date +%s%N)
    for _ in $(seq 50); do env "$@" "$strata" --help > /dev/null; done
    end=$(date +%s%N)
    echo $(((end - begin) / 50000000))
  }
  starts -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT > /dev/null  # warm the page cache
  echo "ms per start: $(starts -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT) restarted (the default)," \
    "$(starts -u OMP_WAIT_POLICY GOMP_SPINCOUNT=10000) not (the setting given)"
  exit 0
fi
out=runs/bench/openmp_wait && rm -rf "$out" && mkdir -p "$out"
python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin > /dev/null
quickstart_keys=(--set model.n_layer=4 --set model.d_model=128 --set model.n_head=4 --set model.vocab=256
  --set model.seq_len=64 --set train.batch=16 --set train.steps=40)
gpt2_keys=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab=50257
  --set model.seq_len=64 --set train.batch=4 --set 'data.train="runs/bench/gpt2_tokens.bin"' --set train.steps=6)
cores=$(nproc)
load_pids=()
start_load() { for _ in $(seq "$cores"); do sh -c 'while :; do :; done' & load_pids+=($!); done; }
stop_load() { kill "${load_pids[@]}" 2> /dev/null || true; wait "${load_pids[@]}" 2> /dev/null || true; load_pids=(); }
trap stop_load EXIT

median_step() {  # median_step <jsonl>: the run summary's median ms/step
  python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["median_ms"])' "$1"
}
train() {  # train <variant> <shape> <load> <round>
  local variant=$1 shape=$2 load=$3 round=$4 keys
  if [ "$shape" = quickstart ]; then keys=("${quickstart_keys[@]}"); else keys=("${gpt2_keys[@]}"); fi
  local jsonl="$out/$shape-$variant-$load-$round.jsonl"
  case $variant in
    strata) env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$strata" train bench/engine.toml "${keys[@]}" \
      --set "telemetry.0.path=\"$jsonl\"" > /dev/null ;;
    strata-passive) env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive "$strata" train bench/engine.toml "${keys[@]}" \
      --set "telemetry.0.path=\"$jsonl\"" > /dev/null ;;
    strata-spin) env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=300000 "$strata" train bench/engine.toml "${keys[@]}" \
      --set "telemetry.0.path=\"$jsonl\"" > /dev/null ;;
    spin-*) env -u OMP_WAIT_POLICY GOMP_SPINCOUNT="${variant#spin-}" "$strata" train bench/engine.toml "${keys[@]}" \
      --set "telemetry.0.path=\"$jsonl\"" > /dev/null ;;
    torch) env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=2 \
      LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 bench/torch_reference.py \
      "$shape" "$([ "$shape" = quickstart ] && echo 40 || echo 6)" |
      sed -n 's/.*median \([0-9.]*\) ms.*/{"median_ms": \1}/p' > "$jsonl" ;;
  esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$shape" "$variant" "$load" "$round" "$(median_step "$jsonl")" >> "$out/steps.tsv"
}

if [ "$mode" = sweep ]; then
  for load in idle loaded; do
    [ "$load" = loaded ] && start_load
    for shape in quickstart gpt2; do
      for count in 0 3000 10000 30000 300000; do train "spin-$count" "$shape" "$load" 1; done
    done
    [ "$load" = loaded ] && stop_load
  done
  echo "median ms/step, one round: shape, spin count, idle, loaded"
  python3 -c 'import collections, sys
steps = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    shape, variant, load, _, ms = line.split()
    steps[(shape, variant)][load] = float(ms)
for (shape, variant), ms in steps.items():
    print("%-11s %-12s %10.1f %10.1f" % (shape, variant, ms["idle"], ms["loaded"]))' "$out/steps.tsv"
  exit 0
fi
rounds=$mode

# A quickstart-shaped checkpoint to decode from (30 steps are enough: the speed does not depend on
# the weights).
sed -e '/^\[\[telemetry\]\]/,$d' -e "s#runs/quickstart/checkpoints#$out/ckpt#" examples/quickstart.toml > "$out/quick.toml"
"$strata" train "$out/quick.toml" --set train.steps=30 --set train.eval_every=0 > /dev/null
decode() {  # decode <variant> <load> <round>: decode tokens/s of 128 new tokens
  local variant=$1 load=$2 round=$3 setting=()
  [ "$variant" = strata-spin ] && setting=(GOMP_SPINCOUNT=300000)
  [ "$variant" = strata-passive ] && setting=(OMP_WAIT_POLICY=passive)
  local speed
  speed=$(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "${setting[@]}" "$strata" generate "$out/quick.toml" \
    --checkpoint "$out/ckpt" --prompt "In the beginning" --max-new-tokens 128 2>&1 |
    sed -n 's/.*decode[^0-9]*\([0-9.]*\) tokens\/s.*/\1/p' | tail -1)
  printf '%s\t%s\t%s\t%s\n' "$variant" "$load" "$round" "$speed" >> "$out/decode.tsv"
}

for round in $(seq "$rounds"); do
  for load in idle loaded; do
    [ "$load" = loaded ] && start_load
    for shape in quickstart gpt2; do
      for variant in strata strata-passive strata-spin torch; do train "$variant" "$shape" "$load" "$round"; done
    done
    for variant in strata strata-passive strata-spin; do decode "$variant" "$load" "$round"; done
    [ "$load" = loaded ] && stop_load
  done
done
python3 - "$out" <<'EOF'
import collections, statistics, sys
out = sys.argv[1]
steps = collections.defaultdict(list)
for line in open(out + "/steps.tsv"):
    shape, variant, load, _, ms = line.split()
    steps[(shape, variant, load)].append(float(ms))
print("median ms/step over the rounds     idle     loaded   loaded/idle")
for shape in ("quickstart", "gpt2"):
    for variant in ("strata", "strata-passive", "strata-spin", "torch"):
        idle, loaded = (statistics.median(steps[(shape, variant, l)]) for l in ("idle", "loaded"))
        print("%-11s %-12s %14.1f %10.1f %10.2fx" % (shape, variant, idle, loaded, loaded / idle))
decode = collections.defaultdict(list)
for line in open(out + "/decode.tsv"):
    variant, load, _, speed = line.split()
    decode[(variant, load)].append(float(speed))
print("decode tokens/s (quickstart model)    idle     loaded")
for variant in ("strata", "strata-passive", "strata-spin"):
    print("%-24s %14.1f %10.1f" % (variant, statistics.median(decode[(variant, "idle")]),
                                     statistics.median(decode[(variant, "loaded")])))
EOF
