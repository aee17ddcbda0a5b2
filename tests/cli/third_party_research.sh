#!/usr/bin/env bash
# Two research techniques built out of tree against the *installed* SDK (examples/third-party-plugin):
# GaLore (an optimizer reading each parameter's shape, computing through gemm, qr and eigh) and
# ActNN-style activation compression (a memory strategy offering an activation codec).
set -euo pipefail
build_dir=$1
work=$2
source "$(dirname "$0")/example_plugins.sh"
install_and_build_examples "$build_dir" "$work" strata-galore strata-actnn

losses() { python3 -c 'import json, sys
print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if l.startswith("{\"step\"")))' "$1"; }
train() {  # train <name> <manifest> <args...>: metrics in $work/<name>.jsonl
  local name=$1 manifest=$2
  shift 2
  "$strata" train "$manifest" "$@" --metrics "$work/$name.jsonl" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; echo "run $name failed"; exit 1; }
}
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$work/adamw.toml"
small=(--set model.n_layer=2 --set model.seq_len=16 --set train.batch=4 --set train.eval_every=0)

# --- GaLore: rank 8 of d_model 128, so every matrix and both tables are projected.
sed -e 's/^plugin = "adamw"/plugin = "galore"\nrank = 8\nrefresh_every = 10/' "$work/adamw.toml" > "$work/galore.toml"
train galore "$work/galore.toml" --set train.steps=40 "${small[@]}"
train adamw "$work/adamw.toml" --set train.steps=40 "${small[@]}"
python3 -c 'import json, sys
galore, adamw = ([json.loads(l) for l in open(p)][-1] for p in sys.argv[1:3])
optimizer = lambda s: s["peak_device_bytes_by_category"]["optimizer"]
print("galore: loss %.3f -> %.3f (adamw %.3f -> %.3f); optimizer MiB %.3f against adamw %.3f (%.2fx)" % (
    galore["first_loss"], galore["final_loss"], adamw["first_loss"], adamw["final_loss"],
    optimizer(galore) / 2**20, optimizer(adamw) / 2**20, optimizer(galore) / optimizer(adamw)))
assert galore["final_loss"] < galore["first_loss"] - 1.0, "galore did not train"
assert optimizer(galore) < 0.35 * optimizer(adamw), "galore keeps too much optimizer memory"
scratch = galore["plugin_memory"]["galore"]
assert scratch["device_bytes"] > 0, scratch' "$work/galore.jsonl" "$work/adamw.jsonl" || exit 1
# The projection is a real mechanism: the eigen op and the range finder give other losses, so does
# another refresh interval; the same manifest gives the same bits twice (seeded draws).
five=(--set train.steps=5 "${small[@]}")
train range "$work/galore.toml" "${five[@]}"
train range_again "$work/galore.toml" "${five[@]}"
train eigh "$work/galore.toml" "${five[@]}" --set optimizer.projection=eigh
train refresh "$work/galore.toml" "${five[@]}" --set optimizer.refresh_every=1
train full_rank "$work/galore.toml" "${five[@]}" --set optimizer.rank=512
[ "$(losses "$work/range.jsonl")" = "$(losses "$work/range_again.jsonl")" ] || { echo "galore is not deterministic"; exit 1; }
for other in eigh refresh; do
  [ "$(losses "$work/range.jsonl")" != "$(losses "$work/$other.jsonl")" ] || { echo "galore: $other changed nothing"; exit 1; }
done
# A rank above every side projects nothing: plain AdamW through the elementwise ops, which the
# adamw plugin's loop matches to rounding.
train adamw5 "$work/adamw.toml" "${five[@]}"
python3 -c 'import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if l.startswith("{\"step\"")] for p in sys.argv[1:3])
print("galore with nothing projected:", a, "adamw:", b)
assert len(a) == 5 and all(abs(x - y) < 1e-3 for x, y in zip(a, b)), (a, b)' "$work/full_rank.jsonl" "$work/adamw5.jsonl" ||
  { echo "galore with nothing projected must be AdamW"; exit 1; }
# A resume continues bitwise (the schedule constant, so the first half's lr is the whole run's).
resumes_bitwise() {  # resumes_bitwise <name> <manifest> <args...>
  local name=$1 manifest=$2
  shift 2
  local args=(--set train.steps=6 "${small[@]}" --set optimizer.schedule=constant --set checkpoint.every=3 "$@")
  train "$name.whole" "$manifest" "${args[@]}" --set "checkpoint.dir=$work/$name.ckpt_whole"
  train "$name.first" "$manifest" "${args[@]}" --set train.steps=3 --set "checkpoint.dir=$work/$name.ckpt"
  train "$name.second" "$manifest" "${args[@]}" --set "checkpoint.dir=$work/$name.ckpt" --resume "$work/$name.ckpt"
  python3 -c 'import json, sys
steps = lambda p: {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "step" in r}
whole, second = steps(sys.argv[1]), steps(sys.argv[2])
assert sorted(second) == [4, 5, 6] and all(whole[s] == second[s] for s in second), (whole, second)' \
    "$work/$name.whole.jsonl" "$work/$name.second.jsonl" || { echo "$name did not resume bitwise"; exit 1; }
}
# GaLore's projection and its moments are state the checkpoint keeps (refreshed every other step,
# so steps 4 and 6 refresh after the resume).
resumes_bitwise galore "$work/galore.toml" --set optimizer.refresh_every=2
# A bad key value is named, with exit 2.
set +e
"$strata" validate "$work/galore.toml" --set optimizer.projection=svd > "$work/bad.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "projection" "$work/bad.log" || { cat "$work/bad.log"; echo "expected exit 2 naming the key"; exit 1; }
# The planner runs the plugin's gemm, qr and scratch as a run does: its predicted peak is measured.
cp "$work/galore.toml" "$work/range.toml"
plan_matches_runs "$work" range "${five[@]}" ||
  { echo "the plan missed galore's peak"; exit 1; }

# --- ActNN: int8 codes for every saved activation of the blocks.
cp "$work/adamw.toml" "$work/actnn.toml"
printf '[[strategy]]\nplugin = "actnn"\ngroup = 64\n' >> "$work/actnn.toml"
three=(--set train.steps=3 --set train.eval_every=0)
train base "$work/adamw.toml" "${three[@]}"
train actnn "$work/actnn.toml" "${three[@]}"
train actnn_again "$work/actnn.toml" "${three[@]}"
[ "$(losses "$work/actnn.jsonl")" = "$(losses "$work/actnn_again.jsonl")" ] || { echo "actnn is not deterministic"; exit 1; }
[ "$(losses "$work/actnn.jsonl")" != "$(losses "$work/base.jsonl")" ] || { echo "actnn changed nothing"; exit 1; }
python3 -c 'import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:3]]
base, coded = ([r["loss"] for r in run if "step" in r] for run in runs)
peak = lambda run: run[-1]["peak_device_bytes_by_category"]["activations"]
print("actnn: losses %s against %s; activation peak MiB %.2f against %.2f (%.2fx)" % (
    coded, base, peak(runs[1]) / 2**20, peak(runs[0]) / 2**20, peak(runs[1]) / peak(runs[0])))
assert all(abs(c - b) < 0.01 * b for c, b in zip(coded, base)), "the losses moved more than 1%"
assert peak(runs[1]) < 0.6 * peak(runs[0]), "the activation peak did not fall"' "$work/base.jsonl" "$work/actnn.jsonl" ||
  exit 1
# Composed with checkpointing (blocks 0 and 2 recomputed, their codes dropped with them) and
# offloading (optimizer state on the host, at most two blocks' weights on the device).
cp "$work/actnn.toml" "$work/stack.toml"
cat >> "$work/stack.toml" <<'EOF'
[[strategy]]
plugin = "checkpoint"
layers = [0, 2]

[[strategy]]
plugin = "offload"
optimizer_state = "host"
max_resident_layers = 2
prefetch = 1
EOF
train stack "$work/stack.toml" "${three[@]}"
python3 -c 'import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:3]]
base, stack = ([r["loss"] for r in run if "step" in r] for run in runs)
assert all(abs(s - b) < 0.01 * b for s, b in zip(stack, base)), (stack, base)' "$work/base.jsonl" "$work/stack.jsonl" ||
  { echo "actnn composed with checkpoint and offload moved the losses"; exit 1; }
# The codes' random bits come from the call: a resumed run draws what the whole run drew.
resumes_bitwise actnn "$work/actnn.toml"
# 40 steps train as the plain run does.
train actnn40 "$work/actnn.toml" --set train.steps=40 "${small[@]}"
python3 -c 'import json, sys
coded, base = ([json.loads(l) for l in open(p)][-1] for p in sys.argv[1:3])
assert coded["final_loss"] < coded["first_loss"] - 1.0, coded
assert abs(coded["final_loss"] - base["final_loss"]) < 0.02 * base["final_loss"], (coded, base)' \
  "$work/actnn40.jsonl" "$work/adamw.jsonl" || { echo "actnn did not train as the plain run"; exit 1; }
# The planner sizes the codes with the plugin's own code_bytes.
plan_matches_runs "$work" "actnn stack" "${three[@]}" ||
  { echo "the plan missed the codec's peak"; exit 1; }
echo "third-party research plugins: galore and actnn built against the installed SDK, trained and planned"
