#!/usr/bin/env bash
# Are two builds' losses and saves bitwise equal? (run by hand, for refactors that must not change
# the math). Trains every small example manifest briefly with each build, plus the checkpoint modes
# (block, selective, cheap) under f32 and bf16 activations on GPT-2 and LLaMA, and the quickstart
# model on two data-parallel ranks at every ZeRO stage (mpirun -np 2), and every placement of the
# update (optimizer state on the host and on disk, block weights streamed from disk; the full and
# the fused update, both fused clippings), and compares the per-step
# loss, gradient norm and validation loss exactly, and every file of each run's last save (model and
# optimizer tensors, trainer state) byte for byte; peak device bytes per category are shown where
# they differ.
# Usage: bash bench/bitwise_examples.sh BASELINE_STRATA [STRATA]   (from the repository root;
# STRATA defaults to ./build/bin/strata; a binary outside its build tree finds its plugins through
# STRATA_PLUGIN_PATH, so wrap it in a script that sets it).
set -euo pipefail
baseline=$(realpath "$1")
strata=$(realpath "${2:-./build/bin/strata}")
out=$(realpath -m runs/bitwise) && rm -rf "$out" && mkdir -p "$out"
repo=$PWD

run_all() {  # binary, folder
  local bin=$1 dir=$2
  mkdir -p "$dir/run" && cd "$dir/run" && ln -s "$repo/data" data && ln -s "$repo/examples" examples
  python3 - <<'PY'
s = open('examples/llama.toml').read() + '\n[[strategy]]\nplugin = "checkpoint"\nevery = 1\n'
open('llama-checkpoint.toml', 'w').write(s)
# The update's placements: optimizer state on the host (the host's update), on disk (the update
# in parts), block weights streamed from disk; each under the full and the fused update.
quick = open('examples/quickstart.toml').read()
offload = '\n[[strategy]]\nplugin = "offload"\noptimizer_state = "%s"\n'
open('offload-host.toml', 'w').write(quick + offload % 'host')
open('offload-disk.toml', 'w').write(quick + offload % 'disk')
open('stream-disk.toml', 'w').write(quick + offload % 'disk' + 'max_resident_layers = 2\nweights = "disk"\n')
PY
  mkdir -p tier
  # The last save's files, hashed (each run saves into its own directory: --fresh moves an earlier
  # run's saves aside).
  hash_save() {  # name, checkpoint directory
    local save="$2/$(cat "$2/latest" 2>/dev/null)"
    [ -d "$save" ] && (cd "$save" && find . -type f ! -name '.*' | sort | xargs sha256sum) > "$dir/$1.save"
  }
  checkpoint_dir() { python3 -c 'import sys,tomllib; print(tomllib.load(open(sys.argv[1],"rb"))["checkpoint"]["dir"])' "$1"; }
  train() {  # name, manifest, then arguments
    local name=$1 manifest=$2; shift
    "$bin" train "$@" --fresh --metrics "$dir/$name.jsonl" > "$dir/$name.log" 2>&1 || { echo "$name failed"; tail "$dir/$name.log"; }
    local saves; saves=$(checkpoint_dir "$manifest")
    for arg in "$@"; do [[ $arg == checkpoint.dir=* ]] && saves=$(eval echo "${arg#checkpoint.dir=}"); done
    hash_save "$name" "$saves"
  }
  mpi_train() {  # name, then arguments: two ranks
    local name=$1; shift
    OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --allow-run-as-root --oversubscribe -np 2 \
      "$bin" train examples/quickstart.toml "$@" --set train.threads=1 --set checkpoint.dir=\"dp/$name\" --fresh \
      --metrics "$dir/$name.jsonl" > "$dir/$name.log" 2>&1 || { echo "$name failed"; tail "$dir/$name.log"; }
    hash_save "$name" "dp/$name"
  }
  short=(--set train.steps=30 --set train.eval_every=15)
  train quickstart examples/quickstart.toml "${short[@]}"  # first: lora.toml starts from its checkpoints
  for m in adamw8bit all-strategies bf16 checkpoint flash-attention fp16 int8 llama offload-optimizer \
    sparse-layers stream-layers lora; do train "$m" "examples/$m.toml" "${short[@]}"; done
  train qwen2 examples/qwen2.toml "${short[@]}"
  disk=(--set 'device.disk_path="tier"')
  for update in full fused; do
    u=(--set "train.update=\"$update\"")
    train "quickstart-$update" examples/quickstart.toml "${short[@]}" "${u[@]}" --set checkpoint.dir=\"q-$update\"
    for m in offload-host offload-disk stream-disk; do
      train "$m-$update" "$m.toml" "${short[@]}" "${disk[@]}" "${u[@]}" --set checkpoint.dir=\"$m-$update\"
    done
  done
  train quickstart-fused-per-block examples/quickstart.toml "${short[@]}" --set 'train.update="fused"' \
    --set 'train.fused_clip="per_block"' --set 'checkpoint.dir="q-per-block"'
  train bf16-fused examples/bf16.toml "${short[@]}" --set 'train.update="fused"'
  train rssm examples/rssm-predictor.toml --set train.steps=120 --set train.eval_every=60
  bf16=(--set 'precision.plugin="bf16"' --set 'precision.activations="bf16"')
  for m in checkpoint llama-checkpoint; do
    manifest=examples/checkpoint.toml
    [ "$m" = llama-checkpoint ] && manifest=llama-checkpoint.toml
    for mode in block selective cheap; do
      keys=(--set train.steps=12 --set train.eval_every=6 --set "strategy.0.mode=\"$mode\"")
      train "$m-$mode-f32" "$manifest" "${keys[@]}"
      train "$m-$mode-bf16" "$manifest" "${keys[@]}" "${bf16[@]}"
    done
  done
  for zero in 0 1 2 3; do mpi_train "ranks2-zero$zero" --set train.steps=8 --set distributed.zero=$zero; done
  mpi_train ranks2-zero0-fused --set train.steps=8 --set 'train.update="fused"'
  mpi_train ranks2-zero1-bf16 --set train.steps=8 --set distributed.zero=1 --set 'precision.plugin="bf16"' 
  cd "$repo"
}

run_all "$baseline" "$out/baseline"
run_all "$strata" "$out/this"
python3 - "$out" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
def steps(path):
    rows = [json.loads(line) for line in open(path)]
    return [(r.get("step"), r.get("loss"), r.get("grad_norm"), r.get("val_loss")) for r in rows], \
           [r.get("peak_device_bytes_by_category") for r in rows if "step" in r][:1]
same = True
def save(path):
    return path.read_text() if path.exists() else None
for path in sorted((out / "baseline").glob("*.jsonl")):
    (a, bytes_a), (b, bytes_b) = steps(path), steps(out / "this" / path.name)
    saves_a, saves_b = save(path.with_suffix(".save")), save(out / "this" / (path.stem + ".save"))
    verdict = "bitwise" if a == b else "DIFFERENT"
    saved = "no save" if saves_a is None else f"{saves_a.count(chr(10))} saved files " + (
        "bitwise" if saves_a == saves_b else "DIFFERENT")
    same = same and a == b and saves_a == saves_b
    note = "" if bytes_a == bytes_b else f"  peak bytes {bytes_a[0]} -> {bytes_b[0]}"
    print(f"{path.stem:<28} {len(a):>4} records  {verdict:<9}  {saved}{note}")
print("all bitwise" if same else "some runs differ")
sys.exit(0 if same else 1)
PY
