#!/usr/bin/env bash
# strata ab on tiny manifests: the table, the verdicts (identical for checkpointing, diverged for
# a different learning rate) and a self-contained HTML report.
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
small=(--set model.n_layer=2 --set model.d_model=32 --set model.n_head=2 --set model.seq_len=16
  --set train.batch=4 --set train.eval_batches=2 --set train.threads=2 --set train.eval_every=0
  --set "checkpoint.dir=\"$work/ckpt\"")
set +e
# Every strategy example, shrunk: each must train and match the quickstart bit for bit. The bf16
# example changes the numbers a little: within tolerance, not identical.
"$strata" ab examples/quickstart.toml examples/checkpoint.toml examples/offload-optimizer.toml \
  examples/stream-layers.toml examples/all-strategies.toml examples/bf16.toml --steps 6 "${small[@]}" \
  --out "$work/runs" --html "$work/report.html" > "$work/ab.txt" 2>&1
code=$?
set -e
cat "$work/ab.txt"
[ "$code" = 0 ] || { echo "strata ab exited $code"; exit 1; }
for row in "peak device memory" "  activations" "  optimizer" "peak host memory" "median ms/step" "tokens/s" \
  "final train loss" "final val loss" "verdict"; do
  grep -q "^$row " "$work/ab.txt" || { echo "missing row: $row"; exit 1; }
done
verdicts=$(grep '^verdict ' "$work/ab.txt")
[ "$(echo "$verdicts" | grep -o identical | wc -l)" = 4 ] || { echo "expected four identical verdicts: $verdicts"; exit 1; }
echo "$verdicts" | grep -q "within tolerance" || { echo "expected bf16 within tolerance: $verdicts"; exit 1; }
grep -q '<svg' "$work/report.html" || { echo "no SVG in the report"; exit 1; }
if grep -qE '(src|href)=.(https?:)?//' "$work/report.html"; then echo "the report fetches something"; exit 1; fi

# A higher learning rate changes the trajectory: the verdict must say so.
"$strata" ab examples/quickstart.toml examples/quickstart.toml --steps 6 "${small[@]}" --out "$work/runs2" > "$work/ab2.txt"
grep "^verdict " "$work/ab2.txt" | grep -q identical || { cat "$work/ab2.txt"; echo "a rerun must be identical"; exit 1; }
sed 's/^lr = 2e-3/lr = 4e-3/' examples/quickstart.toml > "$work/faster.toml"
sed -i "s#data/kjv.txt#$PWD/data/kjv.txt#" "$work/faster.toml"
"$strata" ab examples/quickstart.toml "$work/faster.toml" --steps 6 "${small[@]}" --out "$work/runs3" > "$work/ab3.txt"
grep '^verdict ' "$work/ab3.txt" | grep -q diverged || { cat "$work/ab3.txt"; echo "expected diverged"; exit 1; }

# Fewer than two manifests is invalid input.
set +e
"$strata" ab examples/quickstart.toml > /dev/null 2>&1
[ $? = 2 ] || { echo "one manifest must exit 2"; exit 1; }
echo "ab: table, verdicts and report ok"
