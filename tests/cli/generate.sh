#!/usr/bin/env bash
# strata generate against independent NumPy models (tests/hf/hf_gpt2_numpy.py, hf_llama_numpy.py):
# the greedy continuation (32 tokens, KV cache, prefill then one token per step) of a byte prompt
# equals the reference's, which recomputes the whole sequence for every token, for GPT-2, LLaMA
# and Qwen2; a seeded sample repeats; the context length stops generation and says so; a long
# prompt is cut from the front with a warning; bad arguments are refused (exit 2).
source "$(dirname "$0")/expect.sh" "$1" "$2"
python=/usr/bin/python3
prompt="Hello, world"
prompt_ids=$("$python" -c "import sys; print(','.join(str(b) for b in sys.argv[1].encode()))" "$prompt")

check_greedy() {  # NAME MANIFEST WEIGHTS REFERENCE_OUTPUT
  local ours want margin
  ours=$("$strata" generate "$2" --from "$3" --prompt "$prompt" --max-new-tokens 32 --temperature 0 --ids 2> "$work/gen.err") ||
    fail "$1: generate failed: $(cat "$work/gen.err")"
  want=$(echo "$4" | head -n 1)
  margin=$(echo "$4" | tail -n 1)
  [ "$ours" = "$want" ] || fail "$1: greedy continuation differs from the NumPy reference (smallest margin $margin)
strata: $ours
numpy:  $want"
  grep -q "decode .* tokens/s" "$work/gen.err" || fail "$1: no speed line: $(cat "$work/gen.err")"
  echo "ok: $1 greedy 32 tokens = NumPy's (smallest top-2 margin $margin)"
}

# GPT-2: 2 layers, 48 positions (the prompt and 32 new tokens fit), vocab 300 (bytes are ids).
"$python" tests/hf/hf_gpt2_numpy.py make-weights "$work/gpt2.safetensors" 2 2 32 300 48 4
cat > "$work/gpt2.toml" <<TOML
[model]
arch = "gpt2"
n_layer = 2
n_head = 2
d_model = 32
vocab = 300
seq_len = 48
[data]
train = "data/kjv.txt"
TOML
check_greedy gpt2 "$work/gpt2.toml" "$work/gpt2.safetensors" \
  "$("$python" tests/hf/hf_gpt2_numpy.py greedy "$work/gpt2.safetensors" 2 "$prompt_ids" 32)"

for arch in llama qwen2; do
  flag=()
  [ "$arch" = qwen2 ] && flag=(--qkv-bias)
  "$python" tests/hf/hf_llama_numpy.py make-weights "$work/$arch.safetensors" 2 4 2 32 64 300 5 "${flag[@]}"
  cat > "$work/$arch.toml" <<TOML
[model]
arch = "$arch"
n_layer = 2
n_head = 4
n_kv_head = 2
d_model = 32
d_ff = 64
vocab = 300
seq_len = 64
rope_theta = 500000.0
norm_eps = 1e-5
[data]
train = "data/kjv.txt"
TOML
  check_greedy "$arch" "$work/$arch.toml" "$work/$arch.safetensors" \
    "$("$python" tests/hf/hf_llama_numpy.py greedy "$work/$arch.safetensors" "$prompt_ids" 32 4 2 500000.0 1e-5 "${flag[@]}")"
done

# The manifest's weight storage applies: bf16 and int8 weights generate too (the matmuls of the
# training path; their continuations may part from f32's where two logits nearly tie).
for precision in 'plugin = "bf16"\nweights = "bf16"\nactivations = "bf16"' 'plugin = "int8"\nactivations = "f32"'; do
  { cat "$work/llama.toml"; printf "[precision]\n$precision\n"; } > "$work/llama_stored.toml"
  stored=$("$strata" generate "$work/llama_stored.toml" --from "$work/llama.safetensors" --prompt "$prompt" --ids \
    --max-new-tokens 16 --temperature 0 2> "$work/stored.err") || fail "generate with $precision: $(cat "$work/stored.err")"
  [ "$(wc -w <<< "$stored")" = 16 ] || fail "generate with $precision gave: $stored"
done
echo "ok: bf16 and int8 weights generate"

# A seeded sample repeats exactly; another seed gives another sample.
sample() { "$strata" generate "$work/llama.toml" --from "$work/llama.safetensors" --prompt "$prompt" --ids \
  --max-new-tokens 32 --temperature 1 --top-k 50 --top-p 0.95 --seed "$1" 2> /dev/null; }
[ "$(sample 7)" = "$(sample 7)" ] || fail "the same seed sampled two different continuations"
[ "$(sample 7)" != "$(sample 8)" ] || fail "seeds 7 and 8 sampled the same 32 tokens"
echo "ok: a seeded sample repeats"

# The context: 48 positions for GPT-2; a 40-byte prompt leaves room for 9 new tokens.
expect 0 "stopped at the model's context length" -- "$strata" generate "$work/gpt2.toml" --from "$work/gpt2.safetensors" \
  --prompt "$(printf 'x%.0s' $(seq 40))" --max-new-tokens 100 --temperature 0
grep -q "| 9 new tokens" <<< "$output" || fail "40 prompt tokens in 48 positions should leave 9 new tokens: $output"
expect 0 "its first 13 tokens are dropped" -- "$strata" generate "$work/gpt2.toml" --from "$work/gpt2.safetensors" \
  --prompt "$(printf 'y%.0s' $(seq 60))" --max-new-tokens 2 --temperature 0

# A context of one position keeps the prompt's last token and gives one new one (the prompt was
# dropped whole: an internal error, exit 1).
{ sed 's/^seq_len = 48$/seq_len = 1/' "$work/gpt2.toml"; } > "$work/gpt2_one.toml"
"$python" tests/hf/hf_gpt2_numpy.py make-weights "$work/gpt2_one.safetensors" 2 2 32 300 1 4
fault "generate: a model of one position (seq_len 1)" 0 "| 1 new tokens" -- "$strata" generate "$work/gpt2_one.toml" --from "$work/gpt2_one.safetensors" \
  --prompt "In the" --max-new-tokens 5 --temperature 0
echo "ok: a context of one position"

# train.sample_every: a greedy sample in the training log, and a prompt the run cannot encode refused.
"$strata" train "$work/gpt2.toml" --set train.steps=4 --set train.batch=2 --set train.sample_every=2 \
  --set 'train.sample_prompt="In the"' --set train.sample_tokens=5 > "$work/sample.log" 2>&1 ||
  fail "train with sample_every failed: $(cat "$work/sample.log")"
[ "$(grep -c "greedy sample of 5 tokens after 6 of prompt" "$work/sample.log")" = 2 ] ||
  fail "two samples (steps 2 and 4) expected: $(cat "$work/sample.log")"
echo "ok: train.sample_every logs a greedy sample"
"$python" -c "
import sys, numpy as np
header = np.zeros(256, dtype='<i4'); header[:3] = (20240520, 1, 4096)
open(sys.argv[1], 'wb').write(header.tobytes() + np.arange(4096, dtype='<u2').__mod__(300).astype('<u2').tobytes())
" "$work/ids.bin"
fault "train: sample_prompt with a token file and no tokenizer" 2 "train.sample_prompt is text, but" -- \
  "$strata" train "$work/gpt2.toml" --set "data.train=\"$work/ids.bin\"" --set train.sample_every=2 \
  --set 'train.sample_prompt="In the"'
fault "validate: a sample_prompt that fills the context" 2 "train.sample_prompt is 48 tokens" -- \
  "$strata" validate "$work/gpt2.toml" --set train.sample_every=2 --set "train.sample_prompt=\"$(printf 'x%.0s' $(seq 48))\""
# Without a tokenizer, a token file's sample is ids: the continuation's are apart from the prompt's.
"$strata" train "$work/gpt2.toml" --set "data.train=\"$work/ids.bin\"" --set train.steps=2 --set train.batch=2 \
  --set train.sample_every=2 --set train.sample_tokens=3 > "$work/ids_sample.log" 2>&1 ||
  fail "train on ids with a sample: $(cat "$work/ids_sample.log")"
grep -A1 "greedy sample of 3 tokens after 8 of prompt" "$work/ids_sample.log" | tail -n 1 |
  grep -qE '^([0-9]+ ){10}[0-9]+$' || fail "the sample's 11 ids are not apart: $(cat "$work/ids_sample.log")"

# Bad arguments.
g=(generate "$work/gpt2.toml" --from "$work/gpt2.safetensors")
fault "generate: both --prompt and --prompt-file" 2 "give exactly one of --prompt and --prompt-file" -- \
  "$strata" "${g[@]}" --prompt a --prompt-file "$work/gpt2.toml"
fault "generate: --top-p 0" 2 "--top-p must be in (0, 1]" -- "$strata" "${g[@]}" --prompt a --top-p 0
fault "generate: --seed -1" 2 "--seed -1 is not a whole number from 0 to 2^64-1" -- \
  "$strata" "${g[@]}" --prompt a --seed -1
fault "generate: --seed 7x" 2 "--seed 7x is not a whole number" -- "$strata" "${g[@]}" --prompt a --seed 7x
fault "generate: no weights named" 2 "no weights to generate with" -- "$strata" generate "$work/gpt2.toml" --prompt a
fault "generate: weights of another shape" 2 "gpt2.safetensors" -- \
  "$strata" generate "$work/gpt2.toml" --from "$work/gpt2.safetensors" --set model.d_model=64 --prompt a
fault "generate: a prompt file that is missing" 2 "no such file" -- "$strata" "${g[@]}" --prompt-file "$work/none.txt"
echo "generate: all passed"
