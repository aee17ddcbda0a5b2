# Sourced by the Hugging Face interop scripts: agree NAME EVAL_LINE NUMPY_LOSS passes when Strata's
# `eval_loss=<value>` line and the NumPy reference's loss agree to 1e-5 relative. Needs $python.
agree() {
  "$python" - "$1" "$2" "$3" <<'PY'
import sys
name, strata, numpy_loss = sys.argv[1], float(sys.argv[2].split("=")[1]), float(sys.argv[3])
difference = abs(strata - numpy_loss) / numpy_loss
print(f"{name}: strata eval {strata:.6f}, numpy {numpy_loss:.6f}, relative difference {difference:.2e}")
assert difference < 1e-5, "the two models disagree"
PY
}

# export_round_trip DIR PRECISION SAVED SAVED_LOSS SHARD_SIZE MIN_SHARDS: the checkpoint DIR/ckpt that
# DIR/m.toml trained with PRECISION (fp32 or bf16), exported with `export --hf` (f32, or bf16 for
# bf16 storage) in shards of SHARD_SIZE: the layout transformers reads with the save SAVED's values
# (f32: exactly; bf16 storage: their bf16 rounding), and back in through [model] from
# (DIR/from.toml): an f32 export gives the save's own loss SAVED_LOSS, bit for bit; a bf16 one the
# NumPy reference's (the script's numpy_loss FILE). Needs $strata, $python and $work/tokens.bin.
export_round_trip() {
  local dir=$1 precision=$2 saved=$3 saved_loss=$4 shard_size=$5 min_shards=$6
  local dtype exported back
  dtype=$([ "$precision" = fp32 ] && echo f32 || echo bf16)
  exported="$dir/export-$precision"
  rm -rf "$exported"
  "$strata" export "$dir/m.toml" --set "precision.plugin=\"$precision\"" --checkpoint "$dir/ckpt" --hf "$exported" \
    --dtype $dtype --shard-size "$shard_size" > "$dir/export-$precision.log" || { cat "$dir/export-$precision.log"; exit 1; }
  "$python" tests/hf/hf_directory.py check "$exported" "$saved" "$(tr a-z A-Z <<< $dtype)" --min-shards "$min_shards"
  back=$("$strata" eval "$dir/from.toml" --set "model.from=\"$exported\"" --checkpoint "$exported" \
    --data "$work/tokens.bin" | tail -n 1)
  if [ "$precision" = fp32 ]; then
    [ "$back" = "$saved_loss" ] || { echo "FAIL: export --hf and back: $back, the save: $saved_loss"; exit 1; }
    echo "ok: export --hf (f32) and back through [model] from: $back, the save's own"
  else
    "$python" tests/hf/hf_directory.py join "$exported" "$dir/export-joined.safetensors"
    agree "Strata (bf16 storage) -> HF directory (export --hf --dtype bf16) -> Strata" "$back" \
      "$(numpy_loss "$dir/export-joined.safetensors")"
  fi
}
