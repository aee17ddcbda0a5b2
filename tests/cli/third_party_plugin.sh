#!/usr/bin/env bash
# The out-of-tree example plugin builds against the *installed* SDK (find_package(strata)), and the
# installed strata finds it on STRATA_PLUGIN_PATH, lists it and trains with it.
set -euo pipefail
build_dir=$1
work=$2
source "$(dirname "$0")/example_plugins.sh"
install_and_build_examples "$build_dir" "$work"
"$strata" plugins --verbose > "$work/plugins.txt"
grep -q "loss_ema" "$work/plugins.txt" || { cat "$work/plugins.txt"; echo "loss_ema not listed"; exit 1; }
grep -q "$work/prefix/lib/strata/plugins/libstrata-adamw.so" "$work/plugins.txt" ||
  { cat "$work/plugins.txt"; echo "the installed strata must use the plugins installed beside it"; exit 1; }
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$work/m.toml"
printf '[[telemetry]]\nplugin = "loss_ema"\nalpha = 0.5\npath = "%s"\n' "$work/ema.csv" >> "$work/m.toml"
"$strata" train "$work/m.toml" --set train.steps=5 --set model.n_layer=2 --set model.seq_len=16 \
  --set train.batch=4 > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
[ "$(wc -l < "$work/ema.csv")" = 6 ] || { cat "$work/ema.csv"; echo "expected a header and 5 steps"; exit 1; }
grep -q "loss_ema: smoothed training loss" "$work/train.log" || { cat "$work/train.log"; exit 1; }

# The optimizer example: AdamW with layer-wise decay trains (the loss falls), and its decay is a
# real mechanism (decay 1.0, every layer at the full rate, gives other losses).
losses() { python3 -c 'import json, sys
print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if l.startswith("{\"step\"")))' "$1"; }
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' -e '/^betas/d' -e '/^weight_decay/d' \
  -e 's/^plugin = "adamw"/plugin = "adamw_llrd"\ndecay = 0.5/' examples/quickstart.toml > "$work/llrd.toml"
small=(--set model.n_layer=2 --set model.seq_len=16 --set train.batch=4 --set train.eval_every=0)
"$strata" train "$work/llrd.toml" --set train.steps=40 "${small[@]}" --metrics "$work/llrd.jsonl" > "$work/llrd.log" 2>&1 ||
  { cat "$work/llrd.log"; exit 1; }
python3 -c 'import json, sys
s = [json.loads(l) for l in open(sys.argv[1])][-1]
assert s["final_loss"] < s["first_loss"] - 1.0, s' "$work/llrd.jsonl" || { echo "adamw_llrd did not train"; exit 1; }
"$strata" train "$work/llrd.toml" --set train.steps=5 "${small[@]}" --set optimizer.decay=1.0 --metrics "$work/flat.jsonl" \
  > /dev/null 2>&1 && "$strata" train "$work/llrd.toml" --set train.steps=5 "${small[@]}" --metrics "$work/llrd5.jsonl" \
  > /dev/null 2>&1 || { echo "adamw_llrd runs failed"; exit 1; }
[ "$(losses "$work/flat.jsonl")" != "$(losses "$work/llrd5.jsonl")" ] || { echo "decay changed nothing"; exit 1; }

# The memory-strategy example: dropping activations above a live-memory mark lowers the measured
# peak and leaves every loss bitwise unchanged.
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$work/base.toml"
cp "$work/base.toml" "$work/pressure.toml"
printf '[[strategy]]\nplugin = "pressure_checkpoint"\nhigh_water_mib = 40\n' >> "$work/pressure.toml"
for run in base pressure; do
  "$strata" train "$work/$run.toml" --set train.steps=3 --set train.eval_every=0 --metrics "$work/$run.jsonl" \
    > "$work/$run.log" 2>&1 || { cat "$work/$run.log"; exit 1; }
done
[ "$(losses "$work/base.jsonl")" = "$(losses "$work/pressure.jsonl")" ] ||
  { echo "pressure_checkpoint changed the losses"; exit 1; }
python3 -c 'import json, sys
peak = lambda path: [json.loads(l) for l in open(path)][-1]["peak_device_bytes"]
base, pressure = peak(sys.argv[1]), peak(sys.argv[2])
print("peak device MiB: %.1f without, %.1f with pressure_checkpoint" % (base / 2**20, pressure / 2**20))
assert pressure < base' "$work/base.jsonl" "$work/pressure.jsonl" || { echo "the peak did not fall"; exit 1; }
grep -q "pressure_checkpoint: step 1 dropped the activations of" "$work/pressure.log" || { cat "$work/pressure.log"; exit 1; }
# The planner runs a third party's policy as a run does: its predicted peaks are the measured ones.
plan_matches_runs "$work" "base pressure" --set train.steps=3 --set train.eval_every=0 ||
  { echo "the plan missed a third-party policy's peak"; exit 1; }

# Lion: one state buffer per parameter (AdamW keeps two) and one scratch buffer it asks the host
# for, accounted under its name; it trains (the loss falls).
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' -e '/^betas/d' -e '/^weight_decay/d' \
  -e '/^grad_clip/d' -e 's/^plugin = "adamw"/plugin = "lion"/' examples/quickstart.toml > "$work/lion.toml"
"$strata" train "$work/lion.toml" --set train.steps=40 "${small[@]}" --set optimizer.lr_scale=0.3 --metrics "$work/lion.jsonl" \
  > "$work/lion.log" 2>&1 ||
  { cat "$work/lion.log"; exit 1; }
python3 -c 'import json, sys
lion = [json.loads(l) for l in open(sys.argv[1])][-1]
adamw = [json.loads(l) for l in open(sys.argv[2])][-1]
assert lion["final_loss"] < lion["first_loss"] - 1.0, lion
scratch = lion["plugin_memory"]["lion"]
assert scratch["host_bytes"] == 0 and scratch["device_bytes"] > 0, scratch
optimizer = lambda s: s["peak_device_bytes_by_category"]["optimizer"]
print("optimizer MiB: lion %.2f (state + %.2f scratch), adamw_llrd %.2f" % (
    optimizer(lion) / 2**20, scratch["device_bytes"] / 2**20, optimizer(adamw) / 2**20))
assert optimizer(lion) < 0.75 * optimizer(adamw)' "$work/lion.jsonl" "$work/llrd.jsonl" ||
  { cat "$work/lion.log"; echo "lion must train, account its scratch under its name and keep about half of adamw's optimizer memory"; exit 1; }

# Activations moved by a policy of the plugin's own (every other block): every loss bitwise that
# of the run keeping them all, with a lower device activation peak.
cp "$work/base.toml" "$work/alternate.toml"
printf '[[strategy]]\nplugin = "alternate_offload"\nevery = 2\n' >> "$work/alternate.toml"
"$strata" train "$work/alternate.toml" --set train.steps=3 --set train.eval_every=0 --metrics "$work/alternate.jsonl" \
  > "$work/alternate.log" 2>&1 || { cat "$work/alternate.log"; exit 1; }
[ "$(losses "$work/base.jsonl")" = "$(losses "$work/alternate.jsonl")" ] ||
  { echo "alternate_offload changed the losses"; exit 1; }
grep -q "alternate_offload: moves the activations of" "$work/alternate.log" || { cat "$work/alternate.log"; exit 1; }
python3 -c 'import json, sys
peak = lambda path: [json.loads(l) for l in open(path)][-1]["peak_device_bytes_by_category"]["activations"]
base, moved = peak(sys.argv[1]), peak(sys.argv[2])
print("peak device activation MiB: %.1f kept, %.1f with alternate_offload" % (base / 2**20, moved / 2**20))
assert moved < base' "$work/base.jsonl" "$work/alternate.jsonl" || { echo "the activation peak did not fall"; exit 1; }

# A relocated prefix still finds its plugins: the search is relative to the program.
mv "$work/prefix" "$work/moved"
"$work/moved/bin/strata" plugins > "$work/moved.txt"
grep -q "$work/moved/lib/strata/plugins/libstrata-adamw.so" "$work/moved.txt" ||
  { cat "$work/moved.txt"; echo "a moved prefix must find its plugins"; exit 1; }
echo "third-party plugin: built against the installed SDK, listed, and trained with; the prefix relocates"
