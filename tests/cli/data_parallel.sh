#!/usr/bin/env bash
# Data parallel from the command line (mpirun -np 2, one thread a rank): every ZeRO stage gives the
# losses of zero 0 bit for bit, with checkpointing and offload on top, and again on a second run;
# two ranks train within a stated bound of one process with two micro batches (the sums are added
# in another order); a save of two ranks resumes on two ranks bitwise and on one rank within the
# bound, and verifies; faults: a batch the ranks cannot share, ranks with different manifests,
# zero 3 with samples, a rank killed mid-step (the job ends, naming it), SIGTERM (the ranks stop after the same
# step and save once). With RELIABILITY_TABLE set, the faults add rows to docs/reliability.md's table.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
command -v mpirun > /dev/null || fail "mpirun is not installed (scripts/install-packages.sh installs openmpi-bin)"
losses() { python3 -c 'import json,sys; print(" ".join(repr(json.loads(l)["loss"]) for l in open(sys.argv[1]) if "\"loss\"" in l))' "$1"; }
# Open MPI as root (CI is) needs --allow-run-as-root; two ranks on two cores, one thread each.
mpi=(mpirun --allow-run-as-root --oversubscribe -np 2)
# Shared memory without cross-memory attach, which a container's ptrace rules may refuse.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
small=(--set model.n_layer=6 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4
  --set train.eval_batches=2 --set train.eval_every=0 --set train.threads=1 --set train.steps=6)
train() {  # train NAME [args...]: checkpoints and telemetry under $work/NAME
  local name=$1; shift
  "$strata" train "$q" "${small[@]}" --set checkpoint.dir=\"$work/$name/checkpoints\" \
    --set telemetry.1.path=\"$work/$name/steps.jsonl\" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "run $name failed"; }
}
mpi_train() {
  local name=$1; shift
  "${mpi[@]}" "$strata" train "$q" "${small[@]}" --set checkpoint.dir=\"$work/$name/checkpoints\" \
    --set telemetry.1.path=\"$work/$name/steps.jsonl\" "$@" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "two-rank run $name failed"; }
}

# Every stage gives zero 0's losses, to the last bit; the log names the ranks and what each held.
for zero in 0 1 2 3; do mpi_train "z$zero" --set distributed.zero=$zero; done
grep -q "data parallel: rank 0 of 2 through MPI" "$work/z0.log" || fail "the log does not name the ranks: $(head "$work/z0.log")"
grep -q "rank 1 (zero 2): peak .*gradients .*optimizer state" "$work/z2.log" || fail "no per-rank memory in the log"
[ "$(grep -c '"step"' "$work/z0/steps.jsonl")" = 6 ] || fail "rank 0 alone writes the telemetry: $(cat "$work/z0/steps.jsonl")"
for zero in 1 2 3; do
  [ "$(losses "$work/z0/steps.jsonl")" = "$(losses "$work/z$zero/steps.jsonl")" ] ||
    fail "zero $zero changed the losses: zero 0 $(losses "$work/z0/steps.jsonl"), zero $zero $(losses "$work/z$zero/steps.jsonl")"
done
echo "ok: zero 0, 1, 2 and 3 give the same losses: $(losses "$work/z0/steps.jsonl")"
# Rank 0's telemetry carries each rank's share of every step (SDK 9.8): at zero 1 each rank's
# optimizer state is about half zero 0's, at zero 3 its weights are fewer, at zero 2 its gradients are fewer (the tied embedding's exists
# on every rank from the head's backward to the embedding's); rank 1's sends are counted.
python3 - "$work" <<'EOF' || fail "the ranks' telemetry does not show the shards"
import json, sys
def steps(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/steps.jsonl") if '"step"' in l]
def peak(record, rank, category):
    entry = record["ranks"][rank]
    assert entry["rank"] == rank, entry
    return entry["peak_device_bytes_by_category"][category]
for name in ("z0", "z1", "z2", "z3"):
    for record in steps(name):
        assert len(record["ranks"]) == 2 and record["ranks"][1]["bytes_sent"] > 0, record
        for entry in record["ranks"]:  # the hidden part is a part of the communication time
            assert 0 <= entry["hidden_ms"] <= entry["communication_ms"], record
z0, z1, z2, z3 = (steps(name)[-1] for name in ("z0", "z1", "z2", "z3"))
for rank in (0, 1):
    assert peak(z1, rank, "optimizer") < 0.75 * peak(z0, rank, "optimizer"), (rank, z1["ranks"], z0["ranks"])
    assert peak(z1, rank, "grads") == peak(z0, rank, "grads"), (rank, z1["ranks"], z0["ranks"])
    assert peak(z2, rank, "grads") < peak(z0, rank, "grads"), (rank, z2["ranks"], z0["ranks"])
    assert peak(z3, rank, "weights") < peak(z0, rank, "weights"), (rank, z3["ranks"], z0["ranks"])
print("ok: per-rank telemetry, zero 1's optimizer state by rank:",
      [r["peak_device_bytes_by_category"]["optimizer"] for r in z1["ranks"]], "zero 0's:",
      [r["peak_device_bytes_by_category"]["optimizer"] for r in z0["ranks"]])
EOF

# plan --ranks predicts each rank's device peak by category: the run's telemetry, to the byte.
plan_matches() {  # plan_matches RUN [--set ...]: the plan of RUN's settings against RUN's last step
  local run=$1; shift
  "$strata" plan "$q" "${small[@]}" "$@" --ranks 2 > "$work/plan.log" 2>&1 ||
    { cat "$work/plan.log"; fail "plan --ranks 2 failed"; }
  python3 - "$work" "$run" <<'EOF' || fail "plan --ranks does not predict the $run run's per-rank peaks: $(cat "$work/plan.log")"
import json, sys
def fmt(b):  # core/util/format_bytes.cpp
    units, value, unit = ["B", "KiB", "MiB", "GiB", "TiB"], float(b), 0
    while value >= 1024 and unit + 1 < len(units):
        value, unit = value / 1024, unit + 1
    return f"{value:.0f} {units[unit]}" if unit == 0 else f"{value:.1f} {units[unit]}"
record = [json.loads(l) for l in open(f"{sys.argv[1]}/{sys.argv[2]}/steps.jsonl") if '"step"' in l][-1]
rows = {line.split()[0]: line for line in open(f"{sys.argv[1]}/plan.log") if line.startswith("  ")}
for entry in record["ranks"]:
    c = entry["peak_device_bytes_by_category"]
    measured = "  ".join(fmt(v) for v in (entry["peak_device_bytes"], c["weights"], c["grads"], c["optimizer"], c["activations"]))
    predicted = "  ".join(" ".join(p) for p in zip(*[iter(rows[str(entry["rank"])].split()[1:])] * 2))
    assert measured == predicted, (entry["rank"], measured, predicted)
print(f"ok: plan --ranks 2 predicts both ranks' peaks by category as the {sys.argv[2]} run measured them")
EOF
}
for zero in 2 3; do plan_matches z$zero --set distributed.zero=$zero; done

# Weights stored in bf16 and in int8 (f32 masters, which the owners keep from zero 1 on, and send
# as stored): every stage still gives zero 0's losses.
for storage in bf16 int8; do
  for zero in 0 1 3; do
    mpi_train "$storage-z$zero" --set distributed.zero=$zero --set precision.plugin=\"$storage\"
  done
  for zero in 1 3; do
    [ "$(losses "$work/$storage-z0/steps.jsonl")" = "$(losses "$work/$storage-z$zero/steps.jsonl")" ] ||
      fail "$storage weights at zero $zero changed the losses: $(losses "$work/$storage-z$zero/steps.jsonl") vs $(losses "$work/$storage-z0/steps.jsonl")"
  done
done
echo "ok: bf16 and int8 weights at zero 1 and 3 keep zero 0's losses"

# Checkpointing (recompute) and offload of the optimizer state on top: still zero 0's losses.
{ cat "$q"; printf '[[strategy]]\nplugin = "checkpoint"\n[[strategy]]\nplugin = "offload"\noptimizer_state = "host"\n'; } \
  > "$work/stacked.toml"
for zero in 1 2 3; do
  "${mpi[@]}" "$strata" train "$work/stacked.toml" "${small[@]}" --set distributed.zero=$zero \
    --set checkpoint.dir=\"$work/s$zero/checkpoints\" --set telemetry.1.path=\"$work/s$zero/steps.jsonl\" \
    > "$work/s$zero.log" 2>&1 || { cat "$work/s$zero.log"; fail "two ranks with checkpointing and offload failed"; }
  [ "$(losses "$work/z0/steps.jsonl")" = "$(losses "$work/s$zero/steps.jsonl")" ] ||
    fail "checkpointing + offload at zero $zero changed the losses: $(losses "$work/s$zero/steps.jsonl")"
done
echo "ok: checkpointing and offload on top of zero 1, 2 and 3 keep the losses"

# A second run repeats the first, bit for bit.
mpi_train z2-again --set distributed.zero=2
[ "$(losses "$work/z2/steps.jsonl")" = "$(losses "$work/z2-again/steps.jsonl")" ] || fail "a second zero 2 run differs"
echo "ok: runs repeat bitwise"

# overlap = false waits for every call where it is made: the same losses, and at zero 2 and 3 one
# block's gradients or weights fewer at the peak than the overlapped run holds.
for zero in 2 3; do mpi_train "w$zero" --set distributed.zero=$zero --set distributed.overlap=false; done
python3 - "$work" <<'EOF' || fail "overlap = false changed the losses or held more"
import json, sys
def last(name):
    return [json.loads(l) for l in open(f"{sys.argv[1]}/{name}/steps.jsonl") if '"step"' in l]
for zero, category in ((2, "grads"), (3, "weights")):
    waiting, overlapped = last(f"w{zero}"), last(f"z{zero}")
    assert [r["loss"] for r in waiting] == [r["loss"] for r in overlapped], zero
    for rank in (0, 1):
        w = waiting[-1]["ranks"][rank]["peak_device_bytes_by_category"][category]
        o = overlapped[-1]["ranks"][rank]["peak_device_bytes_by_category"][category]
        assert w < o, (zero, rank, category, w, o)
        assert waiting[-1]["ranks"][rank]["hidden_ms"] == 0, waiting[-1]["ranks"]
print("ok: overlap = false keeps the losses, hides nothing, and holds less at zero 2 and 3")
EOF
for zero in 2 3; do plan_matches w$zero --set distributed.zero=$zero --set distributed.overlap=false; done

# strata ab --ranks 2: each manifest under mpirun; the table adds the ranks, the largest rank's
# peak and the calls' time per step with its hidden share.
for zero in 0 3; do { cat "$q"; printf '[distributed]\nzero = %s\n' $zero; } > "$work/ab-z$zero.toml"; done
"$strata" ab "$work/ab-z0.toml" "$work/ab-z3.toml" --ranks 2 --out "$work/ab" "${small[@]}" > "$work/ab.log" 2>&1 ||
  { cat "$work/ab.log"; fail "strata ab --ranks 2 failed"; }
for row in "^ranks  *2, zero 0  *2, zero 3" "^largest rank's peak  *[0-9.]* MiB  *[0-9.]* MiB (0\.[0-9]*x)" \
  "^communication/step  *[0-9.]* ms, [0-9]*% hidden" "^verdict  *reference  *identical"; do
  grep -q "$row" "$work/ab.log" || fail "strata ab --ranks 2 printed no row matching '$row': $(cat "$work/ab.log")"
done
expect 2 "--ranks must be 1 to 1024" -- "$strata" ab "$work/ab-z0.toml" "$work/ab-z3.toml" --ranks 0
# A run that fails under mpirun reports its rank's own error line, not mpirun's banner.
expect 1 "exit 2: $work/ab-z0.toml: train.batch = 3 is not divisible by 2 ranks" -- \
  "$strata" ab "$work/ab-z0.toml" "$work/ab-z3.toml" --ranks 2 --out "$work/ab-bad" --set train.batch=3
expect 2 "mpirun, which is not on PATH" -- env PATH=/nonexistent "$strata" ab "$work/ab-z0.toml" "$work/ab-z3.toml" --ranks 2
echo "ok: strata ab --ranks 2 shows the ranks' peaks and calls; bad --ranks exit 2"

# Two ranks against one process with two micro batches: the same batches, the gradients summed in
# another order (one process accumulates each micro batch's into the same rows): within 1e-5.
within() {  # within A B: each step's loss of A within a relative 1e-5 of B's
  python3 - "$1" "$2" <<'EOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f) if '"loss"' in l] for f in sys.argv[1:3])
assert len(a) == len(b) and a, (a, b)
worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
print(f"largest relative difference {worst:.2e}")
sys.exit(0 if worst <= 1e-5 else 1)
EOF
}
train one --set train.micro_batches=2
within "$work/one/steps.jsonl" "$work/z0/steps.jsonl" || fail "two ranks drift from one process: $(losses "$work/one/steps.jsonl") vs $(losses "$work/z0/steps.jsonl")"
echo "ok: two ranks within 1e-5 of one process with two micro batches"

# A save of two ranks at zero 3 (rank 0 receiving each row it does not keep) verifies, and resumes on two ranks
# bitwise, at zero 3 and at zero 1, and on one process within the bound.
mpi_train cut --set distributed.zero=3 --stop-after 3
"$strata" verify "$work/cut/checkpoints" > "$work/verify.log" 2>&1 || { cat "$work/verify.log"; fail "the two-rank save does not verify"; }
cp -r "$work/cut" "$work/cut1" && cp -r "$work/cut" "$work/cutz1"
for resumed in "cut 3" "cutz1 1"; do
  set -- $resumed
  "${mpi[@]}" "$strata" train "$q" "${small[@]}" --set distributed.zero=$2 --set checkpoint.dir=\"$work/$1/checkpoints\" \
    --set telemetry.1.path=\"$work/$1/steps.jsonl\" --resume > "$work/resume-$1.log" 2>&1 ||
    { cat "$work/resume-$1.log"; fail "two ranks at zero $2 did not resume a zero 3 save"; }
  [ "$(losses "$work/$1/steps.jsonl")" = "$(losses "$work/z0/steps.jsonl")" ] ||
    fail "the two-rank resume at zero $2 differs: $(losses "$work/$1/steps.jsonl") vs $(losses "$work/z0/steps.jsonl")"
done
"$strata" train "$q" "${small[@]}" --set train.micro_batches=2 --set checkpoint.dir=\"$work/cut1/checkpoints\" \
  --set telemetry.1.path=\"$work/cut1/steps.jsonl\" --resume > "$work/resume1.log" 2>&1 ||
  { cat "$work/resume1.log"; fail "one process did not resume a two-rank save"; }
within "$work/cut1/steps.jsonl" "$work/z0/steps.jsonl" || fail "one process resumed a two-rank save off the bound"
echo "ok: a two-rank zero 3 save verifies, resumes on two ranks bitwise (zero 3 and zero 1) and on one within the bound"

# Faults.
fault "a batch the ranks cannot share equally" 2 "is not divisible by 2 ranks" -- \
  "${mpi[@]}" "$strata" train "$q" "${small[@]}" --set train.batch=3 --set checkpoint.dir=\"$work/odd\"
fault "ranks started with different manifests" 2 "differ from rank 0's" -- \
  mpirun --allow-run-as-root --oversubscribe -np 1 "$strata" train "$q" "${small[@]}" --set checkpoint.dir=\"$work/mix\" \
  : -np 1 "$strata" train "$q" "${small[@]}" --set checkpoint.dir=\"$work/mix\" --set train.lr=0.1
fault "samples at [distributed] zero = 3" 2 "train.sample_every with [distributed] zero = 3" -- \
  "${mpi[@]}" "$strata" train "$q" "${small[@]}" --set distributed.zero=3 --set train.sample_every=2 \
  --set checkpoint.dir=\"$work/z3-sample\"
expect 0 "[distributed]: one rank" -- "$strata" train "$q" "${small[@]}" --set distributed.zero=1 \
  --set checkpoint.dir=\"$work/alone/checkpoints\" --set telemetry.1.path=\"$work/alone/steps.jsonl\"

# A rank killed mid-step: the job ends, non-zero, within 60 s, and says which rank was lost.
long=(--set train.steps=100000 --set checkpoint.dir=\"$work/killed/checkpoints\" --set telemetry.1.path=\"$work/killed/steps.jsonl\")
"${mpi[@]}" "$strata" train "$q" "${small[@]}" "${long[@]}" > "$work/killed.log" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$work/killed/steps.jsonl" ] && break; sleep 0.2; done
[ -s "$work/killed/steps.jsonl" ] || { kill -9 $job; fail "the long run did not start: $(cat "$work/killed.log")"; }
# A rank: a child of mpirun (not a short-lived process of a rank with the same command line).
victim=$(pgrep -P "$job" -n -f "killed/checkpoints")
kill -9 "$victim"
start=$SECONDS
wait $job
code=$?
[ $((SECONDS - start)) -le 60 ] || fail "the job took $((SECONDS - start)) s to end after a rank was killed"
[ "$code" != 0 ] || fail "the job exited 0 after a rank was killed"
grep -qi "rank [01].*\(killed\|signal 9\)\|signal 9.*rank" "$work/killed.log" || fail "the job did not name the lost rank: $(tail -n 20 "$work/killed.log")"
echo "ok ($code): a rank killed mid-step ends the job in $((SECONDS - start)) s: $(grep -i -m1 'signal 9\|killed' "$work/killed.log")"
[ -z "${RELIABILITY_TABLE:-}" ] || printf '%s\t%s\t%s\n' "a rank killed mid-step (kill -9)" "$code" \
  "$(grep -i -m1 'signal 9\|killed' "$work/killed.log" | sed -e "s#$work#WORK#g")" >> "$RELIABILITY_TABLE"

# SIGTERM to one rank (a scheduler's signal reaches every rank; mpirun's own SIGTERM kills the ranks
# after odls_base_sigkill_timeout, 1 s by default): the ranks stop after the same step, save once,
# and exit 143.
long=(--set train.steps=100000 --set checkpoint.dir=\"$work/term/checkpoints\" --set telemetry.1.path=\"$work/term/steps.jsonl\")
"${mpi[@]}" "$strata" train "$q" "${small[@]}" "${long[@]}" --set distributed.zero=1 > "$work/term.log" 2>&1 &
job=$!
for _ in $(seq 100); do [ -s "$work/term/steps.jsonl" ] && break; sleep 0.2; done
kill -TERM "$(pgrep -P "$job" -n -f "term/checkpoints")"
wait $job
code=$?
[ "$code" = 143 ] || fail "SIGTERM: the job exited $code, expected 143: $(tail -c 2000 "$work/term.log")"
saves=$(ls -d "$work"/term/checkpoints/step_* | wc -l)
[ "$saves" = 1 ] || fail "SIGTERM: $saves saves, expected one"
[ "$(grep -o "stopped by signal 15 after step [0-9]*" "$work/term.log" | wc -l)" = 2 ] &&
  [ "$(grep -o "stopped by signal 15 after step [0-9]*" "$work/term.log" | sort -u | wc -l)" = 1 ] ||
  fail "SIGTERM: the ranks did not both stop after the same step: $(grep -o "stopped by signal.*" "$work/term.log")"
"$strata" verify "$work/term/checkpoints" > /dev/null 2>&1 || fail "the save SIGTERM left does not verify"
echo "ok (143): SIGTERM to one rank stops both after the same step, with one save that verifies"
