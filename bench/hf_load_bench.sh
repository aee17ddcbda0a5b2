#!/usr/bin/env bash
# Peak RSS while loading a Hugging Face model directory, against the bytes of the weights as the run
# stores them (issue target: at most 1.2x). A random LLaMA-shaped directory of about 500M
# parameters is written in bf16, in shards of about 256 MiB (config.json, the shards, the index:
# tests/hf/hf_directory.py's layout, generated here tensor by tensor so the generator itself stays
# small); then `strata eval` reads it with [model] from (one window of 16 tokens, so the forward
# pass adds little) under /usr/bin/time, once with f32 storage and once with bf16 storage.
#   bash bench/hf_load_bench.sh [STRATA] [WORK_DIR]
# STRATA defaults to build/bin/strata; WORK_DIR to runs/bench-hf-load (about 1 GiB of files).
set -euo pipefail
strata=${1:-build/bin/strata}
work=${2:-runs/bench-hf-load}
python=/usr/bin/python3  # Debian's, with python3-numpy (scripts/setup.sh)
mkdir -p "$work"
layers=16 width=1536 heads=12 kv_heads=4 ff=4096 vocab=32000
if [ ! -f "$work/model/config.json" ]; then
  "$python" - "$work/model" $layers $width $heads $kv_heads $ff $vocab <<'PY'
import json, os, struct, sys
import numpy as np
out, layers, width, heads, kv, ff, vocab = sys.argv[1], *map(int, sys.argv[2:])
head_dim = width // heads
shapes = {"model.embed_tokens.weight": (vocab, width), "model.norm.weight": (width,), "lm_head.weight": (vocab, width)}
for i in range(layers):
    p = f"model.layers.{i}."
    shapes.update({p + "input_layernorm.weight": (width,), p + "post_attention_layernorm.weight": (width,),
                   p + "self_attn.q_proj.weight": (width, width), p + "self_attn.k_proj.weight": (kv * head_dim, width),
                   p + "self_attn.v_proj.weight": (kv * head_dim, width), p + "self_attn.o_proj.weight": (width, width),
                   p + "mlp.gate_proj.weight": (ff, width), p + "mlp.up_proj.weight": (ff, width),
                   p + "mlp.down_proj.weight": (width, ff)})
rng = np.random.default_rng(0)
os.makedirs(out, exist_ok=True)
shard_limit, shards, current, size = 256 << 20, [], [], 0
for name in shapes:
    count = int(np.prod(shapes[name])) * 2
    if current and size + count > shard_limit:
        shards.append(current); current, size = [], 0
    current.append(name); size += count
shards.append(current)
weight_map, total = {}, 0
for s, names in enumerate(shards):
    file = "model-%05d-of-%05d.safetensors" % (s + 1, len(shards))
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        count = int(np.prod(shapes[name])) * 2
        header[name] = {"dtype": "BF16", "shape": list(shapes[name]), "data_offsets": [offset, offset + count]}
        offset += count
        weight_map[name] = file
    encoded = json.dumps(header).encode(); encoded += b" " * (-len(encoded) % 8)
    with open(os.path.join(out, file), "wb") as f:
        f.write(struct.pack("<Q", len(encoded)) + encoded)
        for name in names:
            values = rng.standard_normal(shapes[name], dtype=np.float32) * 0.02
            if name.endswith("norm.weight"): values[:] = 1.0
            f.write((values.view(np.uint32) >> 16).astype("<u2").tobytes())
    total += offset
json.dump({"metadata": {"total_size": total}, "weight_map": weight_map},
          open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=2)
json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": layers,
           "hidden_size": width, "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": ff,
           "vocab_size": vocab, "max_position_embeddings": 2048, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": False}, open(os.path.join(out, "config.json"), "w"), indent=2)
print("wrote %d shards, %.2f GB of bf16" % (len(shards), total / 1e9))
PY
  "$python" tests/hf/hf_llama_numpy.py make-tokens "$work/tokens.bin" 64 $vocab 1
fi
cat > "$work/m.toml" <<TOML
[model]
from = "$work/model"
seq_len = 16
[data]
train = "$work/tokens.bin"
[train]
batch = 1
eval_batches = 1
threads = 2
TOML
parameters=$("$strata" validate "$work/m.toml" | sed -n 's/.*, \([0-9]*\) parameters)/\1/p')
echo "model: $parameters parameters, $(du -sb "$work/model" | cut -f1) bytes on disk"
for precision in fp32 bf16; do
  /usr/bin/time -f "%M" -o "$work/rss-$precision" "$strata" eval "$work/m.toml" --checkpoint "$work/model" \
    --data "$work/tokens.bin" --set "precision.plugin=\"$precision\"" > "$work/eval-$precision.log" 2>&1
  bytes_per=$([ $precision = fp32 ] && echo 4 || echo 2)
  awk -v rss_kib="$(cat "$work/rss-$precision")" -v n="$parameters" -v b="$bytes_per" -v p="$precision" 'BEGIN {
    stored = n * b; rss = rss_kib * 1024
    printf "%s: peak RSS %.0f MiB, weights as stored %.0f MiB (%d bytes each), ratio %.2f\n",
      p, rss / 1048576, stored / 1048576, b, rss / stored }'
done
