#!/usr/bin/env bash
# Hugging Face GPT-2 interop, both ways, against tests/hf/hf_gpt2_numpy.py (an independent NumPy
# GPT-2 that follows HF's conventions):
#   HF -> Strata: random weights in HF's layout (with the causal-mask buffers older exports carry)
#                 give the same loss in `strata eval` as in the NumPy model;
#   Strata -> HF: a checkpoint Strata trains (f32, and bf16 storage, which saves its f32 masters)
#                 has exactly HF's tensor names and shapes and gives the same loss in NumPy.
set -euo pipefail
strata=$1
work=$2
reference=tests/hf/hf_gpt2_numpy.py
python=/usr/bin/python3  # Debian's, where python3-numpy is installed (scripts/setup.sh)
rm -rf "$work" && mkdir -p "$work"
# vocab 300 is padded to 320 inside Strata: the file must still hold exactly 300 rows.
layers=2 heads=2 width=32 vocab=300 positions=16
"$python" "$reference" make-tokens "$work/tokens.bin" 4000 $vocab 1
"$python" "$reference" make-weights "$work/hf.safetensors" $layers $heads $width $vocab $positions 2
cat > "$work/m.toml" <<TOML
[model]
n_layer = $layers
n_head = $heads
d_model = $width
vocab = $vocab
seq_len = $positions
[data]
train = "$work/tokens.bin"
[train]
steps = 5
batch = 4
lr = 1e-3
threads = 2
eval_every = 0
[checkpoint]
dir = "$work/ckpt"
[[telemetry]]
plugin = "csv"
path = "/dev/null"
TOML

source "$(dirname "$0")/hf_agree.sh"  # agree NAME EVAL_LINE NUMPY_LOSS; export_round_trip
numpy_loss() {  # safetensors file
  "$python" "$reference" loss "$1" "$work/tokens.bin" $heads $positions
}

strata_loss=$("$strata" eval "$work/m.toml" --checkpoint "$work/hf.safetensors" --data "$work/tokens.bin" | tail -n 1)
agree "HF -> Strata" "$strata_loss" "$(numpy_loss "$work/hf.safetensors")"
# The same weights as a Hugging Face directory (config.json, two bf16 shards and their index):
# [model] from takes every key from config.json (seq_len is n_positions), and the loss is NumPy's on
# the bf16 values.
"$python" tests/hf/hf_directory.py split "$work/hf.safetensors" "$work/hfdir" gpt2 2 BF16 \
  n_layer=$layers n_head=$heads n_embd=$width vocab_size=$vocab n_positions=$positions
"$python" tests/hf/hf_directory.py join "$work/hfdir" "$work/hfdir.safetensors"
{ printf '[model]\nfrom = "%s"\n' "$work/hfdir"; sed -n '/^\[data\]/,$p' "$work/m.toml"; } > "$work/from.toml"
strata_loss=$("$strata" eval "$work/from.toml" --checkpoint "$work/hfdir" --data "$work/tokens.bin" | tail -n 1)
agree "HF directory -> Strata ([model] from, sharded bf16)" "$strata_loss" \
  "$(numpy_loss "$work/hfdir.safetensors")"
set +e
output=$("$strata" validate "$work/from.toml" --set model.seq_len=8 2>&1)
set -e
grep -qF "seq_len = 8 disagrees with $work/hfdir/config.json's n_positions = $positions" <<< "$output" ||
  { echo "FAIL: a seq_len other than GPT-2's n_positions was not refused: $output"; exit 1; }
# config.json's values get the manifest's ranges (they passed validate before), and Hugging Face's
# dropouts, which Strata does not apply, are said.
edit_config() {  # FIELD=JSON_VALUE... -> a copy of hfdir with those fields, at $work/hfedit
  rm -rf "$work/hfedit" && cp -r "$work/hfdir" "$work/hfedit"
  "$python" - "$work/hfedit/config.json" "$@" <<'PY'
import json, sys
path = sys.argv[1]
config = json.load(open(path))
for assignment in sys.argv[2:]:
    field, value = assignment.split('=', 1)
    config[field] = json.loads(value)
json.dump(config, open(path, 'w'))
PY
}
for case in "n_layer=5000:n_layer = 5000 is outside the range of n_layer (1 to 1024)" \
            "n_embd=131072:n_embd = 131072 is outside the range of d_model (1 to 65536)" \
            "n_positions=100000:n_positions = 100000 is outside the range of seq_len (1 to 65536)"; do
  edit_config "${case%%:*}"
  set +e
  output=$("$strata" validate "$work/from.toml" --set "model.from=\"$work/hfedit\"" 2>&1)
  code=$?
  set -e
  [ "$code" = 2 ] && grep -qF "$work/hfedit/config.json's ${case#*:}" <<< "$output" ||
    { echo "FAIL: config.json's ${case%%:*} was not refused (exit $code): $output"; exit 1; }
done
edit_config resid_pdrop=0.1 attn_pdrop=0.1
output=$("$strata" validate "$work/from.toml" --set "model.from=\"$work/hfedit\"" 2>&1)
grep -qF "config.json: attn_pdrop = 0.1, resid_pdrop = 0.1: Strata's GPT-2 trains without dropout" <<< "$output" ||
  { echo "FAIL: GPT-2's dropouts went unsaid: $output"; exit 1; }
echo "ok: config.json's values are range-checked, its dropouts said"
# The same tokens as a version-2 (uint32) token file mean the same to both.
"$python" "$reference" make-tokens "$work/tokens_v2.bin" 4000 $vocab 1 2
strata_loss=$("$strata" eval "$work/m.toml" --checkpoint "$work/hf.safetensors" --data "$work/tokens_v2.bin" | tail -n 1)
agree "HF -> Strata (version-2 tokens)" "$strata_loss" \
  "$("$python" "$reference" loss "$work/hf.safetensors" "$work/tokens_v2.bin" $heads $positions)"
# A vocabulary over 65536: a version-2 file with ids above 65535 (21 of its 340) and a 70000-row
# wte give the same loss in both, and so does a checkpoint Strata trains on that file.
wide=70000
"$python" "$reference" make-tokens "$work/tokens_wide.bin" 340 $wide 3
"$python" "$reference" make-weights "$work/hf_wide.safetensors" $layers $heads $width $wide $positions 4
strata_loss=$("$strata" eval "$work/m.toml" --set model.vocab=$wide --checkpoint "$work/hf_wide.safetensors" \
  --data "$work/tokens_wide.bin" | tail -n 1)
agree "HF -> Strata (vocab $wide)" "$strata_loss" \
  "$("$python" "$reference" loss "$work/hf_wide.safetensors" "$work/tokens_wide.bin" $heads $positions)"
"$strata" train "$work/m.toml" --set model.vocab=$wide --set "data.train=\"$work/tokens_wide.bin\"" \
  --set "checkpoint.dir=\"$work/ckpt_wide\"" > "$work/train-wide.log" 2>&1 || { cat "$work/train-wide.log"; exit 1; }
saved="$work/ckpt_wide/step_00000005/model.safetensors"
"$python" "$reference" check-names "$saved" $layers $wide $width
strata_loss=$("$strata" eval "$work/m.toml" --set model.vocab=$wide --checkpoint "$saved" \
  --data "$work/tokens_wide.bin" | tail -n 1)
agree "Strata (vocab $wide training) -> HF" "$strata_loss" \
  "$("$python" "$reference" loss "$saved" "$work/tokens_wide.bin" $heads $positions)"

for precision in fp32 bf16; do
  rm -rf "$work/ckpt"
  "$strata" train "$work/m.toml" --set "precision.plugin=\"$precision\"" > "$work/train-$precision.log" 2>&1 ||
    { cat "$work/train-$precision.log"; exit 1; }
  saved="$work/ckpt/step_00000005/model.safetensors"
  "$python" "$reference" check-names "$saved" $layers $vocab $width
  strata_loss=$("$strata" eval "$work/m.toml" --checkpoint "$saved" --data "$work/tokens.bin" | tail -n 1)
  agree "Strata ($precision training) -> HF" "$strata_loss" \
    "$(numpy_loss "$saved")"
  # Strata -> HF directory (export --hf) and back (hf_agree.sh).
  export_round_trip "$work" $precision "$saved" "$strata_loss" 40KB 2
done
echo "hf interop: both directions agree"
