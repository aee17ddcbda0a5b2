#!/usr/bin/env bash
# What `strata prepare` holds while it tokenizes one large .txt file: its peak RSS against the
# file's size, for each tokenizer named. A tokenizer whose cuts are exact (Tokenizer::last_exact_cut:
# byte-level BPE at line starts, SentencePiece BPE at spaces between words) streams the file in
# 8 MiB reads; one that cannot be cut (a SentencePiece unigram model) holds the file whole.
# BASELINE names another strata binary to measure beside it.
#   bash bench/prepare_text_rss.sh [MEGABYTES=400] [TOKENIZERS="spm_bpe spm_unigram gpt2"] [BASELINE]
# Needs a build (build/bin/strata) and the tokenizer references CTest makes
# (build/tests/tokenizer_references, or: bash tests/tokenizers/make_all.sh build/tests/tokenizer_references).
set -euo pipefail
cd "$(dirname "$0")/.."
megabytes=${1:-400}
tokenizers=${2:-spm_bpe spm_unigram gpt2}
baseline=${3:-}
refs=build/tests/tokenizer_references
[ -d "$refs/spm_bpe" ] || bash tests/tokenizers/make_all.sh "$refs" > /dev/null
work=${BENCH_WORK:-/tmp/strata-prepare-rss}
mkdir -p "$work"
text="$work/text-${megabytes}MB.txt"
# English prose (the King James Bible), repeated: one file, one document.
if [ ! -f "$text" ]; then
  /usr/bin/python3 - "$text" "$megabytes" <<'PY'
import sys
out, limit = sys.argv[1], int(sys.argv[2]) * 1_000_000
block = open('data/kjv.txt', 'rb').read()
with open(out, 'wb') as f:
    size = 0
    while size < limit:
        f.write(block[: limit - size]); size += min(len(block), limit - size)
PY
fi
size_mib=$(($(stat -c %s "$text") / 1048576))
printf '| binary | tokenizer | text | peak RSS | seconds | tokens |\n|---|---|---|---|---|---|\n'
for binary in build/bin/strata $baseline; do
  for name in $tokenizers; do
    /usr/bin/time -f '%M %e' -o "$work/time" "$binary" prepare --tokenizer "$refs/$name" --threads 2 \
      --out "$work/out.bin" "$text" > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
    read -r kib seconds < "$work/time"
    tokens=$(grep -o '[0-9,]* tokens' "$work/log" | head -1)
    printf '| %s | %s | %d MiB | %d MiB | %s | %s |\n' "$binary" "$name" "$size_mib" $((kib / 1024)) "$seconds" "$tokens"
  done
done
rm -f "$work/out.bin"
