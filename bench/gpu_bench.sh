#!/usr/bin/env bash
# GPU benchmark, run on the GPU machine from the repository root, with a bundle that
# scripts/device-bundle.sh made from a CUDA build (carried to that machine beside the working tree):
#   1. Strata's GPT-2 124M, B 16, T 1024, on cuda:0 in each set-up of bench/gpu/*.toml (fp32; bf16
#      storage; bf16 + TF32, with and without the flash attention plugin, and with flash and 8-bit
#      AdamW; bf16 with checkpointing, optimizer offload, layer streaming K=2), a few steps each;
#   2. bench/torch_gpt2_gpu.py, eager and torch.compile (bf16 autocast, f32 master weights);
#   3. one table: config, ms/step, tokens/s, peak device MiB, MFU (bench/gpu_bench_table.py).
# Strata's ms/step is the median of its JSONL step records after the first two; peak device MiB is its
# allocator's peak of live bytes; nvidia-smi's peak memory.used over its level before each run (context
# included) is sampled beside every run, Strata's and PyTorch's alike. Each run is bounded by a timeout
# and the whole by a budget (default 540 s, inside a 10-minute device call); a failed or timed-out run
# leaves its row marked and the rest go on.
#
# usage: bash bench/gpu_bench.sh [--bundle DIR] [--out DIR] [--export DIR] [--steps N] [--torch-steps N]
#                                [--peak-flops F] [--budget S] [--only strata|torch] [--configs "NAME..."]
#                                [--torch-modes "eager compile"] [--model gpt2|tinyllama] [--smoke]
#   --bundle: scripts/device-bundle.sh's OUT_DIR (default .device-bundle)
#   --out: logs, JSONL, smi samples, table.txt and table.json (default runs/gpu-bench)
#   --export: also copy table.txt, table.json and all of --out as gpu-bench.tar.gz here (e.g. "$OUT")
#   --steps: Strata's steps per run (default 10); --torch-steps: PyTorch's timed steps (default 20)
#   --peak-flops: dense bf16 FLOP/s for MFU (default 989e12, H100 SXM; the H200's is the same)
#   --configs: names in bench/gpu/ without .toml (default: all of them)
#   --torch-modes: PyTorch's modes to run (default: eager and compile)
#   --model: tinyllama runs bench/gpu/tinyllama-*.toml (a TinyLlama-1.1B-shaped LLaMA, B 4, T 2048)
#            against torch_gpt2_gpu.py --shape tinyllama-1.1b --batch 4 instead of GPT-2 124M;
#            llama-7b and llama-13b run bench/gpu/llama-7b-*.toml or llama-13b-*.toml (int8 weights,
#            8-bit AdamW state on the host, the fused update, held to 24 GiB), Strata only: PyTorch
#            has no counterpart of these stacks here
#   --smoke: tiny shapes on the CPU, to check this script where there is no GPU
set -uo pipefail
bundle=.device-bundle out=runs/gpu-bench export_dir="" steps=10 torch_steps=20 peak=989e12 budget=540 only="" smoke=0
model=gpt2 configs_given=0
torch_modes="eager compile"
configs="gpt2-124m-cuda gpt2-124m-cuda-bf16 gpt2-124m-cuda-bf16-tf32 gpt2-124m-cuda-bf16-tf32-flash
gpt2-124m-cuda-bf16-tf32-flash-adamw8bit gpt2-124m-cuda-bf16-checkpoint gpt2-124m-cuda-bf16-offload-optimizer
gpt2-124m-cuda-bf16-stream-k2"
while [ $# -gt 0 ]; do
  case $1 in
    --bundle) bundle=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --export) export_dir=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --torch-steps) torch_steps=$2; shift 2 ;;
    --peak-flops) peak=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --configs) configs=$2; configs_given=1; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --torch-modes) torch_modes=$2; shift 2 ;;
    --smoke) smoke=1; shift ;;
    *) echo "gpu_bench.sh: unknown argument '$1' (see the usage at the top of bench/gpu_bench.sh)" >&2; exit 2 ;;
  esac
done
case $only in "" | strata | torch) ;; *) echo "gpu_bench.sh: --only '$only': strata or torch" >&2; exit 2 ;; esac
[ -f bench/gpu_bench.sh ] || { echo "gpu_bench.sh: run it from the repository root" >&2; exit 2; }
python=${PYTHON:-python3}
start=$SECONDS
mkdir -p "$out"

strata_keys=()
torch_args=()
table_args=(--peak-flops "$peak")
torch_timeout_eager=90 torch_timeout_compile=240 strata_timeout=75
tokens=runs/bench/gpt2_tokens.bin tokens_vocab=50257
case $model in
  gpt2) ;;
  tinyllama)
    [ "$configs_given" = 1 ] || configs=$(cd bench/gpu && ls tinyllama-*.toml | sed 's/\.toml$//')
    torch_args=(--shape tinyllama-1.1b --batch 4)
    table_args+=(--shape "22,2048,2048,32000")
    tokens=runs/bench/llama_tokens.bin tokens_vocab=32000
    torch_timeout_eager=150 strata_timeout=150 ;;
  llama-7b | llama-13b)
    [ "$configs_given" = 1 ] || configs=$(cd bench/gpu && ls "$model"-*.toml | sed 's/\.toml$//')
    if [ "$model" = llama-7b ]; then table_args+=(--shape "32,4096,2048,32000"); else table_args+=(--shape "40,5120,2048,32000"); fi
    tokens=runs/bench/llama_tokens.bin tokens_vocab=32000
    only=strata strata_timeout=420 ;;
  *) echo "gpu_bench.sh: --model '$model': gpt2, tinyllama, llama-7b or llama-13b" >&2; exit 2 ;;
esac
if [ "$smoke" = 1 ]; then
  strata_keys=(--set 'device.kind="cpu"' --set model.n_layer=2 --set model.n_head=2 --set model.d_model=64
    --set model.seq_len=64 --set train.batch=2 --set train.threads=2)
  torch_args=(--shape tiny --device cpu --batch 2 --warmup 1 --compile-warmup 1)
  table_args+=(--shape "2,64,64,$tokens_vocab")
  if [ "$model" = tinyllama ]; then  # and flash_bf16, which runs on CUDA only, becomes flash
    strata_keys+=(--set model.n_kv_head=1 --set model.d_ff=96 --set 'kernels.attention="flash"')
    torch_args=(--shape tiny-llama --device cpu --batch 2 --warmup 1 --compile-warmup 1)
  fi
  steps=4 torch_steps=3
fi

# A run's timeout: its own cap, or what is left of the budget if less (0: skip it).
timeout_for() {
  local left=$((budget - (SECONDS - start)))
  [ "$left" -lt "$1" ] && echo $((left > 10 ? left : 0)) || echo "$1"
}
smi_pid=""
start_smi() {  # nvidia-smi's memory.used, one line before the run, then every 100 ms
  : > "$1"
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits > "$1" 2>/dev/null
  nvidia-smi -i 0 --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >> "$1" 2>/dev/null &
  smi_pid=$!
}
stop_smi() {
  [ -n "$smi_pid" ] && kill "$smi_pid" 2>/dev/null && wait "$smi_pid" 2>/dev/null
  smi_pid=""
}
trap stop_smi EXIT

echo "== gpu_bench: $(date -u +%FT%TZ), repository $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
strata_rows=()
if [ "$only" != torch ]; then
  [ -f "$bundle/env.sh" ] || { echo "gpu_bench.sh: no bundle at '$bundle' (scripts/device-bundle.sh BUILD_DIR $bundle)" >&2; exit 2; }
  # shellcheck source=/dev/null
  . "$bundle/env.sh" || exit 1
  echo "== Strata bundle of commit $STRATA_BUNDLE_COMMIT; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  mkdir -p "$(dirname "$tokens")"
  [ -f "$tokens" ] || "$python" bench/make_gpt2_tokens.py "$tokens" 1000000 "$tokens_vocab" || exit 1
  for name in $configs; do
    manifest=bench/gpu/$name.toml
    [ -f "$manifest" ] || { echo "gpu_bench.sh: no manifest $manifest" >&2; exit 2; }
    limit=$(timeout_for "$strata_timeout")
    if [ "$limit" = 0 ]; then
      echo "== $name: skipped (budget of $budget s spent)"
      continue
    fi
    rm -f "$out/$name.jsonl"
    echo "== $name: $steps steps (timeout ${limit} s)"
    start_smi "$out/$name.smi"
    timeout -k 10 "$limit" strata train "$manifest" --set "train.steps=$steps" \
      --set "telemetry.0.path=\"$out/$name.jsonl\"" "${strata_keys[@]}" > "$out/$name.log" 2>&1
    rc=$?
    stop_smi
    if [ "$rc" != 0 ]; then
      echo "   exit $rc$([ "$rc" = 124 ] && echo ' (timed out)'); the log's end:"
      tail -n 5 "$out/$name.log" | sed 's/^/   | /'
    fi
    strata_rows+=("$name=$out/$name.jsonl,$out/$name.smi")
  done
fi

torch_rows=()
if [ "$only" != strata ]; then
  for mode in $torch_modes; do
    cap=$torch_timeout_eager
    [ "$mode" = compile ] && cap=$torch_timeout_compile
    limit=$(timeout_for "$cap")
    if [ "$limit" = 0 ]; then
      echo "== torch $mode: skipped (budget of $budget s spent)"
      continue
    fi
    echo "== torch $mode: $torch_steps timed steps (timeout ${limit} s)"
    start_smi "$out/torch-$mode.smi"
    PYTHONUNBUFFERED=1 timeout -k 10 "$limit" "$python" bench/torch_gpt2_gpu.py --modes "$mode" --steps "$torch_steps" \
      --peak-flops "$peak" --json "$out/torch-$mode.json" "${torch_args[@]}" > "$out/torch-$mode.log" 2>&1
    rc=$?
    stop_smi
    if [ "$rc" != 0 ]; then
      echo "   exit $rc$([ "$rc" = 124 ] && echo ' (timed out)'); the log's end:"
      tail -n 5 "$out/torch-$mode.log" | sed 's/^/   | /'
    fi
    torch_rows+=(--torch "$out/torch-$mode.json,$out/torch-$mode.smi")
  done
fi

echo "== $((SECONDS - start)) s in all"
"$python" bench/gpu_bench_table.py "${table_args[@]}" "${strata_rows[@]}" "${torch_rows[@]}" \
  --json "$out/table.json" | tee "$out/table.txt"
if [ -n "$export_dir" ]; then
  mkdir -p "$export_dir"
  cp "$out/table.txt" "$out/table.json" "$export_dir/"
  tar -czf "$export_dir/gpu-bench.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
fi
