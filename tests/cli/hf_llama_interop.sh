#!/usr/bin/env bash
# Hugging Face LLaMA interop, both ways, against tests/hf/hf_llama_numpy.py (an independent NumPy
# LLaMA in float64 that follows HF's modeling_llama conventions: RMSNorm, rotate_half RoPE with
# rope_theta, grouped-query attention, SwiGLU, no biases), once with an untied lm_head and once
# with tie_embeddings = true. With a third argument `qwen2` the same for arch = "qwen2", HF's
# Qwen2ForCausalLM: the reference's --qkv-bias, LLaMA with q, k and v projection biases added
# before RoPE (the files must hold every layer's three; a llama file must hold none); with
# `mistral`, arch = "mistral", HF's MistralForCausalLM: the reference's --sliding-window, LLaMA
# whose positions attend to themselves and the 4 before (sliding_window = 5 of 16 positions; the
# generation below runs 32 positions through the window of the decoding cache); with `gemma`,
# arch = "gemma", HF's GemmaForCausalLM: the reference's --gemma --head-dim=16 (RMSNorm gains 1 + w,
# embeddings times sqrt(d_model), a GeGLU MLP with the tanh GELU, heads 16 wide over a d_model of
# 32, so q_proj is (64, 32)), tied only, as Gemma always is:
#   HF -> Strata: random weights in HF's layout give the same loss in `strata eval` as in NumPy;
#   Strata -> HF: a checkpoint Strata trains from that file (train.init_from; f32, and bf16
#                 storage, which saves its f32 masters) has exactly HF's tensor names and shapes
#                 (no lm_head.weight when tied) and gives the same loss in NumPy. Starting from the
#                 HF file (5 steps at lr 1e-3 move no value by more than ~3e-3) keeps the weights
#                 where the mistakes below show, and Qwen2's biases far from Strata's zero init.
# The shape, rope_theta, norm_eps, seeds and token count are hf_llama_numpy.py's INTEROP: its
# selftest (run first) shows that on exactly these weights and tokens each convention mistake it
# lists (RoPE layout or theta, kv head mapping, swapped or transposed projections, ignored norm
# weights, a head from embed_tokens; for qwen2 also each bias ignored, k and v biases swapped, q
# and k biases added after RoPE) moves the loss by over 10x the 1e-5 allowed here. norm_eps is the
# exception: on random weights it moves the loss by less than that, so this test cannot see it
# and the rmsnorm op's test must.
set -euo pipefail
strata=$1
work=$2
arch=${3:-llama}
manifest_extra="" config_extra=()
case $arch in
  llama) family=() ;;
  qwen2) family=(--qkv-bias) ;;
  # Mistral: LLaMA with a sliding window of 5 positions over 16 (the reference's --sliding-window).
  mistral) family=(--sliding-window=5) manifest_extra="sliding_window = 5" config_extra=(sliding_window=5) ;;
  gemma) family=(--gemma --head-dim=16) manifest_extra="head_dim = 16"
    config_extra=(head_dim=16 'hidden_act="gelu_pytorch_tanh"' 'hidden_activation="gelu_pytorch_tanh"') ;;
  *) echo "arch '$arch': llama, qwen2, mistral or gemma" >&2; exit 2 ;;
esac
ties=(false true)
[ "$arch" = gemma ] && ties=(true)  # Gemma's head is always the tied embedding
reference=tests/hf/hf_llama_numpy.py
python=/usr/bin/python3  # Debian's, where python3-numpy is installed (scripts/setup.sh)
rm -rf "$work" && mkdir -p "$work"
"$python" "$reference" selftest > "$work/selftest.log" || { cat "$work/selftest.log"; exit 1; }
tail -n 1 "$work/selftest.log"
# vocab 300 is padded inside Strata: the files must still hold exactly 300 rows.
layers=2 heads=4 kv_heads=2 width=32 ff=64 vocab=300 positions=16 theta=500000.0 eps=1e-5
"$python" "$reference" make-tokens "$work/tokens.bin" 4000 $vocab 1

source "$(dirname "$0")/hf_agree.sh"  # agree NAME EVAL_LINE NUMPY_LOSS; export_round_trip

numpy_loss() {  # safetensors file; tied, and biased (qwen2), or not as $flag says
  "$python" "$reference" loss "$1" "$work/tokens.bin" $heads $kv_heads $positions $theta $eps "${flag[@]}"
}

for tied in "${ties[@]}"; do
  run="$work/tied-$tied"
  mkdir -p "$run"
  flag=("${family[@]}")
  if [ "$tied" = true ]; then flag+=(--tied); fi
  cat > "$run/m.toml" <<TOML
[model]
arch = "$arch"
n_layer = $layers
n_head = $heads
n_kv_head = $kv_heads
d_model = $width
d_ff = $ff
vocab = $vocab
seq_len = $positions
rope_theta = $theta
norm_eps = $eps
tie_embeddings = $tied
$manifest_extra
[data]
train = "$work/tokens.bin"
[train]
steps = 5
batch = 4
lr = 1e-3
threads = 2
eval_every = 0
[checkpoint]
dir = "$run/ckpt"
[[telemetry]]
plugin = "csv"
path = "/dev/null"
TOML
  "$python" "$reference" make-weights "$run/hf.safetensors" $layers $heads $kv_heads $width $ff $vocab 2 "${flag[@]}"
  strata_loss=$("$strata" eval "$run/m.toml" --checkpoint "$run/hf.safetensors" --data "$work/tokens.bin" | tail -n 1)
  agree "HF -> Strata (tie_embeddings = $tied)" "$strata_loss" "$(numpy_loss "$run/hf.safetensors")"

  # The same weights as a Hugging Face directory (config.json, two bf16 shards and their index):
  # [model] from takes every key from config.json, and the loss is NumPy's on the bf16 values.
  "$python" tests/hf/hf_directory.py split "$run/hf.safetensors" "$run/hfdir" $arch 2 BF16 \
    num_hidden_layers=$layers num_attention_heads=$heads num_key_value_heads=$kv_heads hidden_size=$width \
    intermediate_size=$ff vocab_size=$vocab max_position_embeddings=64 rope_theta=$theta rms_norm_eps=$eps \
    tie_word_embeddings=$tied "${config_extra[@]}"
  "$python" tests/hf/hf_directory.py join "$run/hfdir" "$run/hfdir.safetensors"
  { printf '[model]\nfrom = "%s"\nseq_len = %s\n' "$run/hfdir" $positions; sed -n '/^\[data\]/,$p' "$run/m.toml"; } \
    > "$run/from.toml"
  strata_loss=$("$strata" eval "$run/from.toml" --checkpoint "$run/hfdir" --data "$work/tokens.bin" | tail -n 1)
  agree "HF directory -> Strata ([model] from, sharded bf16, tie_embeddings = $tied)" "$strata_loss" \
    "$(numpy_loss "$run/hfdir.safetensors")"
  # The same directory in F16, one file: model.safetensors beside config.json.
  "$python" tests/hf/hf_directory.py split "$run/hf.safetensors" "$run/hfdir16" $arch 1 F16 \
    num_hidden_layers=$layers num_attention_heads=$heads num_key_value_heads=$kv_heads hidden_size=$width \
    intermediate_size=$ff vocab_size=$vocab max_position_embeddings=64 rope_theta=$theta rms_norm_eps=$eps \
    tie_word_embeddings=$tied "${config_extra[@]}"
  "$python" tests/hf/hf_directory.py join "$run/hfdir16" "$run/hfdir16.safetensors"
  strata_loss=$("$strata" eval "$run/from.toml" --set "model.from=\"$run/hfdir16\"" --checkpoint "$run/hfdir16" \
    --data "$work/tokens.bin" | tail -n 1)
  agree "HF directory -> Strata ([model] from, one f16 file, tie_embeddings = $tied)" "$strata_loss" \
    "$(numpy_loss "$run/hfdir16.safetensors")"
  rm -rf "$run/ckpt"
  "$strata" train "$run/from.toml" --set train.steps=2 > "$run/train-from.log" 2>&1 || { cat "$run/train-from.log"; exit 1; }
  grep -q "weights from $run/hfdir" "$run/train-from.log" || { echo "FAIL: the run did not start from $run/hfdir"; exit 1; }

  for precision in fp32 bf16; do
    rm -rf "$run/ckpt"
    "$strata" train "$run/m.toml" --set "precision.plugin=\"$precision\"" \
      --set "train.init_from=\"$run/hf.safetensors\"" > "$run/train-$precision.log" 2>&1 ||
      { cat "$run/train-$precision.log"; exit 1; }
    saved="$run/ckpt/step_00000005/model.safetensors"
    "$python" "$reference" check-names "$saved" $layers $vocab $width $ff $heads $kv_heads "${flag[@]}"
    strata_loss=$("$strata" eval "$run/m.toml" --checkpoint "$saved" --data "$work/tokens.bin" | tail -n 1)
    agree "Strata ($precision training, tie_embeddings = $tied) -> HF" "$strata_loss" "$(numpy_loss "$saved")"

    # Strata -> HF directory (export --hf, shards of at most 24 KB) and back (hf_agree.sh).
    export_round_trip "$run" $precision "$saved" "$strata_loss" 24KB 3
  done
done
# Llama 3's rope_scaling (Llama 3.1, 3.2): a directory whose config.json has it gives NumPy's loss
# with the scaled frequencies, which is not the loss without them. Wavelengths of this shape's
# four frequencies (head_dim 8, theta 500000): 6, 167, 4443 and 118000 positions; against an
# original context of 16, the first is blended and the others divided by the factor.
tied=${ties[0]}
run="$work/tied-$tied"
flag=("${family[@]}")
if [ "$tied" = true ]; then flag+=(--tied); fi
scaling='{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 16}'
"$python" tests/hf/hf_directory.py split "$run/hf.safetensors" "$run/scaled" $arch 1 F32 \
  num_hidden_layers=$layers num_attention_heads=$heads num_key_value_heads=$kv_heads hidden_size=$width \
  intermediate_size=$ff vocab_size=$vocab max_position_embeddings=64 rope_theta=$theta rms_norm_eps=$eps \
  tie_word_embeddings=$tied "rope_scaling=$scaling" "${config_extra[@]}"
strata_loss=$("$strata" eval "$run/from.toml" --set "model.from=\"$run/scaled\"" --checkpoint "$run/scaled" \
  --data "$work/tokens.bin" | tail -n 1)
scaled_loss=$("$python" "$reference" loss "$run/hf.safetensors" "$work/tokens.bin" $heads $kv_heads $positions $theta $eps \
  "${flag[@]}" "--rope-scaling=$scaling")
agree "HF directory with Llama 3 rope_scaling -> Strata" "$strata_loss" "$scaled_loss"
# (Not under Mistral's window: its positions see 4 before them at most, where the scaled and the
# plain frequencies turn a pair of positions by nearly the same angle: 6e-4 apart.)
[ "$arch" = mistral ] ||
  "$python" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); assert abs(a - b) / b > 1e-3, (a, b)" \
    "$scaled_loss" "$(numpy_loss "$run/hf.safetensors")" || { echo "FAIL: the scaling does not change the loss"; exit 1; }
# Generation reads the same frequencies: 16 greedy tokens equal NumPy's full recomputation.
prompt_ids=$("$python" -c "print(','.join(str(b) for b in b'Hello'))")
# (The whole output first: `| head -n 1` can end the writer early, a broken pipe under pipefail.)
want=$("$python" "$reference" greedy "$run/hf.safetensors" "$prompt_ids" 16 $heads $kv_heads $theta $eps "${flag[@]}" \
  "--rope-scaling=$scaling")
want=${want%%$'\n'*}
ours=$("$strata" generate "$run/from.toml" --set "model.from=\"$run/scaled\"" --set model.seq_len=32 --prompt Hello --max-new-tokens 16 \
  --temperature 0 --ids 2> /dev/null)
[ "$ours" = "$want" ] || { echo "FAIL: greedy with rope_scaling: strata $ours, numpy $want"; exit 1; }
echo "ok: greedy generation with rope_scaling = NumPy's"
# Generation needs the model and its weights, not training data: a manifest of [model] alone.
printf '[model]\nfrom = "%s"\nseq_len = 32\n' "$run/scaled" > "$run/model-only.toml"
ours=$("$strata" generate "$run/model-only.toml" --prompt Hello --max-new-tokens 16 --temperature 0 --ids 2> /dev/null)
[ "$ours" = "$want" ] || { echo "FAIL: generate with a [model]-only manifest: $ours, numpy $want"; exit 1; }
echo "ok: generate needs no [data] train"
# examples/finetune-hf.toml (docs/fine-tune-hf.md) on this directory: two steps of LoRA on its base.
if [ "$arch" = llama ]; then
  "$strata" train examples/finetune-hf.toml --set "model.from=\"$run/hfdir\"" --set model.seq_len=16 \
    --set "data.train=\"$work/tokens.bin\"" --set "data.val=\"$work/tokens.bin\"" --set strategy.0.rank=4 \
    --set train.steps=2 --set train.eval_every=0 --set "checkpoint.dir=\"$work/finetune-hf\"" > "$work/finetune-hf.log" 2>&1 ||
    { cat "$work/finetune-hf.log"; exit 1; }
  grep -q "the base weights come from $run/hfdir" "$work/finetune-hf.log" ||
    { echo "FAIL: the fine-tune drew random base weights before loading $run/hfdir"; cat "$work/finetune-hf.log"; exit 1; }
  echo "ok: examples/finetune-hf.toml trains from a directory, its base not drawn first"
fi
# Exported from a directory ([model] from), the model keeps its own record: config.json's special
# ids (bos where the tokenizer names none, as Qwen2's; a list of eos ids, as Llama 3.1's) and its
# generation_config.json as it is; the directory gets the user's umask like any they make (mkdtemp's
# 0700 before).
src="$work/with-ids"
rm -rf "$src" "$work/export-ids" && cp -r "$run/hfdir" "$src"
edit_json() { "$python" -c 'import json, sys; f = sys.argv[1]; d = json.load(open(f)); exec(sys.argv[2]); json.dump(d, open(f, "w"))' "$@"; }
edit_json "$src/config.json" 'd.update(bos_token_id=7, eos_token_id=[8, 9])'
printf '{\n  "do_sample": true,\n  "temperature": 0.6,\n  "eos_token_id": [8, 9]\n}\n' > "$src/generation_config.json"
(umask 022 && "$strata" export "$run/from.toml" --set "model.from=\"$src\"" --checkpoint "$src" --hf "$work/export-ids" \
  > "$work/export-ids.log") || { cat "$work/export-ids.log"; exit 1; }
grep -q "generation_config.json" "$work/export-ids.log" || { echo "FAIL: no generation_config.json reported"; exit 1; }
cmp -s "$src/generation_config.json" "$work/export-ids/generation_config.json" ||
  { echo "FAIL: generation_config.json was not carried over as it is"; exit 1; }
"$python" -c 'import json, sys; d = json.load(open(sys.argv[1])); assert (d["bos_token_id"], d["eos_token_id"]) == (7, [8, 9]), d' \
  "$work/export-ids/config.json" || { echo "FAIL: the source's special ids were lost"; exit 1; }
[ "$(stat -c %a "$work/export-ids")" = 755 ] || { echo "FAIL: export directory mode $(stat -c %a "$work/export-ids")"; exit 1; }
echo "ok: an export from a directory keeps its special ids and generation_config.json, mode 755 under umask 022"
# A Hugging Face directory that Strata cannot read as written is refused, exit 2, naming the file
# and the field or tensor.
refused() {  # CODE TEXT -- COMMAND...
  local code=$1 text=$2; shift 3
  set +e; output=$("$@" 2>&1); actual=$?; set -e
  [ "$actual" = "$code" ] && grep -qF -- "$text" <<< "$output" ||
    { echo "FAIL: '$*' exited $actual (expected $code) and said: $output"; exit 1; }
  echo "ok ($code): $text"
}
bad="$work/bad" from="$work/tied-$tied/from.toml" dir="$work/tied-$tied/hfdir"
fresh() { rm -rf "$bad" && cp -r "$dir" "$bad"; }
fresh
if [ "$arch" = gemma ]; then
  # What is not Gemma: exact GELU, an untied head (in config.json or in [model]).
  edit_json "$bad/config.json" 'd["hidden_activation"] = "gelu"'
  refused 2 "$bad/config.json: hidden_activation: \"gelu\" is not implemented: Gemma's MLP is GeGLU with the tanh GELU" -- \
    "$strata" validate "$from" --set model.from=\"$bad\"
  fresh && edit_json "$bad/config.json" 'del d["hidden_activation"]; d["hidden_act"] = "silu"'
  refused 2 "$bad/config.json: hidden_act: \"silu\" is not implemented" -- "$strata" validate "$from" --set model.from=\"$bad\"
  # The first hub files: hidden_act "gelu" and no hidden_activation, which transformers ran as the
  # tanh GELU: read as that.
  fresh && edit_json "$bad/config.json" 'del d["hidden_activation"]; d["hidden_act"] = "gelu"'
  "$strata" validate "$from" --set model.from=\"$bad\" > /dev/null || { echo "FAIL: hidden_act gelu refused"; exit 1; }
  echo "ok: hidden_act \"gelu\" without hidden_activation is Gemma's tanh GELU"
  fresh && edit_json "$bad/config.json" 'd["tie_word_embeddings"] = False'
  refused 2 "$bad/config.json: tie_word_embeddings: false is not Gemma" -- \
    "$strata" validate "$from" --set model.from=\"$bad\"
  refused 2 "arch = \"gemma\" always ties its head to the embeddings" -- \
    "$strata" validate "$work/tied-true/m.toml" --set model.tie_embeddings=false
  refused 2 "head_dim = 15 is odd" -- "$strata" validate "$work/tied-true/m.toml" --set model.head_dim=15
  exit 0
fi
refused 2 "n_layer = 3 disagrees with $dir/config.json's num_hidden_layers = $layers" -- \
  "$strata" validate "$from" --set model.n_layer=3
refused 2 "init_from and [model] from both name the starting weights" -- \
  "$strata" validate "$from" --set train.init_from=\"$work/tied-false/hf.safetensors\"
edit_json "$bad/config.json" 'd["rope_scaling"] = {"rope_type": "yarn", "factor": 8.0}'
refused 2 "$bad/config.json: rope_scaling: rope_type \"yarn\" is not implemented" -- \
  "$strata" validate "$from" --set model.from=\"$bad\"
fresh && edit_json "$bad/config.json" 'd["rope_scaling"] = {"rope_type": "llama3"}'
refused 2 "rope_scaling: factor: missing" -- "$strata" validate "$from" --set model.from=\"$bad\"
fresh && edit_json "$bad/config.json" 'd["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0}'
refused 2 "rope_scaling_factor = 4 disagrees with $bad/config.json's rope_scaling.factor = 8" -- \
  "$strata" validate "$from" --set model.from=\"$bad\" --set model.rope_scaling_factor=4.0
refused 2 "rope_scaling = \"llama3\" needs rope_scaling_factor" -- \
  "$strata" validate "$work/tied-false/m.toml" --set model.rope_scaling=\"llama3\"
refused 2 "rope_low_freq_factor needs rope_scaling = \"llama3\"" -- \
  "$strata" validate "$work/tied-false/m.toml" --set model.rope_low_freq_factor=2.0
fresh && edit_json "$bad/config.json" 'd["architectures"] = ["PhiForCausalLM"]'
refused 2 "architectures: \"PhiForCausalLM\" is not one Strata builds" -- \
  "$strata" validate "$from" --set model.from=\"$bad\"
fresh && rm "$bad/model-00002-of-00002.safetensors"
refused 2 "$bad/model-00002-of-00002.safetensors: a shard model.safetensors.index.json names is missing" -- \
  "$strata" eval "$from" --set model.from=\"$bad\" --checkpoint "$bad" --data "$work/tokens.bin"
fresh && edit_json "$bad/model.safetensors.index.json" \
  'w = d["weight_map"]; w["model.norm.weight"] = [s for s in set(w.values()) if s != w["model.norm.weight"]][0]'
refused 2 "names tensor 'model.norm.weight' in" -- \
  "$strata" eval "$from" --set model.from=\"$bad\" --checkpoint "$bad" --data "$work/tokens.bin"
fresh && edit_json "$bad/config.json" 'd["tie_word_embeddings"] = True'
refused 2 "holds an lm_head.weight unlike its model.embed_tokens.weight" -- \
  "$strata" eval "$from" --set model.from=\"$bad\" --checkpoint "$bad" --data "$work/tokens.bin"
# export --hf refuses an output it would have to replace, and writes nothing.
run="$work/tied-false"
mkdir -p "$work/occupied" && echo keep > "$work/occupied/notes.txt"
refused 2 "--hf $work/occupied: holds files already" -- \
  "$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$work/occupied"
refused 2 "--hf $work/occupied/notes.txt: is a file, not a directory" -- \
  "$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$work/occupied/notes.txt"
[ "$(cat "$work/occupied/notes.txt")" = keep ] && [ "$(ls -A "$work/occupied")" = notes.txt ] ||
  { echo "FAIL: a refused export changed $work/occupied"; exit 1; }
refused 2 "is inside --checkpoint $run/ckpt, which the export reads" -- \
  "$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$run/ckpt/hf"
refused 2 "--dtype f16: not f32 or bf16" -- \
  "$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$work/new" --dtype f16
refused 2 "give one of --merge OUT.safetensors (one file) and --hf OUT_DIR" -- \
  "$strata" export "$run/m.toml" --checkpoint "$run/ckpt"
[ ! -e "$work/new" ] && ! ls -a "$work" | grep -q '\.partial-' || { echo "FAIL: a refused export left files"; exit 1; }
# A trailing slash names the same directory, and a symlink to an empty directory is filled in place.
"$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$work/slash/" > /dev/null
mkdir -p "$work/linked-target" && ln -sfn "$work/linked-target" "$work/linked"
"$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf "$work/linked" > /dev/null
[ -f "$work/slash/config.json" ] && [ -f "$work/linked-target/config.json" ] && [ -L "$work/linked" ] &&
  ! ls -a "$work" | grep -q '\.partial-' || { echo "FAIL: export --hf to DIR/ or to a symlink"; exit 1; }
refused 2 "--hf .: is the working directory" -- "$strata" export "$run/m.toml" --checkpoint "$run/ckpt" --hf .
echo "hf $arch interop: both directions agree, tied and untied"
