#!/usr/bin/env bash
# strata generate's decoding speed on the CPU against PyTorch (Debian's python3-torch; a KV cache as
# Hugging Face writes it, bench/torch_generate.py) on the same weights: GPT-2 124M and a 110M LLaMA
# (12 layers, d_model 768, 12 heads, 4 key/value heads, d_ff 2048, vocab 32000), random weights in
# Hugging Face's layout (tests/hf/*_numpy.py make-weights), f32, greedy, a 16-token prompt and
# NEW tokens, both on every core. Rounds alternate the two; tokens/s are decode steps (after the
# prefill) per second. The two greedy continuations are compared as a check that both computed
# the same model.
#   bash bench/generate_bench.sh [NEW=128] [ROUNDS=3] [DEVICE=cpu]
# DEVICE cuda:0 runs both on the GPU, in f32 (TF32 off on both): strata generate with [device] kind
# = "cuda:0", PyTorch with a static KV cache (bench/torch_generate.py --device cuda --static-cache).
# STRATA (default build/bin/strata) and PYTHON (default /usr/bin/python3, Debian's) name the
# programs: on the GPU machine, the bundle's strata and PyTorch 2.x's python3 (bench/gpu_check.sh
# --generate).
set -euo pipefail
cd "$(dirname "$0")/.."
new=${1:-128}
rounds=${2:-3}
device=${3:-cpu}
strata=${STRATA:-build/bin/strata}
work=${BENCH_WORK:-/tmp/strata-generate-bench}
mkdir -p "$work"
python=${PYTHON:-/usr/bin/python3}
"$python" -c 'import torch' 2>/dev/null || { echo "python3-torch is not installed: apt-get install python3-torch"; exit 2; }
torch_flags=()
[ "$device" != cpu ] && torch_flags=(--device cuda --static-cache --context 1024)
threads=$(nproc)
prompt="The quick brown fox jumps over"  # bytes as ids: a 30-token prompt (below every vocabulary)
prompt=${prompt:0:16}
prompt_ids=$("$python" -c "import sys; print(','.join(str(b) for b in sys.argv[1].encode()))" "$prompt")
[ -f "$work/gpt2.safetensors" ] || "$python" tests/hf/hf_gpt2_numpy.py make-weights "$work/gpt2.safetensors" 12 12 768 50257 1024 1
[ -f "$work/llama.safetensors" ] || "$python" tests/hf/hf_llama_numpy.py make-weights "$work/llama.safetensors" 12 12 4 768 2048 32000 1
cat > "$work/gpt2.toml" <<TOML
[model]
arch = "gpt2"
n_layer = 12
n_head = 12
d_model = 768
vocab = 50257
seq_len = 1024
[data]
train = "data/kjv.txt"
[device]
kind = "$device"
TOML
cat > "$work/llama.toml" <<TOML
[model]
arch = "llama"
n_layer = 12
n_head = 12
n_kv_head = 4
d_model = 768
d_ff = 2048
vocab = 32000
seq_len = 1024
rope_theta = 10000.0
norm_eps = 1e-5
[data]
train = "data/kjv.txt"
[device]
kind = "$device"
TOML
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); device $device; prompt ${#prompt} tokens, $new new tokens, greedy, f32"
printf '%-6s %-7s %-24s %12s %12s %s\n' round model implementation "prefill s" "decode tok/s" "same ids as torch"
for round in $(seq 1 "$rounds"); do
  for model in gpt2 llama; do
    if [ "$model" = gpt2 ]; then
      torch_json=$("$python" bench/torch_generate.py "${torch_flags[@]}" gpt2 "$work/gpt2.safetensors" 12 "$prompt_ids" "$new" "$threads")
    else
      torch_json=$("$python" bench/torch_generate.py "${torch_flags[@]}" llama "$work/llama.safetensors" 12 4 10000.0 1e-5 "$prompt_ids" "$new" "$threads")
    fi
    read -r torch_prefill torch_rate torch_ids < <("$python" -c "import json,sys; d=json.loads(sys.argv[1]); print('%.3f %.1f %s' % (d['prefill_s'], d['decode_tokens_per_s'], ' '.join(map(str, d['ids']))))" "$torch_json")
    printf '%-6s %-7s %-24s %12s %12s\n' "$round" "$model" "PyTorch $("$python" -c 'import torch; print(torch.__version__)')" "$torch_prefill" "$torch_rate"
    ours=$("$strata" generate "$work/$model.toml" --from "$work/$model.safetensors" --prompt "$prompt" \
      --max-new-tokens "$new" --temperature 0 --ids 2> "$work/strata.err")
    rate=$(sed -n 's/.*decode \([0-9.]*\) tokens\/s.*/\1/p' "$work/strata.err")
    prefill_rate=$(sed -n 's/.*prefill \([0-9.]*\) tokens\/s.*/\1/p' "$work/strata.err")
    prefill_s=$("$python" -c "print('%.3f' % (${#prompt} / $prefill_rate))")
    same=$("$python" -c "import sys; a, b = sys.argv[1].split(), sys.argv[2].split(); n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b))); print('all %d' % n if n == len(a) == len(b) else 'first %d of %d' % (n, len(a)))" "$ours" "$torch_ids")
    printf '%-6s %-7s %-24s %12s %12s %s\n' "$round" "$model" "strata generate" "$prefill_s" "$rate" "$same"
  done
done
