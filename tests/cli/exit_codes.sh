#!/usr/bin/env bash
# Exit codes as documented: 0 success, 1 the run failed, 2 invalid input.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
expect 0 "usage: strata train" -- "$strata" train --help
expect 0 "ok (adamw + fp32" -- "$strata" validate $q
expect 0 "ok (adamw + fp32 + attention:flash" -- "$strata" validate examples/flash-attention.toml
fault "misspelt key through --set" 2 "unknown key 'stpes'" -- "$strata" validate $q --set train.stpes=3
fault "manifest file missing" 2 "no such manifest file" -- "$strata" train "$work/missing.toml"
fault "unknown command" 2 "unknown command" -- "$strata" frobnicate
fault "data.train file missing" 2 "no such file" -- "$strata" train $q --set data.train=\"$work/nothing.txt\"
# A version-2 (uint32) token file whose id 70000 is outside quickstart's vocab of 256.
python3 -c 'import struct, sys
tokens = [1] * 2000; tokens[3] = 70000
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 2, len(tokens), *[0] * 253) + struct.pack("<%dI" % len(tokens), *tokens))' "$work/wide.bin"
fault "token id outside the vocabulary (uint32 file)" 2 "wide.bin: token 70000 at position 3 is outside the model's vocabulary (model.vocab = 256)" -- \
  "$strata" train $q --set data.train=\"$work/wide.bin\"
fault "eval of a directory that holds no checkpoint" 2 "invalid checkpoint" -- "$strata" eval $q --checkpoint "$work"
fault "device memory limit below what the model needs" 1 "memory limit exceeded" -- "$strata" train $q --set device.memory_limit=\"8MiB\" --set train.steps=2
# A device this machine cannot run: no GPU visible (or a build without the CUDA backend) is invalid
# input, refused before anything is written; validate checks the kind the same way.
# (STRATA_CUDA_BUILT comes from CTest; by hand, set it to ON or OFF as the build was configured.)
why_no_cuda="no CUDA device visible"
[ "${STRATA_CUDA_BUILT:-ON}" = ON ] || why_no_cuda="this build has no CUDA backend"
if ! nvidia-smi -L >/dev/null 2>&1; then
  fault "device.kind = cuda:0 where no GPU is visible (train)" 2 "[device] kind = \"cuda:0\": $why_no_cuda" -- \
    "$strata" train $q --set device.kind=\"cuda:0\"
  fault "device.kind = cuda:0 where no GPU is visible (validate)" 2 "[device] kind = \"cuda:0\": $why_no_cuda" -- \
    "$strata" validate $q --set device.kind=\"cuda:0\"
fi
fault "device.kind = cuda:x (not a device number)" 2 'kind = "cuda:x": no such backend' -- \
  "$strata" validate $q --set device.kind=\"cuda:x\"
# SGD at lr 10 with momentum overflows the weights within a few steps: the loss goes non-finite.
cat > "$work/diverge.toml" <<EOF
[model]
n_layer = 2
n_head = 2
d_model = 32
vocab = 256
seq_len = 16
[data]
train = "$PWD/data/kjv.txt"
[train]
steps = 200
batch = 4
lr = 10
[optimizer]
plugin = "sgd"
momentum = 0.9
[[telemetry]]
plugin = "csv"
path = "/dev/null"
EOF
fault "loss non-finite for 8 steps in a row" 1 "non-finite for 8 steps in a row" -- "$strata" train "$work/diverge.toml" \
  --set train.divergence_factor=0
# A finite blow-up: the loss stays above divergence_factor x its best for divergence_steps steps.
fault "finite blow-up: loss above divergence_factor x its best" 1 "x its best" -- "$strata" train "$work/diverge.toml" --set train.divergence_factor=1.5 \
  --set train.divergence_steps=2
fault "divergence_factor in (0, 1]" 2 "must be above 1" -- "$strata" validate $q --set train.divergence_factor=0.5
# Plugin mistakes: a raw throw from a hook is a failed run naming the plugin, hook and layer; a
# declared key the plugin never reads draws a warning; a missing plugin_path is invalid input.
fixtures=$(dirname "$strata")/../tests/fixture_plugins  # the build tree of this strata
{ echo "plugin_path = \"$fixtures\""; cat "$work/diverge.toml"; printf '[[strategy]]\nplugin = "fixture_throwing_hook"\nunused = 1\n'; } \
  > "$work/throwing.toml"
fault "a plugin hook throws" 1 "'fixture_throwing_hook' threw in before_forward (layer 1, step 1): fixture hook exploded" -- \
  "$strata" train "$work/throwing.toml"
# A plugin that crashes (a segfault in its own code) cannot be caught; it is named as the process goes
# down, which the signal still ends (exit 139, 128 + SIGSEGV). Under AddressSanitizer the signal goes
# on to the sanitizer's own handler, as it would have without the report, which ends the process
# with the sanitizer's exit code (86 in scripts/test-sanitized.sh).
segfault_exit=139
[[ "${ASAN_OPTIONS:-}" == *exitcode=86* ]] && segfault_exit=86
fault "a plugin segfaults in a hook" "$segfault_exit" "strata: [[strategy]] #1 'fixture_throwing_hook' crashed in before_forward (layer 1, step 1): SIGSEGV" -- \
  "$strata" train "$work/throwing.toml" --set strategy.0.kind=\"segfault\"
expect 0 "sets key 'unused', which the plugin declares but did not read" -- "$strata" validate "$work/throwing.toml"
expect 0 "warning: declares key 'unused' but does not read it" -- env STRATA_PLUGIN_PATH="$fixtures" "$strata" plugins
fault "plugin_path names no directory" 2 "is not a directory" -- "$strata" validate $q --set plugin_path=\"$work/nowhere\"
# A user's library named like a shipped plugin (a copy of adamw's) does not replace it: it is
# refused, named, in validate and train, and the shipped adamw serves.
mkdir -p "$work/shadow" && cp "$(dirname "$strata")/../plugins/libstrata-adamw.so" "$work/shadow/libmy-adamw.so"
shadowed="libmy-adamw.so was not loaded: it provides optimizer 'adamw', which Strata ships"
fault "a user's library named like a shipped plugin" 0 "$shadowed" -- env STRATA_PLUGIN_PATH="$work/shadow" "$strata" validate $q
expect 0 "$shadowed" -- env STRATA_PLUGIN_PATH="$work/shadow" "$strata" train $q --set train.steps=1
# Model-family keys and shapes.
fault "LLaMA key in a GPT-2 manifest" 2 "n_kv_head needs arch = \"llama\", \"qwen2\", \"mistral\" or \"gemma\"" -- \
  "$strata" validate $q --set model.n_kv_head=2
expect 2 "sliding_window needs arch = \"mistral\" (this model is arch = \"llama\")" -- \
  "$strata" validate examples/llama.toml --set model.sliding_window=4
expect 0 "" -- "$strata" validate examples/llama.toml --set model.arch=\"mistral\" --set model.sliding_window=4
fault "n_kv_head does not divide n_head" 2 "must divide n_head = 4" -- "$strata" validate examples/llama.toml --set model.n_kv_head=3
fault "odd head dimension with RoPE" 2 "is odd: RoPE rotates pairs" -- "$strata" validate examples/llama.toml --set model.n_head=8 \
  --set model.n_kv_head=2 --set model.d_model=120
fault "misspelt LLaMA key" 2 "unknown key 'rope_thetta'" -- "$strata" validate examples/llama.toml --set model.rope_thetta=1.0
# A version-2 header over a file whose size does not match its count.
python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 2, 5000, *[0] * 253) + struct.pack("<100I", *[1] * 100))' \
  "$work/short.bin"
fault "token file shorter than its header's count" 2 "short.bin: truncated" -- "$strata" train $q --set data.train=\"$work/short.bin\"
# A checkpoint of one family loaded into a manifest of the other, both ways.
"$strata" train $q --set train.steps=1 --set model.n_layer=1 --set model.d_model=32 \
  --set checkpoint.dir=\"$work/gpt2_ckpt\" --set telemetry.1.path=\"$work/g.jsonl\" > /dev/null 2>&1 ||
  fail "could not train the GPT-2 checkpoint"
"$strata" train examples/llama.toml --set train.steps=1 --set model.n_layer=1 --set model.d_model=32 \
  --set model.d_ff=64 --set checkpoint.dir=\"$work/llama_ckpt\" > /dev/null 2>&1 ||
  fail "could not train the LLaMA checkpoint"
fault "GPT-2 checkpoint into a LLaMA manifest" 2 "holds a gpt2 checkpoint, but the manifest's model is arch = \"llama\"" -- \
  "$strata" eval examples/llama.toml --checkpoint "$work/gpt2_ckpt"
fault "LLaMA checkpoint into a GPT-2 manifest" 2 "holds a llama checkpoint, but the manifest's model is arch = \"gpt2\"" -- \
  "$strata" eval $q --checkpoint "$work/llama_ckpt"
# A checkpoint whose weights hold a NaN is corrupt (exit 2); finite weights so large that the loss
# overflows make a non-finite eval loss, which is a failed run (exit 1), not eval_loss=nan and 0.
python3 -c 'import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
start = 8 + int.from_bytes(data[:8], "little")
data[start:start + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(data)
for i in range(0, 256, 4): data[start + i:start + i + 4] = struct.pack("<f", 3e38)
open(sys.argv[3], "wb").write(data)' "$work/gpt2_ckpt/step_00000001/model.safetensors" "$work/nan.safetensors" \
  "$work/huge.safetensors"
# As files from elsewhere (no checksums), so that the values themselves are what is checked.
for file in nan huge; do python3 "$(dirname "$0")/safetensors_edit.py" "$work/$file.safetensors" strip; done
fault "eval of a checkpoint holding a NaN weight" 2 "corrupt checkpoint: tensor 'wte.weight' holds nan" -- \
  "$strata" eval $q --set model.n_layer=1 --set model.d_model=32 --checkpoint "$work/nan.safetensors"
fault "eval whose loss overflows (weights of 3e38)" 1 "the loss is not finite" -- "$strata" eval $q \
  --set model.n_layer=1 --set model.d_model=32 --checkpoint "$work/huge.safetensors"
fault "--set value with a line break (TOML injection)" 2 "the value contains a line break" -- "$strata" validate $q \
  --set "train.steps=3
[device]"
# Regular files only: a FIFO as data is refused at once instead of blocking.
mkfifo "$work/fifo.bin"
fault "FIFO as data (validate)" 2 "fifo.bin: not a regular file" -- "$strata" validate $q --set data.train=\"$work/fifo.bin\"
fault "FIFO as data (train)" 2 "fifo.bin: not a regular file" -- "$strata" train $q --set data.train=\"$work/fifo.bin\"
fault "FIFO as checkpoint (eval)" 2 "fifo.bin: not a regular file" -- "$strata" eval $q --checkpoint "$work/fifo.bin"
# A telemetry path that is a FIFO nobody reads would block the run at its first line: refused.
fault "FIFO nobody reads as the jsonl telemetry path" 2 "is a FIFO that no program is reading" -- \
  timeout 60 "$strata" train $q --set train.steps=2 --set telemetry.1.path=\"$work/fifo.bin\"
# One with a reader is written through, the reader kept until the run's last line.
mkfifo "$work/piped.jsonl"
cat "$work/piped.jsonl" > "$work/piped.out" &
reader=$!
expect 0 "" -- timeout 120 "$strata" train $q --set train.steps=2 --set telemetry.1.path=\"$work/piped.jsonl\" \
  --set checkpoint.dir=\"$work/piped-ckpt\"
wait $reader
grep -q '"record":"summary"' "$work/piped.out" || fail "the FIFO's reader did not get the run's summary: $(cat "$work/piped.out")"
# An unwritable checkpoint directory is refused at start, by validate and by train.
touch "$work/a_file"
fault "checkpoint.dir not creatable (validate)" 2 "([checkpoint] dir)" -- "$strata" validate $q --set checkpoint.dir=\"$work/a_file/ckpt\"
fault "checkpoint.dir not creatable (train)" 2 "([checkpoint] dir)" -- "$strata" train $q --set checkpoint.dir=\"$work/a_file/ckpt\"
# A trainer.json whose step is near INT64_MAX is a corrupt checkpoint, not a run to continue.
cp -r "$work/gpt2_ckpt" "$work/huge_step"
python3 -c 'import json, sys
p = sys.argv[1]; t = json.load(open(p)); t["step"] = 9223372036854775800; json.dump(t, open(p, "w"))' \
  "$work/huge_step/step_00000001/trainer.json"
fault "trainer.json step near INT64_MAX" 2 "is outside [1," -- "$strata" train $q --set model.n_layer=1 --set model.d_model=32 \
  --set checkpoint.dir=\"$work/huge_step\" --resume
# A step of 0 (the schedule would restart) or one that is not a whole number (5.5 read as 5) is too.
for bad in 0 5.5; do
  cp -r "$work/gpt2_ckpt" "$work/bad_step_$bad"
  python3 -c 'import json, sys
p = sys.argv[1]; t = json.load(open(p)); t["step"] = float(sys.argv[2]) if "." in sys.argv[2] else int(sys.argv[2]); json.dump(t, open(p, "w"))' \
    "$work/bad_step_$bad/step_00000001/trainer.json" "$bad"
done
fault "trainer.json step 0" 2 "step 0 is outside [1," -- "$strata" train $q --set model.n_layer=1 \
  --set model.d_model=32 --set checkpoint.dir=\"$work/bad_step_0\" --resume
fault "trainer.json step not a whole number" 2 "step 5.5 is not a whole number" -- "$strata" train $q \
  --set model.n_layer=1 --set model.d_model=32 --set checkpoint.dir=\"$work/bad_step_5.5\" --resume
# Telemetry that cannot be written fails the run, naming the file (/dev/full: every write is ENOSPC).
fault "jsonl telemetry write fails (disk full)" 1 "jsonl: cannot write to '/dev/full'" -- "$strata" train $q --set train.steps=2 \
  --set checkpoint.dir=\"$work/full_ckpt\" --set telemetry.1.path=\"/dev/full\"
fault "csv telemetry write fails (disk full)" 1 "csv: cannot write to '/dev/full'" -- "$strata" train "$work/diverge.toml" --set train.steps=2 \
  --set telemetry.0.path=\"/dev/full\"
# One run per checkpoint directory: while another holds its lock, a second run is refused.
mkdir -p "$work/shared_ckpt" && touch "$work/shared_ckpt/.lock"
fault "checkpoint.dir locked by another run" 2 "another run is using this checkpoint directory" -- flock "$work/shared_ckpt/.lock" \
  "$strata" train $q --set train.steps=1 --set checkpoint.dir=\"$work/shared_ckpt\"
# train.steps at INT64_MAX: the schedule and the progress line's ETA must not overflow (UBSan
# checks this under scripts/test-sanitized.sh).
expect 0 "ETA >100000h" -- "$strata" train $q --set train.steps=9223372036854775807 \
  --set model.n_layer=1 --set model.d_model=32 --set checkpoint.dir=\"$work/max_steps\" \
  --set telemetry.1.path=\"$work/max_steps.jsonl\" --stop-after 2
# A resume must come from the same run: another seed is refused unless forced.
small=(--set model.n_layer=1 --set model.d_model=32 --set train.steps=2 --set telemetry.1.path=\"$work/r.jsonl\")
"$strata" train $q "${small[@]}" --set checkpoint.dir=\"$work/run_ckpt\" --stop-after 1 \
  > /dev/null 2>&1 || fail "could not train the checkpoint to resume"
fault "resume with another seed" 2 "saved by a different run" -- "$strata" train $q "${small[@]}" \
  --set checkpoint.dir=\"$work/run_ckpt\" --set train.seed=7 --resume
expect 0 "resuming a different run" -- "$strata" train $q "${small[@]}" \
  --set checkpoint.dir=\"$work/run_ckpt\" --set train.seed=7 --resume --force-resume
# A NaN weight in a checkpoint is reported as a corrupt checkpoint on resume, not as divergence.
cp -r "$work/gpt2_ckpt" "$work/nan_ckpt"
cp "$work/nan.safetensors" "$work/nan_ckpt/step_00000001/model.safetensors"
fault "NaN weight in the checkpoint to resume" 2 "corrupt checkpoint: tensor" -- "$strata" train $q --set model.n_layer=1 \
  --set model.d_model=32 --set train.steps=2 --set checkpoint.dir=\"$work/nan_ckpt\" --resume
# SIGTERM (and SIGINT) finish the step in hand, write a checkpoint and exit 128 + the signal.
for signal in TERM INT; do
  rm -rf "$work/signal_ckpt" "$work/signal.jsonl"
  "$strata" train $q --set train.steps=100000 --set checkpoint.dir=\"$work/signal_ckpt\" \
    --set telemetry.1.path=\"$work/signal.jsonl\" > "$work/signal.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do  # until a few steps are logged (at most 30 s)
    logged=$(grep -c '"step"' "$work/signal.jsonl" 2>/dev/null)
    [ "${logged:-0}" -ge 3 ] && break
    sleep 0.1
  done
  kill -s "$signal" "$pid"
  wait "$pid"
  code=$?
  expected=$([ "$signal" = TERM ] && echo 143 || echo 130)
  [ "$code" = "$expected" ] || fail "SIG$signal: exit $code, expected $expected: $(tail -3 "$work/signal.log")"
  grep -q "stopped by signal" "$work/signal.log" || fail "SIG$signal: no stop message"
  [ -f "$work/signal_ckpt/latest" ] || fail "SIG$signal: no checkpoint written"
  echo "ok ($code): SIG$signal stops after a whole step with checkpoint $(cat "$work/signal_ckpt/latest")"
  [ -z "${RELIABILITY_TABLE:-}" ] || printf 'SIG%s during training (a checkpoint is written)\t%s\t%s\n' "$signal" "$code" \
    "$(grep -m1 'stopped by signal' "$work/signal.log" | sed -e 's/^\[[0-9: .-]*\] //' -e "s#$work#WORK#g")" \
    >> "$RELIABILITY_TABLE"
done
expect 0 "optimizer 'adamw'" -- env STRATA_PLUGIN_PATH="$fixtures" "$strata" plugins --verbose
# The planner: a prediction without a calibration says how to make one; a calibration named but
# missing is invalid input; with one, plan prints the step time; validate and plan warn (exit 0)
# when the predicted device peak exceeds the limit.
export STRATA_CALIBRATION="$work/no-calibration.json"
expect 0 "step time: not predicted (no calibration at $work/no-calibration.json" -- "$strata" plan $q
expect 2 "cannot read the calibration" -- "$strata" plan $q --calibration "$work/missing.json"
expect 0 "wrote $work/calibration.json" -- "$strata" calibrate --out "$work/calibration.json"
expect 0 "predicted step:" -- "$strata" plan $q --calibration "$work/calibration.json"
"$strata" plan $q --calibration "$work/calibration.json" --json > "$work/plan.json" || fail "plan --json failed"
python3 -c 'import json, sys
plan = json.load(open(sys.argv[1]))
assert plan["step_ms"] > 0 and plan["device"]["peak_bytes"] > 0, plan' "$work/plan.json" || fail "plan --json: $(cat "$work/plan.json")"
expect 0 "exceeds [device] memory_limit = 8.0 MiB" -- "$strata" validate $q --set device.memory_limit=\"8MiB\"
# plan --html: the prediction as a page, its within-step memory drawn; one stack's, so not with --fit.
expect 0 "wrote $work/plan.html" -- "$strata" plan $q --html "$work/plan.html"
grep -q ">device, predicted</text>" "$work/plan.html" || fail "plan --html drew no device timeline"
expect 2 "--html draws one stack's plan: it goes without --fit" -- \
  "$strata" plan $q --html "$work/plan2.html" --fit device=40MiB --calibration "$work/calibration.json"
expect 2 "--memory-timeline /proc/none/t.json: cannot be created" -- \
  "$strata" train $q --memory-timeline /proc/none/t.json
expect 2 "'s path too: write it elsewhere" -- \
  "$strata" train $q --metrics "$work/same.jsonl" --memory-timeline "$work/same.jsonl"
expect 0 "exceeds [device] memory_limit = 8.0 MiB" -- "$strata" plan $q --set device.memory_limit=\"8MiB\"
# ... and name the stack --fit would pick for the limit (with a calibration), or the command.
expect 0 "\`strata plan $q --fit device=8MiB\` searches for a stack that fits (timing this machine's ops first" -- \
  "$strata" validate $q --set device.memory_limit=\"8MiB\"
expect 0 "--fit device=40MiB\` picks: " -- \
  "$strata" plan $q --set device.memory_limit=\"40MiB\" --calibration "$work/calibration.json"
# --fit: the stack it writes for a budget trains inside it; no stack under a budget is exit 1, naming
# the smallest peak and what dominates it; without a calibration it times this machine's ops first
# and keeps them where the next plan looks ($STRATA_CALIBRATION here: a test writes nothing in the
# user's cache).
expect 0 "fit into device 40.0 MiB" -- "$strata" plan $q --fit device=40MiB
expect 0 "\"ops\"" -- cat "$STRATA_CALIBRATION"
rm "$STRATA_CALIBRATION"
expect 0 "wrote $work/fit.toml" -- "$strata" plan $q --fit device=40MiB --calibration "$work/calibration.json" \
  --write "$work/fit.toml"
# The written manifest is the user's file edited: its comments and untouched values as they were
# written (lr = 2e-3, not 0.002 or 17 digits), the budget as a size.
expect 0 'memory_limit = "40MiB"' -- cat "$work/fit.toml"
expect 0 "$(grep -m1 '^#' "$q")" -- cat "$work/fit.toml"
expect 0 "$(grep -m1 '^lr = ' "$q")" -- cat "$work/fit.toml"
expect 0 "peak device memory" -- "$strata" train "$work/fit.toml" --set train.steps=2 --fresh
expect 1 "nothing fits device 1.0 MiB: the smallest device peak reachable is" -- \
  "$strata" plan $q --fit device=1MiB --calibration "$work/calibration.json"
echo "all exit codes as documented"
