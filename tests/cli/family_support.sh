#!/usr/bin/env bash
# The support matrix of docs/architecture.md ("Models"), run: every family (gpt2, llama, qwen2,
# mistral with a window of 5, gemma with heads 12 wide over a d_model of 32)
# trains a few steps under every precision plugin, 8-bit AdamW, each checkpoint mode, offload and
# streaming, flash attention, sparse layers and LoRA (on the family's own targets), and each
# checkpoint evaluates and exports. The memory strategies must leave the losses bitwise those of
# the plain run; every other run must end finite.
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"

model_keys() {  # family
  case $1 in
    gpt2) printf 'arch = "gpt2"\n' ;;
    llama) printf 'arch = "llama"\nn_kv_head = 2\nd_ff = 88\nrope_theta = 10000.0\nnorm_eps = 1e-5\n' ;;
    qwen2) printf 'arch = "qwen2"\nn_kv_head = 2\nd_ff = 88\nrope_theta = 1000000.0\nnorm_eps = 1e-6\n' ;;
    mistral) printf 'arch = "mistral"\nn_kv_head = 2\nd_ff = 88\nsliding_window = 5\n' ;;
    gemma) printf 'arch = "gemma"\nn_kv_head = 2\nd_ff = 88\nhead_dim = 12\n' ;;
  esac
}

lora_targets() {  # family
  case $1 in
    gpt2) echo '["qkv", "fc_proj"]' ;;
    *) echo '["q", "v", "down"]' ;;
  esac
}

# losses FILE: the per-step training losses of a --metrics file, one per line, as printed.
losses() { grep -o '"loss":[^,]*' "$1"; }

for family in gpt2 llama qwen2 mistral gemma; do
  dir="$work/$family"
  mkdir -p "$dir"
  cat > "$dir/m.toml" <<TOML
[model]
$(model_keys $family)
n_layer = 3
n_head = 4
d_model = 32
vocab = 256
seq_len = 16
[data]
train = "data/kjv.txt"
[train]
steps = 4
batch = 4
micro_batches = 2
lr = 1e-3
threads = 2
eval_every = 0
[device]
memory_limit = "64MiB"
[optimizer]
plugin = "adamw"
[checkpoint]
dir = "$dir/ckpt"
TOML
  run() {  # name, then --set arguments
    local name=$1; shift
    "$strata" train "$dir/m.toml" --set "checkpoint.dir=\"$dir/ckpt-$name\"" "$@" --metrics "$dir/$name.jsonl" \
      > "$dir/$name.log" 2>&1 || { echo "FAIL: $family $name"; cat "$dir/$name.log"; exit 1; }
    losses "$dir/$name.jsonl" > "$dir/$name.losses"
    grep -qiE 'nan|inf' "$dir/$name.losses" && { echo "FAIL: $family $name: a loss is not finite"; exit 1; }
    echo "ok: $family $name ($(tail -n 1 "$dir/$name.losses"))"
  }
  neutral() {  # reference, name, then --set arguments: bitwise the reference run's losses
    local reference=$1; shift
    run "$@"
    cmp -s "$dir/$reference.losses" "$dir/$1.losses" || { echo "FAIL: $family $1 changed the losses"; exit 1; }
  }
  strategy() { echo "strategy=[{plugin=\"$1\"$2}]"; }
  run plain
  for mode in block selective cheap; do
    neutral plain "checkpoint-$mode" --set "$(strategy checkpoint ", mode=\"$mode\"")"
  done
  neutral plain offload --set "$(strategy offload ', optimizer_state="host"')"
  neutral plain stream --set "$(strategy offload ', optimizer_state="host", max_resident_layers=2, prefetch=1')"
  # bf16 activations: staged in f32 and rounded once; recomputation must give the stored values.
  bf16=(--set 'precision.plugin="bf16"' --set 'precision.activations="bf16"')
  run bf16-activations "${bf16[@]}"
  for mode in block selective cheap; do
    neutral bf16-activations "bf16-checkpoint-$mode" "${bf16[@]}" --set "$(strategy checkpoint ", mode=\"$mode\"")"
  done
  run flash --set 'kernels.attention="flash"'
  for precision in bf16 fp16 int8; do run "$precision" --set "precision.plugin=\"$precision\""; done
  run adamw8bit --set 'optimizer.plugin="adamw8bit"'
  # Block 0 frozen: its tensors are left out of the checkpoint, which must still read as this family's.
  sparse=(--set "$(strategy sparse_layers ', train_first=0, train_last=1, middle="freeze"')")
  run sparse "${sparse[@]}"
  "$strata" train "$dir/m.toml" "${sparse[@]}" --set "checkpoint.dir=\"$dir/ckpt-sparse\"" --set train.steps=5 \
    --resume > "$dir/sparse-resume.log" 2>&1 || { echo "FAIL: $family sparse resume"; cat "$dir/sparse-resume.log"; exit 1; }
  run lora --set "$(strategy lora ", rank=4, targets=$(lora_targets $family)")" \
    --set "train.init_from=\"$dir/ckpt-plain\""
  "$strata" eval "$dir/m.toml" --checkpoint "$dir/ckpt-plain" | tail -n 1 | grep -q '^eval_loss=' ||
    { echo "FAIL: $family eval"; exit 1; }
  "$strata" export "$dir/m.toml" --set "$(strategy lora ", rank=4, targets=$(lora_targets $family)")" \
    --set "train.init_from=\"$dir/ckpt-plain\"" --checkpoint "$dir/ckpt-lora" --merge "$dir/merged.safetensors" > "$dir/export.log" ||
    { echo "FAIL: $family export"; cat "$dir/export.log"; exit 1; }
  echo "ok: $family eval, export"
done
echo "family support: every family ran every technique"
