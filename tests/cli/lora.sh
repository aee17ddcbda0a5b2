#!/usr/bin/env bash
# LoRA through the CLI (examples/lora.toml): fine-tune a trained quickstart base, evaluate the
# adapter checkpoint, export the merged Hugging Face file and evaluate it without the plugin (the
# same loss), the same on an NF4 base (examples/qlora.toml), and refuse bad input with exit 2: a target the family lacks, rank 0, and adapters
# loaded onto a different base.
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
small=(--set train.eval_batches=4 --set train.eval_every=0)
"$strata" train examples/quickstart.toml --set train.steps=30 "${small[@]}" \
  --set "checkpoint.dir=\"$work/base\"" --set "telemetry.1.path=\"$work/base.jsonl\"" > "$work/base.log" 2>&1 ||
  { cat "$work/base.log"; exit 1; }
lora=(examples/lora.toml --set "train.init_from=\"$work/base\"" "${small[@]}")
"$strata" train "${lora[@]}" --set train.steps=20 --set "checkpoint.dir=\"$work/lora\"" > "$work/lora.log" 2>&1 ||
  { cat "$work/lora.log"; exit 1; }
adapted=$("$strata" eval "${lora[@]}" --checkpoint "$work/lora" 2>/dev/null | tail -n 1)
"$strata" export "${lora[@]}" --checkpoint "$work/lora" --merge "$work/merged.safetensors" | tee "$work/export.txt"
grep -q "(16 with adapters folded in)" "$work/export.txt" || { echo "expected 16 merged matrices"; exit 1; }
merged=$("$strata" eval examples/quickstart.toml "${small[@]}" --checkpoint "$work/merged.safetensors" | tail -n 1)
base=$("$strata" eval examples/quickstart.toml "${small[@]}" --checkpoint "$work/base" | tail -n 1)
echo "base: $base   adapted: $adapted   merged file: $merged"
python3 - "$adapted" "$merged" "$base" <<'PY'
import sys
adapted, merged, base = (float(a.split("=")[1]) for a in sys.argv[1:])
assert abs(adapted - merged) < 1e-5, (adapted, merged)
assert adapted != base, "the adapters changed nothing"
PY
# The same as a Hugging Face directory: the merged values, bit for bit, evaluated through [model] from.
"$strata" export "${lora[@]}" --checkpoint "$work/lora" --hf "$work/merged-hf" | tee "$work/export-hf.txt"
grep -q "(16 with adapters folded in) in 1 shard" "$work/export-hf.txt" || { echo "expected 16 merged matrices"; exit 1; }
/usr/bin/python3 tests/hf/hf_directory.py check "$work/merged-hf" "$work/merged.safetensors" F32
from_hf=$("$strata" eval examples/quickstart.toml "${small[@]}" --set "model.from=\"$work/merged-hf\"" \
  --checkpoint "$work/merged-hf" | tail -n 1)
[ "$from_hf" = "$merged" ] || { echo "export --hf: $from_hf, the merged file: $merged"; exit 1; }

# QLoRA (examples/qlora.toml): the same adapters on the base stored as NF4; the merged directory
# holds the dequantized base with the adapters folded in, and evaluates as the adapted model.
qlora=(examples/qlora.toml --set "train.init_from=\"$work/base\"" "${small[@]}")
"$strata" train "${qlora[@]}" --set train.steps=20 --set "checkpoint.dir=\"$work/qlora\"" > "$work/qlora.log" 2>&1 ||
  { cat "$work/qlora.log"; exit 1; }
q_adapted=$("$strata" eval "${qlora[@]}" --checkpoint "$work/qlora" 2>/dev/null | tail -n 1)
"$strata" export "${qlora[@]}" --checkpoint "$work/qlora" --hf "$work/qlora-hf" > /dev/null
q_merged=$("$strata" eval examples/quickstart.toml "${small[@]}" --set "model.from=\"$work/qlora-hf\"" \
  --checkpoint "$work/qlora-hf" | tail -n 1)
echo "qlora: adapted $q_adapted   merged directory: $q_merged"
python3 - "$q_adapted" "$q_merged" "$base" "$adapted" <<'PY'
import sys
q_adapted, q_merged, base, adapted = (float(a.split("=")[1]) for a in sys.argv[1:])
assert abs(q_adapted - q_merged) < 1e-4, (q_adapted, q_merged)
assert q_adapted < base, "QLoRA did not lower the loss of the base"
assert abs(q_adapted - adapted) < 0.05 * adapted, "QLoRA strays from LoRA on the f32 base"
PY

expect_refusal() {  # message, then the command
  local message=$1
  shift
  set +e
  "$@" > "$work/refusal.txt" 2>&1
  local code=$?
  set -e
  [ "$code" = 2 ] || { echo "exit $code, not 2, for: $*"; cat "$work/refusal.txt"; exit 1; }
  grep -qF "$message" "$work/refusal.txt" || { echo "missing '$message' in:"; cat "$work/refusal.txt"; exit 1; }
}
# The merged file may not land on what the export reads, nor replace a device; nothing is written.
step=$(cat "$work/lora/latest")
cp "$work/lora/$step/model.safetensors" "$work/adapters.before"
expect_refusal "is inside --checkpoint $work/lora, which the export reads" \
  "$strata" export "${lora[@]}" --checkpoint "$work/lora" --merge "$work/lora/$step/model.safetensors"
cmp -s "$work/adapters.before" "$work/lora/$step/model.safetensors" || { echo "the export overwrote its input"; exit 1; }
expect_refusal "/dev/full: is not a regular file (a device, pipe or socket)" \
  "$strata" export "${lora[@]}" --checkpoint "$work/lora" --merge /dev/full
[ -c /dev/full ] || { echo "/dev/full is no longer a character device"; exit 1; }
expect_refusal "targets: 'q' is not a matrix of a gpt2 block" "$strata" validate "${lora[@]}" --set 'strategy.0.targets=["q"]'
expect_refusal "rank" "$strata" validate "${lora[@]}" --set strategy.0.rank=0
"$strata" train examples/quickstart.toml --set train.steps=3 --set train.seed=7 "${small[@]}" \
  --set "checkpoint.dir=\"$work/other\"" --set "telemetry.1.path=\"$work/other.jsonl\"" > /dev/null 2>&1
expect_refusal "belong to a different base" "$strata" eval examples/lora.toml "${small[@]}" \
  --set "train.init_from=\"$work/other\"" --checkpoint "$work/lora"
echo "lora: ok"
