#!/usr/bin/env bash
# Engine benchmark (run by hand): ms/step, tokens/s and peak device bytes, fp32 + AdamW, for
#   tiny:  n_layer 4, d_model 256, n_head 4, vocab 256,   T 128, B 8
#   gpt2:  n_layer 12, d_model 768, n_head 12, vocab 50257, T 64, B 4   (124M parameters)
# then the same models in PyTorch (bench/torch_reference.py) with Debian's python3-torch (/usr/bin/python3).
# Usage: bash bench/engine_bench.sh [steps]   (from the repository root, after scripts/setup.sh)
set -euo pipefail
steps=${1:-20}
strata=./build/bin/strata
out=runs/bench && mkdir -p "$out"
run() {  # name, overrides...
  local name=$1; shift
  echo "== strata $name ($steps steps, 2 threads)"
  "$strata" train bench/engine.toml --profile --set train.steps="$steps" --set "telemetry.0.path=\"$out/$name.jsonl\"" "$@" \
    | sed -n '/^summary/,$p'
}
run tiny --set model.n_layer=4 --set model.d_model=256 --set model.n_head=4 --set model.vocab=256 --set model.seq_len=128 --set train.batch=8
python3 bench/make_gpt2_tokens.py "$out/gpt2_tokens.bin"
run gpt2 --set model.n_layer=12 --set model.d_model=768 --set model.n_head=12 --set model.vocab=50257 --set model.seq_len=64 \
  --set train.batch=4 --set data.train=\"$out/gpt2_tokens.bin\"
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  for shape in tiny gpt2; do
    echo "== torch $shape, OpenMP OpenBLAS"
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_reference.py "$shape" "$steps"
    echo "== torch $shape, OMP_WAIT_POLICY=PASSIVE"
    OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=2 /usr/bin/python3 bench/torch_reference.py "$shape" "$steps"
  done
else
  echo "python3-torch is not installed: apt-get install python3-torch for the PyTorch reference"
fi
