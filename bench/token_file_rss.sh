#!/usr/bin/env bash
# What a token file costs in memory when a run opens it: peak RSS of a one-step run of a tiny model
# on a token file of TOKENS uint16 tokens, less the same run on a 1M-token file, per token. Strata
# maps token files (core/data/token_sequence.hpp): the pages counted are the file's own, read once
# to check every id and shared with the page cache, which the kernel may drop under pressure;
# nothing is copied or widened. BASELINE names another strata binary to measure beside it (one
# that reads the file whole and widens it to uint32).
#   bash bench/token_file_rss.sh [TOKENS=200000000] [BASELINE=build-quickstart/bin/strata]
set -euo pipefail
cd "$(dirname "$0")/.."
tokens=${1:-200000000}
baseline=${2:-}
work=${BENCH_WORK:-/tmp/strata-token-rss}
mkdir -p "$work"
for count in 1000000 "$tokens"; do
  [ -f "$work/t$count.bin" ] || /usr/bin/python3 - "$work/t$count.bin" "$count" <<'PY'
import sys, numpy as np
path, count = sys.argv[1], int(sys.argv[2])
header = np.zeros(256, dtype='<i4'); header[:3] = (20240520, 1, count)
with open(path, 'wb') as f:
    f.write(header.tobytes())
    rng = np.random.default_rng(1)
    for start in range(0, count, 10_000_000):
        f.write(rng.integers(0, 256, min(10_000_000, count - start), dtype='<u2').tobytes())
PY
done
peak_kib() {  # BINARY TOKENS -> peak RSS in KiB of one training step on that file
  rm -rf "$work/ckpt"
  /usr/bin/time -f %M "$1" train examples/quickstart.toml --set train.steps=1 --set data.train=\"$work/t$2.bin\" \
    --set train.eval_batches=1 --set telemetry.1.path=\"$work/t.jsonl\" --set checkpoint.dir=\"$work/ckpt\" \
    --overwrite-telemetry 2>&1 >/dev/null | tail -n 1
}
printf '%-40s %14s %14s %14s\n' binary "1M tokens" "$tokens tokens" "bytes/token"
for binary in build/bin/strata ${baseline:+"$baseline"}; do
  small=$(peak_kib "$binary" 1000000)
  large=$(peak_kib "$binary" "$tokens")
  printf '%-40s %11s KiB %11s KiB %14s\n' "$binary" "$small" "$large" \
    "$(echo "scale=2; ($large - $small) * 1024 / ($tokens - 1000000)" | bc -l)"
done
