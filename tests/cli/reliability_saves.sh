#!/usr/bin/env bash
# Saved work stays saved: the faults that used to lose or silently change a checkpoint, a log or the
# data a run reads (reliability round two). Each case checks its exit code and message, and that no
# file already saved changes (digests before and after). With RELIABILITY_TABLE set, each case adds a
# row to docs/reliability.md's table.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
edit="python3 $(dirname "$0")/safetensors_edit.py"
digest() { find "$@" -type f -exec sha256sum {} + | sort; }
small=(--set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4
  --set train.eval_batches=2 --set telemetry.1.path=\"$work/steps.jsonl\")
fresh() {  # fresh NAME STEPS [--set ...]: a trained checkpoint directory $work/NAME (keep_last = 1)
  local name=$1 steps=$2; shift 2
  rm -rf "$work/$name"
  "$strata" train $q "${small[@]}" --set train.steps="$steps" --set checkpoint.keep_last=1 \
    --set checkpoint.dir=\"$work/$name\" "$@" > "$work/$name.log" 2>&1 || { cat "$work/$name.log"; fail "could not train $name"; }
}
resume() {  # resume NAME STEPS [args...]: train the checkpoint directory $work/NAME on to STEPS
  local name=$1 steps=$2; shift 2
  "$strata" train $q "${small[@]}" --set train.steps="$steps" --set checkpoint.keep_last=1 \
    --set checkpoint.dir=\"$work/$name\" --resume "$@"
}
unchanged() {  # unchanged WHAT DIGEST PATH...
  [ "$(digest "${@:3}")" = "$2" ] || fail "$1: a refused command changed saved files"
}

# Optimizer state that breaks its optimizer's invariants: a negative second moment, written with a
# consistent file (no checksum to catch it), is refused before a step runs or a save is pruned.
fresh negative 5
step=$work/negative/$(cat "$work/negative/latest")
$edit "$step/optimizer.safetensors" wte.weight.state1 100 set -1.0
$edit "$step/optimizer.safetensors" strip
$edit "$step" legacy
before=$(digest "$work/negative")
fault "negative AdamW second moment in optimizer.safetensors" 2 \
  "optimizer 'adamw' refuses its state: 'wte.weight': second moment (state1) -1.000000 at element 100 is negative" -- \
  resume negative 7
unchanged "negative second moment" "$before" "$work/negative"

# State the optimizer accepts but that blows the weights up: the run stops at the non-finite save
# and keeps the finite one (keep_last = 1 would otherwise prune it).
fresh blowup 5
step=$work/blowup/$(cat "$work/blowup/latest")
$edit "$step/optimizer.safetensors" wte.weight.state0 100 set 3e38
$edit "$step/optimizer.safetensors" strip
$edit "$step" legacy
before=$(digest "$work/blowup/step_00000005" "$work/blowup/latest")
fault "a save with non-finite weights" 1 "failed its read-back check, so it was discarded and the earlier saves kept" -- \
  resume blowup 7 --set train.divergence_factor=0
unchanged "non-finite save" "$before" "$work/blowup/step_00000005" "$work/blowup/latest"
[ "$(ls -d "$work"/blowup/step_* | wc -l)" = 1 ] || fail "a non-finite step was saved beside the finite one"

# Finite but absurd state (a first moment of 1e30, checksums consistent): the run goes on, but its
# blown-up save never replaces the sound one (train.divergence_factor x the saved loss).
fresh absurd 5
step=$work/absurd/$(cat "$work/absurd/latest")
$edit "$step/optimizer.safetensors" wte.weight.state0 100 set 1e30
$edit "$step/optimizer.safetensors" strip
$edit "$step" legacy
before=$(digest "$work/absurd/step_00000005")
fault "a blown-up save would prune the sound one" 0 "kept $work/absurd/step_00000005" -- \
  resume absurd 7 --set train.divergence_factor=100 --set train.divergence_steps=1000
unchanged "blown-up save" "$before" "$work/absurd/step_00000005"

# Flipped bits in a tensor payload: the checksum each save records names the tensor.
fresh flips 3
step=$work/flips/$(cat "$work/flips/latest")
eval_small=(--set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4 --set train.eval_batches=2)
cp -r "$step" "$work/exponent" && $edit "$work/exponent/model.safetensors" h.0.mlp.c_fc.weight 7 flip 30
fault "an exponent bit flipped in a weight" 2 "tensor 'h.0.mlp.c_fc.weight' fails its checksum" -- \
  "$strata" eval $q "${eval_small[@]}" --checkpoint "$work/exponent"
cp -r "$step" "$work/low_bit" && $edit "$work/low_bit/optimizer.safetensors" wpe.weight.state0 3 flip 0
fault "the lowest bit flipped in optimizer state" 2 "tensor 'wpe.weight.state0' fails its checksum" -- \
  "$strata" train $q "${small[@]}" --set train.steps=4 --set checkpoint.dir=\"$work/low_bit_run\" --resume "$work/low_bit"
cp -r "$step" "$work/foreign" && $edit "$work/foreign/model.safetensors" strip
expect 0 "eval_loss=" -- "$strata" eval $q "${eval_small[@]}" --checkpoint "$work/foreign"

# strata verify: the same checks offline, for every save of a directory.
expect 0 "ok (step 3" -- "$strata" verify "$work/flips"
fault "strata verify on a save with a flipped bit" 2 "CORRUPT: $work/exponent/model.safetensors: corrupt checkpoint" -- \
  "$strata" verify "$work/exponent"
cp -r "$work/flips" "$work/side" && printf 'x' > "$work/side/$(cat "$work/flips/latest")/predictor.bin"
fault "a side file trainer.json does not list" 2 "trainer.json records no checksum for it" -- \
  "$strata" verify "$work/side"

# trainer.json's own fields: a step that is not its directory's, a format this Strata does not
# know, the list of files removed, a checksum key renamed by a flipped bit.
for edit_case in step format files key; do
  cp -r "$work/flips" "$work/tamper_$edit_case"
done
python3 - "$work" "$(cat "$work/flips/latest")" <<'PY'
import json, sys
work, latest = sys.argv[1], sys.argv[2]
def edit(case, change):
    path = f"{work}/tamper_{case}/{latest}/trainer.json"
    trainer = json.load(open(path)); change(trainer); json.dump(trainer, open(path, "w"), indent=2)
edit("step", lambda t: t.update(step=t["step"] - 1))
edit("format", lambda t: t.update(format="strata-checkpoint-99"))
edit("files", lambda t: t.pop("files"))
path = f"{work}/tamper_key/{latest}/model.safetensors"
data = open(path, "rb").read().replace(b"strata_xxh3_64", b"strata_xxh3_65", 1)
open(path, "wb").write(data)
PY
fault "trainer.json step not its directory's" 2 "in a directory named step_00000003" -- "$strata" verify "$work/tamper_step"
fault "trainer.json of an unknown format" 2 "format 'strata-checkpoint-99'" -- \
  "$strata" train $q "${small[@]}" --set train.steps=4 --set checkpoint.dir=\"$work/tamper_format\" --resume
fault "trainer.json without its list of files" 2 "lists its files, and this one does not" -- \
  "$strata" train $q "${small[@]}" --set train.steps=4 --set checkpoint.dir=\"$work/tamper_files\" --resume
fault "a checksum key renamed by a flipped bit" 2 "model.safetensors: corrupt checkpoint: its bytes do not match" -- \
  "$strata" verify "$work/tamper_key"

# trainer.json edits, and a run already at its last step.
fresh edited 3
step=$work/edited/$(cat "$work/edited/latest")
sed -i 's/"optimizer_state_buffers": 2/"optimizer_state_buffers": 1/' "$step/trainer.json"
before=$(digest "$work/edited")
fault "trainer.json optimizer_state_buffers edited" 2 "optimizer_state_buffers 1, but optimizer 'adamw' keeps 2 per parameter" -- \
  resume edited 5
unchanged "optimizer_state_buffers" "$before" "$work/edited"
fresh finished 5
before=$(digest "$work/finished" "$work/steps.jsonl")
fault "resuming a run that already reached train.steps" 0 "there is nothing to train" -- resume finished 3
unchanged "resuming a finished run" "$before" "$work/finished" "$work/steps.jsonl"

# Data changed in place at the same path: the content fingerprint a save records tells.
head -c 200000 data/kjv.txt > "$work/corpus.txt"
fresh changed 2 --set data.train=\"$work/corpus.txt\"
sed -i 's/LORD/Lord/' "$work/corpus.txt"
before=$(digest "$work/changed")
fault "training data changed in place before a resume" 2 "corpus.txt' changed since the save" -- \
  resume changed 4 --set data.train=\"$work/corpus.txt\"
unchanged "changed data" "$before" "$work/changed"

# A LoRA save holding a whole model's file: refused before anything trains or is pruned.
lora=(--set "train.init_from=\"$work/flips\"" --set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16
  --set train.batch=4 --set train.eval_batches=2 --set checkpoint.keep_last=1)
"$strata" train examples/lora.toml "${lora[@]}" --set train.steps=3 --set checkpoint.dir=\"$work/lora\" > "$work/lora.log" 2>&1 ||
  { cat "$work/lora.log"; fail "could not train LoRA"; }
cp "$work/flips/$(cat "$work/flips/latest")/model.safetensors" "$work/lora/$(cat "$work/lora/latest")/model.safetensors"
before=$(digest "$work/lora")
fault "a whole model's file in a LoRA save" 2 "holds a whole model (no record of frozen weights)" -- \
  "$strata" train examples/lora.toml "${lora[@]}" --set train.steps=5 --set checkpoint.dir=\"$work/lora\" --resume
unchanged "LoRA save with a whole model" "$before" "$work/lora"
base=$(digest "$work/flips")
fault "export --merge over the base model the LoRA run starts from" 2 "is inside the base weights (train.init_from)" -- \
  "$strata" export examples/lora.toml "${lora[@]}" --checkpoint "$work/lora" \
  --merge "$work/flips/$(cat "$work/flips/latest")/model.safetensors"
unchanged "export over the base" "$base" "$work/flips"

# Telemetry files never overwrite what the run reads or a file Strata did not write.
cp $q "$work/manifest.toml" && cp data/kjv.txt "$work/data.txt"
printf 'my notes\n' > "$work/notes.jsonl"
inputs=$(digest "$work/manifest.toml" "$work/data.txt" "$work/notes.jsonl" "$work/flips")
fault "--metrics naming the manifest" 2 "is the manifest, which this run reads" -- "$strata" train "$work/manifest.toml" \
  "${small[@]}" --set train.steps=1 --metrics "$work/manifest.toml"
fault "--metrics naming the training data" 2 "is the training data ([data] train), which this run reads" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/data.txt\" --metrics "$work/data.txt"
fault "--metrics inside the checkpoint being resumed" 2 "is inside a save of the checkpoint directory" -- \
  resume flips 4 --metrics "$work/flips/$(cat "$work/flips/latest")/trainer.json"
fault "--metrics naming a file Strata did not write" 2 "exists and is not a jsonl telemetry file Strata wrote" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --metrics "$work/notes.jsonl"
{ cat $q; printf '[[telemetry]]\nplugin = "csv"\npath = "%s"\n' "$work/data.txt"; } > "$work/csv.toml"
fault "[[telemetry]] csv path naming the training data" 2 "[[telemetry]] #3 path = \"$work/data.txt\": is the training data" -- \
  "$strata" train "$work/csv.toml" "${small[@]}" --set train.steps=1 --set data.train=\"$work/data.txt\"
fault "--metrics naming the manifest's own jsonl path" 2 "also named by [[telemetry]] #2: two sinks would interleave one file" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --metrics "$work/steps.jsonl"
fault "a prefix of an option (no guessing)" 2 "unrecognised option '--force'" -- resume flips 4 --force
ln "$work/data.txt" "$work/data_link.jsonl"
fault "--metrics naming a hard link to the data" 2 "is the training data ([data] train), which this run reads" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/data.txt\" \
  --metrics "$work/data_link.jsonl" --overwrite-telemetry
fault "export --merge over the manifest" 2 "--merge $work/manifest.toml: is the manifest" -- \
  "$strata" export "$work/manifest.toml" "${small[@]}" --checkpoint "$work/flips" --merge "$work/manifest.toml"
fault "export --merge over the training data" 2 "is the training data ([data] train)" -- \
  "$strata" export $q "${small[@]}" --set data.train=\"$work/data.txt\" --checkpoint "$work/flips" --merge "$work/data.txt"
fault "ab --html over the training data" 2 "--html $work/data.txt: is the training data" -- \
  "$strata" ab $q $q --steps 1 --set data.train=\"$work/data.txt\" --out "$work/ab" --html "$work/data.txt"
unchanged "telemetry paths" "$inputs" "$work/manifest.toml" "$work/data.txt" "$work/notes.jsonl" "$work/flips"
expect 0 "" -- "$strata" train $q "${small[@]}" --set train.steps=1 --set checkpoint.dir=\"$work/overwrite_ckpt\" --metrics "$work/notes.jsonl" --overwrite-telemetry
grep -q '"record":"run"' "$work/notes.jsonl" || fail "--overwrite-telemetry did not write the metrics"
# Two runs on one metrics file: the second is refused while the first holds it.
fault "a second run writing the same --metrics file" 2 "another run is writing this file" -- \
  flock "$work/.shared.jsonl.lock" "$strata" train $q "${small[@]}" --set train.steps=1 --metrics "$work/shared.jsonl"

# A prune that fails part-way (an immutable file) warns and never leaves a step directory
# without its files; `latest` names a whole save.
fresh immutable 2 --set checkpoint.every=1 --set checkpoint.keep_last=2
if chattr +i "$work/immutable/step_00000001/trainer.json" 2> /dev/null; then
  expect 0 "delete it by hand" -- resume immutable 3 --set checkpoint.keep_last=1
  chattr -i "$work/immutable"/.step_00000001.old-*/trainer.json
  for save in "$work"/immutable/step_*; do
    [ -f "$save/optimizer.safetensors" ] || fail "the prune left $save without its optimizer state"
  done
  expect 0 "ok (step 3" -- "$strata" verify "$work/immutable"
else
  echo "skipped: chattr +i is not supported here (the prune-failure case needs an immutable file)"
fi
echo "every saved file kept, every fault named"

# Training again into a directory that holds saves, without --resume, would number new saves from
# step 1 over the old ones and prune them: refused. --fresh moves them aside, whole and resumable.
fresh again 3
before=$(digest "$work/again")
fault "a new run into a checkpoint directory holding an earlier run's saves" 2 \
  "holds an earlier run's saves (1 step directories, the last step_00000003), which this run would write over" -- \
  "$strata" train $q "${small[@]}" --set train.steps=3 --set checkpoint.keep_last=1 --set checkpoint.dir=\"$work/again\"
unchanged "a new run into a used directory" "$before" "$work/again"
expect 0 "--fresh: moved the earlier run's saves to $work/again/earlier-run-" -- \
  "$strata" train $q "${small[@]}" --set train.steps=2 --set checkpoint.keep_last=1 --set checkpoint.dir=\"$work/again\" --fresh
aside=$(ls -d "$work"/again/earlier-run-*)
[ "$(digest "$aside" | sed "s#$aside#$work/again#")" = "$(grep -v '/again/.lock$' <<< "$before")" ] ||
  fail "--fresh changed the earlier run's saves"
[ "$(cat "$work/again/latest")" = step_00000002 ] || fail "--fresh did not start the new run at step 1"
expect 0 "nothing to train" -- "$strata" train $q "${small[@]}" --set train.steps=3 --set checkpoint.dir=\"$aside\" --resume
# Only this directory's own saves continue it: a run moved aside resumes elsewhere, never over the
# saves of the run that replaced it (keep_last = 1 would prune them).
before=$(digest "$work/again")
fault "resuming a run moved aside into the directory of the run that replaced it" 2 "is not one of its saves" -- \
  "$strata" train $q "${small[@]}" --set train.steps=4 --set checkpoint.keep_last=1 --set checkpoint.dir=\"$work/again\" \
  --resume "$aside"
unchanged "a resume from a run moved aside" "$before" "$work/again"
fault "--fresh with --resume" 2 "--fresh starts a new run and --resume continues one" -- \
  "$strata" train $q "${small[@]}" --set checkpoint.dir=\"$work/again\" --fresh --resume
# A move aside that fails part-way (an immutable save) puts back what it moved.
fresh split 2 --set checkpoint.every=1 --set checkpoint.keep_last=0
if chattr +i "$work/split/step_00000002" 2> /dev/null; then
  before=$(digest "$work/split")
  fault "--fresh where one earlier save cannot be moved" 2 "nothing was moved, and the earlier run's saves are where they were" -- \
    "$strata" train $q "${small[@]}" --set train.steps=2 --set checkpoint.dir=\"$work/split\" --fresh
  chattr -i "$work/split/step_00000002"
  unchanged "a failed --fresh" "$before" "$work/split"
  [ -z "$(ls -d "$work"/split/earlier-run-* 2> /dev/null)" ] || fail "a failed --fresh left an earlier-run directory"
else
  echo "skipped: chattr +i is not supported here (the failed --fresh case needs an immutable save)"
fi
# Files in a checkpoint directory that are not Strata's saves stay: a user's copy named like a save
# (step_00000003.bak) was pruned by keep_last, and a file named like a partial save
# (.step_notes.tmp-1) was deleted at the next start.
fresh mine 3 --set checkpoint.every=1
cp -r "$work/mine/step_00000003" "$work/mine/step_00000003.bak"
echo "my notes" > "$work/mine/.step_notes.tmp-1"
before=$(digest "$work/mine/step_00000003.bak" "$work/mine/.step_notes.tmp-1")
fault "a user's step_N.bak copy and a .step_notes.tmp-1 file in the checkpoint directory" 0 "saved to" -- \
  resume mine 5 --set checkpoint.every=1
unchanged "a user's files beside the saves" "$before" "$work/mine/step_00000003.bak" "$work/mine/.step_notes.tmp-1"
[ "$(cat "$work/mine/latest")" = step_00000005 ] && [ ! -d "$work/mine/step_00000003" ] ||
  fail "keep_last = 1 should keep step 5 alone among the saves"
