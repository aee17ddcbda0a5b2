#!/usr/bin/env bash
# Activation offload against checkpointing (run by hand), through `strata ab`, on the CPU backend:
# no strategy, block checkpointing, selective checkpointing, and offload's activations = "host",
# on two shapes:
#   quickstart:  examples/quickstart.toml's model (4 blocks, d_model 128, T 64, B 16)
#   gpt2-1024:   GPT-2 124M (12 blocks, d_model 768, vocab 50257) at T 1024, B 2
# Device peak by category, host memory, step time and losses all come from `strata ab`'s table
# (the allocator's figures and the step timers). Offload is bitwise neutral, so its verdict must
# read `identical`.
# Usage: bash bench/activation_offload_bench.sh [quickstart_steps] [gpt2_steps]   (repository root)
set -euo pipefail
quick_steps=${1:-20}
gpt2_steps=${2:-3}
strata=./build/bin/strata
out=runs/bench-activation-offload
mkdir -p "$out"

checkpoint_block='[[strategy]]
plugin = "checkpoint"
every = 1'
checkpoint_selective='[[strategy]]
plugin = "checkpoint"
mode = "selective"'
offload_activations='[[strategy]]
plugin = "offload"
activations = "host"'

stacks() {  # base manifest, folder
  local base=$1 dir=$2
  mkdir -p "$dir"
  cp "$base" "$dir/none.toml"
  printf '%s\n\n%s\n' "$(cat "$base")" "$checkpoint_block" > "$dir/checkpoint.toml"
  printf '%s\n\n%s\n' "$(cat "$base")" "$checkpoint_selective" > "$dir/selective.toml"
  printf '%s\n\n%s\n' "$(cat "$base")" "$offload_activations" > "$dir/offload-activations.toml"
}

# The quickstart's model and data, without its checkpoint directory and telemetry.
sed -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$out/quickstart-base.toml"
stacks "$out/quickstart-base.toml" "$out/quickstart"
echo "== quickstart: $quick_steps steps per stack"
"$strata" ab "$out"/quickstart/{none,checkpoint,selective,offload-activations}.toml --steps "$quick_steps" \
  --set train.eval_every=0 --out "$out/quickstart/runs" | tee "$out/quickstart/table.txt"

python3 bench/make_gpt2_tokens.py runs/bench/gpt2_tokens.bin
stacks bench/engine.toml "$out/gpt2-1024"
echo "== gpt2-1024: $gpt2_steps steps per stack"
"$strata" ab "$out"/gpt2-1024/{none,checkpoint,selective,offload-activations}.toml --steps "$gpt2_steps" \
  --set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab=50257 \
  --set model.seq_len=1024 --set train.batch=2 --set 'data.train="runs/bench/gpt2_tokens.bin"' \
  --out "$out/gpt2-1024/runs" | tee "$out/gpt2-1024/table.txt"
