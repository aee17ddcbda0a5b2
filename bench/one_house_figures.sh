#!/usr/bin/env bash
# How easily a newcomer finds the step, a tensor's home and a family's files, as figures of a source
# tree and its build (docs/benchmarks.md, "One house"): the lines of `strata train`'s run function
# and of its step loop, the places the optimizer's entry points are called, the backward loop over
# blocks and its branches on data parallel and the fused update, the frames from main
# to one AdamW element (gdb on the quickstart's first update, a Release build: inlined calls do not
# count), and core's include cycles and family knowledge outside the family folders
# (scripts/check-layers.py, this tree's version, run over TREE).
# Usage: bash bench/one_house_figures.sh [TREE]   (default: this repository; TREE's build/ must be
# built; run from this repository's root)
set -euo pipefail
tree=$(realpath "${1:-.}")
here=$PWD
run=$tree/core/training/training_run.cpp
# run_training, from its definition to the closing brace at column 0, and the step loop inside it
# (from `for (std::int64_t step` to the brace that closes it at the same indent).
awk '/^TrainResult run_training\(/ {on = 1} on {n++} on && /^}/ {print "run_training: " n " lines"; exit}' "$run"
awk '/^TrainResult run_training\(/ {on = 1}
     on && !loop && /for \(std::int64_t step/ {loop = 1; match($0, /^ */); indent = RLENGTH}
     loop {n++; if ($0 ~ "^" sprintf("%" indent "s", "") "}$") {print "its step loop: " n " lines"; exit}}' "$run"
calls=$(grep -rnE 'optimizer_\.(step|begin_step|begin_step_with_norm|step_part)\(' "$tree/core" --include=*.cpp || true)
echo "optimizer entry points called at $(grep -c . <<< "$calls") places in $(cut -d: -f1 <<< "$calls" | sort -u | wc -l) file(s):"
sed "s#$tree/##; s/^\([^:]*:[0-9]*\):.*optimizer_\.\([a-z_]*\)(.*/  \1 \2/" <<< "$calls"
# The backward loop over blocks (core/executor/executor.cpp), and its branches on data parallel
# and the fused update (`parallel`, `fusing_`, `update_per_block_`, a deferred step).
awk '/for \(int l = .*; l >= 0; --l\) \{/ && !loop {loop = 1; match($0, /^ */); indent = RLENGTH}
     loop {n++; if ($0 ~ /if \(.*(parallel|fusing_|update_per_block_|deferred)/) b++
           if ($0 ~ "^" sprintf("%" indent "s", "") "}$") {print "the backward loop: " n " lines, " b+0 " branches on data parallel or the fused update"; exit}}' \
  "$tree/core/executor/executor.cpp"
cat > "$here/runs/gdb-adamw.cmds" <<'GDB'
set breakpoint pending on
set pagination off
break strata::adamw::cpu::update
run
bt
kill
quit
GDB
mkdir -p "$here/runs"
(cd "$here" && gdb -q -batch -x runs/gdb-adamw.cmds --args "$tree/build/bin/strata" train examples/quickstart.toml \
  --set train.steps=1 --set checkpoint.dir=\"runs/gdb-adamw\" --fresh 2> /dev/null) > "$here/runs/gdb-adamw.log" || true
frames=$(grep -cE '^#[0-9]+ ' "$here/runs/gdb-adamw.log" || true)
echo "frames from main to strata::adamw::cpu::update: $frames"
grep -E '^#[0-9]+ ' "$here/runs/gdb-adamw.log" | sed -E 's/^(#[0-9]+) +(0x[0-9a-f]+ in )?([^(]*(\([^)]*\))?).*/  \1 \3/' | cut -c1-110
python3 "$here/scripts/check-layers.py" "$tree" || true
