#!/usr/bin/env bash
# Engine benchmark (run by hand): ms/step, tokens/s and peak device bytes, fp32 + AdamW, for
#   quickstart: GPT-2, n_layer 4, d_model 128, n_head 4, vocab 256,   T 64,  B 16  (examples/quickstart.toml)
#   tiny:       GPT-2, n_layer 4, d_model 256, n_head 4, vocab 256,   T 128, B 8
#   gpt2:       GPT-2, n_layer 12, d_model 768, n_head 12, vocab 50257, T 64, B 4   (124M parameters)
#   llama_tiny: LLaMA, n_layer 4, d_model 256, n_head 4, n_kv_head 2, d_ff 688, vocab 256, T 128, B 8
#   llama110m:  LLaMA, n_layer 12, d_model 768, n_head 12, n_kv_head 4, d_ff 2048, vocab 32000, T 256, B 2
# against the same models in PyTorch (bench/torch_reference.py) with Debian's python3-torch
# (/usr/bin/python3), in both thread set-ups: Debian's OpenMP OpenBLAS, and OMP_WAIT_POLICY=PASSIVE.
# Step times on a shared 2-core VM drift by 15% and more within minutes, so the script runs
# `rounds` rounds; within a round each shape runs Strata and then both PyTorch set-ups back to
# back, and the ratio is taken within the round, against the faster PyTorch set-up. The last
# lines are every round's ratios and their median.
# Usage: bash bench/engine_bench.sh [steps] [rounds] [shapes]   (from the repository root, after
# scripts/setup.sh); shapes defaults to "tiny gpt2 llama_tiny llama110m". With BASELINE=<path to
# another build's strata binary> (GPT-2 shapes only), each round also times that build right after
# this one, and the last lines give this build's step time over the baseline's, per round.
set -euo pipefail
steps=${1:-20}
rounds=${2:-3}
shapes=${3:-"tiny gpt2 llama_tiny llama110m"}
strata=./build/bin/strata
out=runs/bench && mkdir -p "$out"
results="$out/engine_results.tsv"
: > "$results"
python3 bench/make_gpt2_tokens.py "$out/gpt2_tokens.bin"
quickstart_keys=(--set model.n_layer=4 --set model.d_model=128 --set model.n_head=4 --set model.vocab=256
  --set model.seq_len=64 --set train.batch=16)
tiny_keys=(--set model.n_layer=4 --set model.d_model=256 --set model.n_head=4 --set model.vocab=256
  --set model.seq_len=128 --set train.batch=8)
gpt2_keys=(--set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab=50257
  --set model.seq_len=64 --set train.batch=4 --set "data.train=\"$out/gpt2_tokens.bin\"")
llama_tiny_keys=(--set 'model.arch="llama"' --set model.n_layer=4 --set model.d_model=256 --set model.n_head=4
  --set model.n_kv_head=2 --set model.d_ff=688 --set model.vocab=256 --set model.seq_len=128 --set train.batch=8)
# Byte tokens are valid ids of a 32000-token vocabulary; the step time does not depend on which ids.
llama110m_keys=(--set 'model.arch="llama"' --set model.n_layer=12 --set model.d_model=768 --set model.n_head=12
  --set model.n_kv_head=4 --set model.d_ff=2048 --set model.vocab=32000 --set model.seq_len=256 --set train.batch=2)
have_torch=1
/usr/bin/python3 -c 'import torch' 2>/dev/null || {
  have_torch=0
  echo "python3-torch is not installed: apt-get install python3-torch for the PyTorch reference"
}
for round in $(seq 1 "$rounds"); do
  for shape in $shapes; do
    echo "== round $round: strata $shape ($steps steps, 2 threads)"
    case "$shape" in
      quickstart) keys=("${quickstart_keys[@]}") ;;
      tiny) keys=("${tiny_keys[@]}") ;;
      gpt2) keys=("${gpt2_keys[@]}") ;;
      llama_tiny) keys=("${llama_tiny_keys[@]}") ;;
      llama110m) keys=("${llama110m_keys[@]}") ;;
      *) echo "unknown shape $shape"; exit 2 ;;
    esac
    "$strata" train bench/engine.toml --profile --set train.steps="$steps" \
      --set "telemetry.0.path=\"$out/$shape-$round.jsonl\"" "${keys[@]}" \
      | sed -n '/^summary/,$p' > "$out/$shape-$round.txt"
    if [ "$round" = 1 ]; then cat "$out/$shape-$round.txt"; else grep "median ms/step" "$out/$shape-$round.txt"; fi
    printf '%s\t%s\tstrata\t%s\n' "$round" "$shape" "$(awk '/median ms\/step/ {print $3}' "$out/$shape-$round.txt")" >> "$results"
    if [ -n "${BASELINE:-}" ]; then
      echo "== round $round: baseline $shape ($BASELINE)"
      "$BASELINE" train bench/engine.toml --set train.steps="$steps" \
        --set "telemetry.0.path=\"$out/$shape-$round-baseline.jsonl\"" "${keys[@]}" \
        | sed -n '/^summary/,$p' > "$out/$shape-$round-baseline.txt"
      grep "median ms/step" "$out/$shape-$round-baseline.txt"
      printf '%s\t%s\tbaseline\t%s\n' "$round" "$shape" \
        "$(awk '/median ms\/step/ {print $3}' "$out/$shape-$round-baseline.txt")" >> "$results"
    fi
    [ "$have_torch" = 1 ] || continue
    echo "== round $round: torch $shape, OpenMP OpenBLAS"
    line=$(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=2 \
      /usr/bin/python3 bench/torch_reference.py "$shape" "$steps" | grep 'median')
    echo "$line"
    printf '%s\t%s\ttorch-openmp\t%s\n' "$round" "$shape" "$(echo "$line" | sed 's/.*median \([0-9.]*\) ms.*/\1/')" >> "$results"
    echo "== round $round: torch $shape, OMP_WAIT_POLICY=PASSIVE"
    line=$(OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 \
      /usr/bin/python3 bench/torch_reference.py "$shape" "$steps" | grep 'median')
    echo "$line"
    printf '%s\t%s\ttorch-passive\t%s\n' "$round" "$shape" "$(echo "$line" | sed 's/.*median \([0-9.]*\) ms.*/\1/')" >> "$results"
  done
done 2>&1
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
ms = {(r, shape, who): float(value) for r, shape, who, value in rows}
have_torch = any(who.startswith("torch") for _, _, who in ms)
if have_torch:
    print("\nround  shape  strata ms  torch openmp  torch passive  ratio (vs the faster)")
ratios = {}
for (r, shape, who), value in sorted(ms.items()):
    if who != "strata" or not have_torch:
        continue
    openmp, passive = ms[(r, shape, "torch-openmp")], ms[(r, shape, "torch-passive")]
    ratio = value / min(openmp, passive)
    ratios.setdefault(shape, []).append(ratio)
    faster = "openmp" if openmp <= passive else "passive"
    print(f"{r:>5}  {shape:<10}  {value:9.1f}  {openmp:12.1f}  {passive:13.1f}  {ratio:.3f} ({faster})")
for shape, values in ratios.items():
    print(f"median ratio, {shape}: {statistics.median(values):.3f} over {len(values)} rounds")
baseline = {(r, shape): v for (r, shape, who), v in ms.items() if who == "baseline"}
if baseline:
    print("\nround  shape       this build ms  baseline ms  ratio")
    against = {}
    for (r, shape), value in sorted(baseline.items()):
        ratio = ms[(r, shape, "strata")] / value
        against.setdefault(shape, []).append(ratio)
        print(f"{r:>5}  {shape:<10}  {ms[(r, shape, 'strata')]:13.1f}  {value:11.1f}  {ratio:.3f}")
    for shape, values in against.items():
        print(f"median ratio to the baseline, {shape}: {statistics.median(values):.3f} over {len(values)} rounds")
PY
