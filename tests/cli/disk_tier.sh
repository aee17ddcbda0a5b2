#!/usr/bin/env bash
# The disk tier from the command line: optimizer state on disk trains to the losses of the state on
# the host, and streamed block weights on disk to those of streaming from the host, bit for bit; a run killed mid-step (kill -9, mid-write to the tier) resumes to the
# uninterrupted run's losses and leaves no tier file behind, with the full and the fused update; saves keep the tier's rows by hard
# link, and verify; a bad disk_path is refused at validate
# time (exit 2); a full filesystem ends the run (exit 1) naming the bytes, and the last checkpoint
# stays intact. With RELIABILITY_TABLE set, the faults add rows to docs/reliability.md's table.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
digest() { find "$@" -type f -exec sha256sum {} + | sort; }
losses() { python3 -c 'import json,sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1"; }
small=(--set model.n_layer=3 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4
  --set train.eval_batches=2 --set train.eval_every=0 --set checkpoint.keep_last=1)
launch=""  # "exec" in a background subshell, so that its pid is the run's (kill -9 reaches it)
tier=$work/tier
mkdir -p "$tier"
manifest() {  # manifest NAME OPTIMIZER_STATE: the quickstart with offload of the optimizer state
  { cat "$q"; printf '[[strategy]]\nplugin = "offload"\noptimizer_state = "%s"\n' "$2"; } > "$work/$1.toml"
}
manifest host host
manifest disk disk
train() {  # train MANIFEST NAME STEPS [args...]: checkpoints and telemetry under $work/NAME
  local toml=$1 name=$2 steps=$3; shift 3
  $launch "$strata" train "$work/$toml.toml" "${small[@]}" --set train.steps="$steps" \
    --set checkpoint.dir=\"$work/$name/checkpoints\" --set telemetry.1.path=\"$work/$name/steps.jsonl\" \
    --set device.disk_path=\"$tier\" "$@"
}

# Disk against host: the same losses, to the last bit; the log says where the tier was.
train host host 6 > "$work/host.log" 2>&1 || { cat "$work/host.log"; fail "host-offload run failed"; }
train disk disk 6 > "$work/disk.log" 2>&1 || { cat "$work/disk.log"; fail "disk-tier run failed"; }
grep -q "disk tier: $tier (" "$work/disk.log" || fail "the log does not say where the disk tier is: $(cat "$work/disk.log")"
grep -q "disk tier: .* read, .* written" "$work/disk.log" || fail "no disk-tier totals in the log"
[ "$(losses "$work/host/steps.jsonl")" = "$(losses "$work/disk/steps.jsonl")" ] ||
  fail "disk tier changed the losses: host $(losses "$work/host/steps.jsonl"), disk $(losses "$work/disk/steps.jsonl")"
[ -z "$(ls -A "$tier")" ] || fail "the tier's file outlived its run: $(ls -A "$tier")"
echo "ok: disk-tier losses equal the host's: $(losses "$work/disk/steps.jsonl")"

# Block weights on disk under layer streaming (weights = "disk"): the losses of streaming from host
# memory, with the full and the fused update.
{ cat "$q"; printf '[[strategy]]\nplugin = "offload"\noptimizer_state = "disk"\nmax_resident_layers = 2\n'; } \
  > "$work/stream-host.toml"
{ cat "$work/stream-host.toml"; printf 'weights = "disk"\n'; } > "$work/stream-disk.toml"
for update in full fused; do
  train stream-host "sh-$update" 6 --set train.update=\"$update\" > "$work/sh.log" 2>&1 ||
    { cat "$work/sh.log"; fail "streaming from host memory failed (update = $update)"; }
  train stream-disk "sd-$update" 6 --set train.update=\"$update\" > "$work/sd.log" 2>&1 ||
    { cat "$work/sd.log"; fail "streaming from disk failed (update = $update)"; }
  [ "$(losses "$work/sh-$update/steps.jsonl")" = "$(losses "$work/sd-$update/steps.jsonl")" ] ||
    fail "weights on disk changed the losses (update = $update): host $(losses "$work/sh-$update/steps.jsonl"), disk $(losses "$work/sd-$update/steps.jsonl")"
  echo "ok: weights on disk, update = $update: the losses of streaming from the host"
done

# plan under the fused update says how much of the gradients it lists can exist at once.
"$strata" plan "$work/disk.toml" "${small[@]}" --set device.disk_path=\"$tier\" --set train.update='"fused"' \
  > "$work/plan.log" 2>&1 || { cat "$work/plan.log"; fail "plan of a fused-update manifest failed"; }
grep -q 'train.update = "fused": of the .* of gradients listed, at most .* exist at once' "$work/plan.log" ||
  fail "plan does not say what the fused update holds: $(tail -n 3 "$work/plan.log")"
"$strata" plan "$work/disk.toml" "${small[@]}" --set device.disk_path=\"$tier\" > "$work/plan-full.log" 2>&1
! grep -q 'train.update = "fused"' "$work/plan-full.log" || fail "plan of a full-update manifest speaks of the fused one"
echo "ok: plan: $(grep -o 'of the .* at once' "$work/plan.log")"

# A save keeps the tier's rows by hard link in its tier/ folder (the checkpoint directory is on
# the tier's filesystem here), and `strata verify` reads them against their checksums.
save=$work/disk/checkpoints/$(cat "$work/disk/checkpoints/latest")
[ -n "$(ls -A "$save/tier" 2> /dev/null)" ] || fail "the save of a disk-tier run linked no row: $(ls "$save")"
grep -q '"tier_files"' "$save/trainer.json" || fail "trainer.json lists no tier_files"
"$strata" verify "$work/disk/checkpoints" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "strata verify of linked saves failed"; }
echo "ok: the save links $(ls "$save/tier" | wc -l) tier rows, and verifies"

# kill -9 mid-run, a moment after the first save (the state's reads and writes run all through a
# step), then --resume: the losses after the save are the uninterrupted run's. Also under the fused
# update, whose blocks' state moves during backward and whose clipping norm is saved.
big=(--set model.d_model=128 --set model.n_layer=4 --set checkpoint.every=5)
# The last case streams the block weights from disk too, so the kill may land mid-write of a block;
# streaming changes no bit, so its uninterrupted run is the same as the others'.
for case in "full 0.1 disk" "full 0.4 disk" "fused 0.25 disk" "fused 0.3 stream-disk"; do
  read -r update delay toml <<< "$case"
  if [ ! -f "$work/whole-$update/steps.jsonl" ]; then
    train disk "whole-$update" 40 "${big[@]}" --set train.update=\"$update\" > "$work/whole.log" 2>&1 ||
      { cat "$work/whole.log"; fail "uninterrupted run (update = $update) failed"; }
  fi
  rm -rf "$work/killed"
  (exec > "$work/killed.log" 2>&1; launch=exec; train "$toml" killed 40 "${big[@]}" --set train.update=\"$update\") &
  pid=$!
  for _ in $(seq 600); do [ -f "$work/killed/checkpoints/latest" ] && break; sleep 0.05; done
  sleep "$delay"
  kill -9 "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  grep -q "step 40/40" "$work/killed.log" && echo "note: the run finished before kill -9 at ${delay}s"
  train "$toml" killed 40 "${big[@]}" --set train.update=\"$update\" --resume >> "$work/killed.log" 2>&1 ||
    { cat "$work/killed.log"; fail "resume after kill -9 failed (update = $update, $toml)"; }
  resumed=$(losses "$work/killed/steps.jsonl" | awk '{print $NF}')
  whole=$(losses "$work/whole-$update/steps.jsonl" | awk '{print $NF}')
  [ "$resumed" = "$whole" ] ||
    fail "after kill -9 at ${delay}s and --resume (update = $update, $toml) the last loss is $resumed, not $whole"
  [ -z "$(ls -A "$tier")" ] || fail "a killed run left tier files: $(ls -A "$tier")"
  echo "ok: update = $update, $toml, kill -9 at ${delay}s, resumed to the uninterrupted last loss $whole"
done

# A directory that cannot hold the tier, or none named: refused at validate time.
fault "[device] disk_path that does not exist" 2 "disk_path = \"$work/missing\" does not exist" -- \
  "$strata" validate "$work/disk.toml" --set device.disk_path=\"$work/missing\"
fault "[device] disk_path where no file can be created (/proc)" 2 "disk_path = \"/proc\" refuses new files" -- \
  "$strata" validate "$work/disk.toml" --set device.disk_path=\"/proc\"
fault "optimizer_state = \"disk\" without [device] disk_path" 2 "a strategy puts rows on disk, but [device] disk_path is not set" -- \
  "$strata" validate "$work/disk.toml"
{ cat "$work/disk.toml"; printf '[predictor]\nplugin = "rssm_predictor"\n'; } > "$work/predictor.toml"
fault "optimizer_state = \"disk\" with a [predictor]" 2 "[predictor] moves the weights through their optimizer state, which a strategy puts on disk" -- \
  "$strata" validate "$work/predictor.toml" --set device.disk_path=\"$tier\"
fault "offload weights = \"disk\" without layer streaming" 2 "block weights leave the device only with layer streaming" -- \
  "$strata" validate "$work/disk.toml" --set device.disk_path=\"$tier\" --set strategy.0.weights=\"disk\"
{ cat "$q"; printf '[[strategy]]\nplugin = "offload"\nactivations = "host"\nmasters = "disk"\n'; } > "$work/masters.toml"
fault "offload masters = \"disk\" with the optimizer state on the device" 2 "the masters live with the optimizer state" -- \
  "$strata" validate "$work/masters.toml" --set device.disk_path=\"$tier\"
fault "[device] disk_limit without disk_path" 2 "disk_limit bounds the disk tier: set disk_path as well" -- \
  "$strata" validate "$work/disk.toml" --set device.disk_limit=\"1GiB\"

# No room: disk_limit below the state, and a full filesystem (a small tmpfs, where the machine lets
# us mount one). The run stops before its first step, naming the bytes; the save stays as it was.
before=$(digest "$work/disk/checkpoints")
fault "disk_limit below the optimizer state" 1 "more on disk, past [device] disk_limit = 64.0 KiB" -- \
  train disk disk 8 --resume --set device.disk_limit=\"64KiB\"
[ "$(digest "$work/disk/checkpoints")" = "$before" ] || fail "a refused resume changed the checkpoint"
small_fs=$work/small_fs
mkdir -p "$small_fs"
if mount -t tmpfs -o size=256k tmpfs "$small_fs" 2> /dev/null; then
  fault "disk tier on a full filesystem" 1 "bytes more needed" -- \
    "$strata" train "$work/disk.toml" "${small[@]}" --set train.steps=8 --resume \
    --set checkpoint.dir=\"$work/disk/checkpoints\" --set telemetry.1.path=\"$work/disk/steps.jsonl\" \
    --set device.disk_path=\"$small_fs\"
  umount "$small_fs"
  [ "$(digest "$work/disk/checkpoints")" = "$before" ] || fail "a run on a full disk changed the checkpoint"
  # A save keeps the tier's rows by hard link, so the rows' next writes need room for new files:
  # a filesystem that holds the tier and one save but not a second generation of the rows stops
  # the run after that save (exit 1, naming a row and the bytes), and the save verifies.
  size_kib=$(python3 - "$work/disk/checkpoints" <<'PY'
import json, os, sys
save = os.path.join(sys.argv[1], open(os.path.join(sys.argv[1], "latest")).read().strip())
rows = json.load(open(os.path.join(save, "trainer.json")))["tier_files"].values()
tier = sum((r["bytes"] + 4095) // 4096 * 4096 for r in rows)
files = sum(os.path.getsize(os.path.join(save, f)) for f in os.listdir(save) if f != "tier")
print((tier + files + tier // 2) // 1024 + 64)
PY
  )
  if mount -t tmpfs -o size="${size_kib}k" tmpfs "$small_fs" 2> /dev/null; then
    mkdir -p "$small_fs/tier"
    fault "no room for the rows' next files after a save that links them" 1 "a checkpoint holds the row's earlier bytes" -- \
      "$strata" train "$work/disk.toml" "${small[@]}" --set train.steps=8 --set checkpoint.every=2 \
      --set checkpoint.dir=\"$small_fs/ckpt\" --set telemetry.1.path=\"$work/full-link.jsonl\" \
      --set device.disk_path=\"$small_fs/tier\"
    [ -f "$small_fs/ckpt/step_00000002/trainer.json" ] || fail "no save before the full filesystem stopped the run"
    "$strata" verify "$small_fs/ckpt" > "$work/verify-full.log" 2>&1 ||
      { cat "$work/verify-full.log"; fail "the save a full filesystem stopped after does not verify"; }
    umount "$small_fs"
  fi
else
  echo "skipped: the full-filesystem case needs a tmpfs mount, which this machine refuses"
fi
echo "all disk-tier checks passed"
