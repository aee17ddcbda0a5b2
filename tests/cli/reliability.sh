#!/usr/bin/env bash
# Bad inputs and faults beyond exit_codes.sh: each must get its exit code (2 invalid input, 1 a
# failed run) and a message naming the file, key or value, and must lose nothing already saved.
# With RELIABILITY_TABLE set, each case adds a row to docs/reliability.md's table.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"

# The manifest.
printf '[model\nn_layer = 2\n' > "$work/syntax.toml"
fault "malformed TOML" 2 "syntax.toml:1:7: malformed TOML" -- "$strata" validate "$work/syntax.toml"
fault "wrong type" 2 "steps must be an integer, not a string" -- "$strata" validate $q --set train.steps='"ten"'
fault "value out of range" 2 "steps = 0 is out of range [1, inf]" -- "$strata" validate $q --set train.steps=0
fault "negative learning rate" 2 "lr = -1 is out of range [0, 10]" -- "$strata" validate $q --set train.lr=-1
fault "micro_batches does not divide batch" 2 "micro_batches = 3 must divide batch = 16" -- \
  "$strata" validate $q --set train.micro_batches=3
fault "n_head does not divide d_model" 2 "n_head = 5 must divide d_model = 128" -- \
  "$strata" validate $q --set model.n_head=5
{ echo "modle = 1"; cat $q; } > "$work/top.toml"
fault "misspelt top-level key" 2 "unknown top-level key 'modle'" -- "$strata" validate "$work/top.toml"
fault "unknown top-level table through --set" 2 "unknown top-level key 'nosuch'" -- \
  "$strata" validate $q --set nosuch.key=1
fault "--set without a value" 2 "expected key.path=value" -- "$strata" validate $q --set train.steps
fault "negative --stop-after" 2 "--stop-after -1: must be a step of the schedule, 1 or more" -- \
  "$strata" train $q --stop-after -1
fault "memory_limit that is not a size" 2 "memory_limit = \"lots\" is not a size" -- \
  "$strata" validate $q --set device.memory_limit='"lots"'
fault "unknown device kind" 2 "kind = \"tpu\" must be \"cpu\" or \"cuda:N\"" -- "$strata" validate $q --set device.kind='"tpu"'
# cuda:7: no such device here (none visible, 1 visible, or no CUDA backend in this build).
fault "a device this machine or build lacks" 2 "[device] kind = \"cuda:7\": " -- \
  "$strata" train $q --set device.kind='"cuda:7"' --set checkpoint.dir=\"$work/no_backend\"
[ ! -e "$work/no_backend" ] || fail "a refused run created its checkpoint directory"
fault "val_fraction out of range" 2 "val_fraction = 0.9 is out of range" -- "$strata" validate $q --set data.val_fraction=0.9
fault "negative keep_last" 2 "keep_last = -1 is out of range" -- "$strata" validate $q --set checkpoint.keep_last=-1
fault "plugin_path is a file" 2 "is not a directory" -- "$strata" validate $q --set plugin_path=\"$work/top.toml\"
fault "manifest is a directory" 2 "not a regular file (a manifest is a TOML file)" -- "$strata" validate "$work"
fault "unknown command-line option" 2 "unrecognised option '--stpes'" -- "$strata" train $q --stpes 3
fault "eval without --checkpoint" 2 "'--checkpoint' is required" -- "$strata" eval $q

# Plugins and their tables.
{ cat $q; printf '[[strategy]]\nplugin = "chekpoint"\n'; } > "$work/strategy.toml"
fault "misspelt strategy plugin" 2 "unknown strategy plugin 'chekpoint'; available: checkpoint, lora, offload" -- \
  "$strata" validate "$work/strategy.toml"
fault "unknown optimizer" 2 "unknown optimizer plugin 'adamv'" -- "$strata" validate $q --set optimizer.plugin=adamv
fault "unknown precision" 2 "unknown precision plugin 'fp8'" -- "$strata" validate $q --set precision.plugin=fp8
fault "plugin key of the wrong shape" 2 "betas must be two numbers in [0, 1)" -- \
  "$strata" validate $q --set optimizer.betas='[0.9]'
{ cat $q; printf '[[strategy]]\nplugin = "checkpoint"\nlayers = [0, 9]\n'; } > "$work/layers.toml"
fault "checkpointed layer outside the model" 2 "layers holds 9, outside the model's layers [0, 3]" -- \
  "$strata" validate "$work/layers.toml"
{ cat $q; printf '[[strategy]]\nplugin = "offload"\noptimizer_state = "host"\nmax_resident_layers = 1\nprefetch = 1\n'; } \
  > "$work/offload.toml"
fault "offload prefetch beyond its resident layers" 2 "prefetch = 1 needs max_resident_layers >= 2" -- \
  "$strata" validate "$work/offload.toml"
fault "unknown attention kernel" 2 "attention = \"flsh\" is not a known implementation; available: fast, reference, flash" -- \
  "$strata" validate $q --set kernels.attention='"flsh"'
fault "--metrics file that cannot be created" 2 "--metrics /proc/none/x.jsonl: cannot be created" -- \
  "$strata" train $q --set train.steps=1 --set checkpoint.dir=\"$work/metrics_ckpt\" --metrics /proc/none/x.jsonl
[ ! -e "$work/metrics_ckpt" ] || fail "a refused run created its checkpoint directory"

# Data.
: > "$work/empty.txt"
fault "empty text corpus" 2 "empty.txt: 0 training tokens, fewer than one batch needs" -- \
  "$strata" train $q --set data.train=\"$work/empty.txt\"
python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 1234, 1, 10, *[0] * 253) + bytes(20))' "$work/magic.bin"
fault "token file with a wrong magic number" 2 "wrong magic number 1234" -- \
  "$strata" train $q --set data.train=\"$work/magic.bin\"
python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 3, 10, *[0] * 253) + bytes(40))' "$work/v3.bin"
fault "token file of an unknown version" 2 "unsupported token file version 3" -- \
  "$strata" train $q --set data.train=\"$work/v3.bin\"
head -c 100 "$work/magic.bin" > "$work/header.bin"
fault "token file shorter than its header" 2 "header.bin: truncated token file" -- "$strata" train $q --set data.train=\"$work/header.bin\"
fault "validation file missing" 2 "nope.txt: no such file ([data] val)" -- \
  "$strata" validate $q --set data.val=\"$work/nope.txt\"
fault "/dev/zero as data" 2 "not a regular file" -- "$strata" validate $q --set data.train='"/dev/zero"'

# Checkpoints: one real save, then damaged copies of it. No failed command may change the
# original or a damaged copy (each is hashed before its command and at the end).
digest() { find "$1" -type f -exec sha256sum {} + | sort; }
small=(--set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4 --set train.steps=2
  --set telemetry.1.path=\"$work/steps.jsonl\")
"$strata" train $q "${small[@]}" --set checkpoint.dir=\"$work/ckpt\" > /dev/null 2>&1 || fail "could not train"
saved=$(digest "$work/ckpt")
step=$work/ckpt/$(cat "$work/ckpt/latest")
damaged() {  # damaged NAME: a copy of the checkpoint to break (its digest is taken by `broken`)
  rm -rf "$work/$1" && cp -r "$work/ckpt" "$work/$1" && echo "$work/$1/$(cat "$work/ckpt/latest")"
}
declare -A broken_digest
broken() { broken_digest[$1]=$(digest "$work/$1"); }  # broken NAME: after damaging, before the command
eval_small=(--set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4)
fault "checkpoint of another depth" 2 "is not a parameter of this gpt2 model" -- "$strata" eval $q --set model.n_layer=1 \
  --set model.d_model=32 --set model.seq_len=16 --checkpoint "$step"
fault "checkpoint with fewer layers than the model" 2 "missing tensor 'h.2." -- "$strata" eval $q \
  --set model.n_layer=3 --set model.d_model=32 --set model.seq_len=16 --checkpoint "$step"
fault "checkpoint of another width" 2 "has shape [256, 32], the model expects [256, 64]" -- "$strata" eval $q --set model.n_layer=2 \
  --set model.d_model=64 --set model.seq_len=16 --checkpoint "$step"
d=$(damaged truncated); head -c 5000 "$step/model.safetensors" > "$d/model.safetensors"; broken truncated
fault "truncated safetensors" 2 "truncated or corrupt: tensor" -- "$strata" eval $q "${eval_small[@]}" --checkpoint "$d"
d=$(damaged huge_header)
python3 -c 'import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[:8] = (1 << 62).to_bytes(8, "little"); open(p, "wb").write(b)' \
  "$d/model.safetensors"
broken huge_header
fault "safetensors header length of 2^62" 2 "header length 4611686018427387904 exceeds the file" -- "$strata" eval $q "${eval_small[@]}" --checkpoint "$d"
d=$(damaged overlap)
python3 -c 'import json, sys
p = sys.argv[1]; b = open(p, "rb").read(); n = int.from_bytes(b[:8], "little"); h = json.loads(b[8:8 + n])
size = lambda k: h[k]["data_offsets"][1] - h[k]["data_offsets"][0]
names = [k for k in h if k != "__metadata__"]
a, b2 = next((x, y) for x in names for y in names
             if h[x]["data_offsets"][0] < h[y]["data_offsets"][0] and size(x) == size(y))
h[b2]["data_offsets"] = h[a]["data_offsets"]
t = json.dumps(h, separators=(",", ":")).encode(); assert len(t) <= n
open(p, "wb").write(b[:8] + t + b" " * (n - len(t)) + b[8 + n:])' "$d/model.safetensors"
broken overlap
fault "safetensors with overlapping tensors" 2 "overlapping byte ranges" -- \
  "$strata" eval $q "${eval_small[@]}" --checkpoint "$d"
d=$(damaged bad_json); printf '{"step": 2,' > "$d/trainer.json"; broken bad_json
fault "malformed trainer.json" 2 "trainer.json: corrupt" -- "$strata" train $q "${small[@]}" --set train.steps=3 \
  --set checkpoint.dir=\"$work/bad_json\" --resume
d=$(damaged dangling); echo "step_99999999" > "$work/dangling/latest"; broken dangling
fault "'latest' names a missing save" 2 "step_99999999" -- "$strata" train $q "${small[@]}" --set train.steps=3 \
  --set checkpoint.dir=\"$work/dangling\" --resume
mkdir -p "$work/empty_ckpt"
fault "--resume from an empty directory" 2 "not a checkpoint directory" -- "$strata" train $q "${small[@]}" \
  --set checkpoint.dir=\"$work/empty_ckpt\" --resume
fault "resume with another model shape" 2 "saved for model" -- "$strata" train $q "${small[@]}" --set model.d_model=64 \
  --set train.steps=3 --set checkpoint.dir=\"$work/ckpt\" --resume
[ "$(digest "$work/ckpt")" = "$saved" ] || fail "a failed command changed the checkpoint"
for name in "${!broken_digest[@]}"; do
  [ "$(digest "$work/$name")" = "${broken_digest[$name]}" ] || fail "a failed command changed the checkpoint $name"
done
echo "every bad input refused, the original checkpoint untouched"
