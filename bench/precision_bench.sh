#!/usr/bin/env bash
# Storage-precision benchmark (run by hand): bf16 storage against f32, through `strata ab`, on the
# CPU backend, for GPT-2 124M (n_layer 12, d_model 768, n_head 12, vocab 50257), T 256, B 4:
#   f32              no [precision] table (fp32)
#   bf16             weights and activations in bf16, f32 compute, f32 master weights
#   bf16-weights     only the weight matrices in bf16
#   bf16-activations only the saved block activations in bf16
#   bf16+offload     bf16, with the optimizer state (and so the masters) on the host
# Every figure is read from the allocator and the timers by `strata ab`; `strata plan` beside it
# shows the rows (masters, staging) that explain them.
# Usage: bash bench/precision_bench.sh [steps]   (from the repository root, after scripts/setup.sh)
set -euo pipefail
steps=${1:-8}
strata=./build/bin/strata
dir=runs/bench-precision
mkdir -p "$dir"
python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin

precision() { printf '[precision]\nplugin = "bf16"\nweights = "%s"\nactivations = "%s"\n' "$1" "$2"; }
offload='[[strategy]]
plugin = "offload"
optimizer_state = "host"'
cp bench/engine.toml "$dir/f32.toml"
printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$(precision bf16 bf16)" > "$dir/bf16.toml"
printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$(precision bf16 f32)" > "$dir/bf16-weights.toml"
printf '%s\n\n%s\n' "$(cat bench/engine.toml)" "$(precision f32 bf16)" > "$dir/bf16-activations.toml"
printf '%s\n\n%s\n\n%s\n' "$(cat bench/engine.toml)" "$(precision bf16 bf16)" "$offload" > "$dir/bf16+offload.toml"
shape_keys=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.seq_len=256
  --set train.batch=4 --set model.vocab=50257 --set "data.train=\"runs/bench/gpt2_tokens.bin\""
  --set "telemetry.1.every=1")
echo "== GPT-2 124M, T 256, B 4: $steps steps per stack"
"$strata" ab "$dir/f32.toml" "$dir/bf16.toml" "$dir/bf16-weights.toml" "$dir/bf16-activations.toml" \
  "$dir/bf16+offload.toml" --steps "$steps" "${shape_keys[@]}" --out "$dir/runs" --html "$dir/report.html" |
  tee "$dir/table.txt"
"$strata" plan "$dir/bf16.toml" "${shape_keys[@]}" > "$dir/plan-bf16.txt"
echo "(plan of the bf16 stack: $dir/plan-bf16.txt)"
