#!/usr/bin/env bash
# strata train on the quickstart lowers the loss and writes JSONL whose per-step peak is the
# allocator's; strata eval on the saved checkpoint reproduces the final validation loss.
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
"$strata" train examples/quickstart.toml --set train.steps=30 --set train.eval_every=0 \
  --set "checkpoint.dir=\"$work/ckpt\"" --set "telemetry.1.path=\"$work/steps.jsonl\"" > "$work/train.log" 2>&1 \
  || { cat "$work/train.log"; exit 1; }
python3 - "$work/steps.jsonl" <<'PY'
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
steps = [r for r in records if "step" in r and "record" not in r]
summary = [r for r in records if r.get("record") == "summary"][0]
assert len(steps) == 30, len(steps)
for key in ("step", "phase", "loss", "lr", "ms", "tokens_per_s", "device_bytes", "peak_device_bytes",
            "peak_device_bytes_by_category", "host_bytes"):
    assert key in steps[0], key
assert set(steps[0]["device_bytes"]) == {"weights", "grads", "optimizer", "activations", "workspace", "other"}
first, last = steps[0]["loss"], steps[-1]["loss"]
assert last < first - 1.0, (first, last)
# The run's peak is the largest per-step peak; every per-step peak covers its end-of-step live bytes.
assert max(s["peak_device_bytes"] for s in steps) == summary["peak_device_bytes"], summary
for s in steps:
    assert s["peak_device_bytes"] >= sum(s["device_bytes"].values())
    assert s["peak_device_bytes_by_category"]["activations"] > 0
print("val_loss", steps[-1]["val_loss"])
open(sys.argv[1] + ".val", "w").write("%.6f" % steps[-1]["val_loss"])
PY
eval_output=$("$strata" eval examples/quickstart.toml --checkpoint "$work/ckpt")
expected=$(cat "$work/steps.jsonl.val")
actual=$(echo "$eval_output" | tail -n 1)
echo "train: val_loss=$expected   eval: $actual"
[ "$actual" = "eval_loss=$expected" ] || { echo "eval does not reproduce the validation loss"; exit 1; }
# The checkpoint directory's `latest` file, named itself, means the save it names (it was read as a
# safetensors file: "header length 3472328499168375923").
latest_output=$("$strata" eval examples/quickstart.toml --checkpoint "$work/ckpt/latest" | tail -n 1)
[ "$latest_output" = "$actual" ] || { echo "eval --checkpoint DIR/latest: $latest_output, DIR: $actual"; exit 1; }
echo "ok: --checkpoint DIR/latest is the save DIR's latest names"
# An evaluation keeps one vocabulary chunk of the LM head's logits, since nothing reads them again: a
# 50,000-token LLaMA's whole logits (48.9 MiB) do not fit in 75 MiB beside its 51.9 MiB of weights,
# yet it evaluates there, to the bits of the training run's own (whole-logits) validation loss.
big=(--set model.vocab=50000 --set train.batch=4)
# Over the limit, the refusal names the tensor and what makes it fit.
set +e
refusal=$("$strata" train examples/llama.toml "${big[@]}" --set train.steps=1 --set "checkpoint.dir=\"$work/big\"" 2>&1)
code=$?
set -e
[ $code = 1 ] && grep -qF 'act.logits (48.9 MiB of activations) does not fit' <<< "$refusal" &&
  grep -qF '`logits = "recompute"` in a [[strategy]] plugin = "checkpoint" keeps one chunk instead' <<< "$refusal" ||
  { echo "FAIL: the over-budget refusal ($code): $refusal"; exit 1; }
echo "ok: over the limit, the refusal names act.logits and logits = \"recompute\""
"$strata" train examples/llama.toml "${big[@]}" --set train.steps=2 --set train.eval_every=2 \
  --set 'device.memory_limit="1GiB"' \
  --set "checkpoint.dir=\"$work/big\"" --metrics "$work/big.jsonl" > "$work/big.log" 2>&1 || { cat "$work/big.log"; exit 1; }
big_val=$(python3 -c 'import json, sys; print("%.6f" % [r for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r][-1]["val_loss"])' "$work/big.jsonl")
big_eval=$("$strata" eval examples/llama.toml "${big[@]}" --set 'device.memory_limit="75MiB"' --checkpoint "$work/big" | tail -n 1)
[ "$big_eval" = "eval_loss=$big_val" ] || { echo "eval in 75 MiB: $big_eval, training's val_loss=$big_val"; exit 1; }
echo "ok: eval keeps one chunk of logits: $big_eval in 75 MiB, as training measured"
