#!/usr/bin/env bash
# strata prepare's throughput against Hugging Face's tokenizers.js in Node on the same documents:
# a corpus of real text from this machine (Debian's changelogs and copyright files, the C and C++
# headers in /usr/include, the King James Bible), as a .jsonl of documents, each document one
# file's text (valid UTF-8 only). Both encode each document whole; the token counts must agree
# (strata adds eos to each document, and bos where the tokenizer adds one). Rounds alternate the two, and MB/s are input bytes per
# second of wall time (Node's includes its JSON parsing, as strata's does).
#   bash bench/prepare_bench.sh [MEGABYTES=100] [ROUNDS=3] [TOKENIZER=gpt2]
# TOKENIZER names a folder of the references: gpt2, llama3, or hub/NAME (hub/gemma3, hub/llama2, ...).
# BASELINE=path/to/strata also runs another build's prepare in each round, beside this one's;
# NODE=0 leaves tokenizers.js out.
# Needs a build (build/bin/strata) and the tokenizer references CTest makes
# (build/tests/tokenizer_references, or: bash tests/tokenizers/make_all.sh build/tests/tokenizer_references).
set -euo pipefail
cd "$(dirname "$0")/.."
megabytes=${1:-100}
rounds=${2:-3}
name=${3:-gpt2}
refs=build/tests/tokenizer_references
[ -d "$refs/$name" ] || bash tests/tokenizers/make_all.sh "$refs" > /dev/null
work=${BENCH_WORK:-/tmp/strata-prepare-bench}
mkdir -p "$work"
corpus="$work/corpus-${megabytes}MB.jsonl"
if [ ! -f "$corpus" ]; then
  /usr/bin/python3 - "$corpus" "$megabytes" <<'PY'
import sys, os, json, gzip, glob
out, limit = sys.argv[1], int(sys.argv[2]) * 1_000_000
sources = sorted(glob.glob('/usr/share/doc/*/changelog*.gz')) + sorted(glob.glob('/usr/share/doc/*/copyright'))
sources += sorted(glob.glob('/usr/include/**/*.h', recursive=True)) + ['data/kjv.txt']
size = 0
with open(out, 'w', encoding='utf-8') as f:
    while size < limit:
        for path in sources:
            try:
                raw = gzip.open(path).read() if path.endswith('.gz') else open(path, 'rb').read()
                text = raw.decode('utf-8')
            except (OSError, UnicodeDecodeError, EOFError):
                continue
            if not text.strip():
                continue
            f.write(json.dumps({'text': text}, ensure_ascii=False) + '\n')
            size += len(text.encode())
            if size >= limit:
                break
        else:
            continue
        break
PY
fi
cat > "$work/encode.mjs" <<'JS'
import { createRequire } from 'module';
import fs from 'fs';
import readline from 'readline';
const [modules, dir, corpus] = process.argv.slice(2);
const require = createRequire(modules + '/');
const { Tokenizer } = require('@huggingface/tokenizers');
const tokenizer = new Tokenizer(JSON.parse(fs.readFileSync(dir + '/tokenizer.json', 'utf8')),
                                JSON.parse(fs.readFileSync(dir + '/tokenizer_config.json', 'utf8')));
const start = process.hrtime.bigint();
let tokens = 0, bytes = 0, documents = 0;
for await (const line of readline.createInterface({ input: fs.createReadStream(corpus), crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  const text = JSON.parse(line).text;
  bytes += Buffer.byteLength(text);
  tokens += tokenizer.encode(text, { add_special_tokens: false }).ids.length;
  documents++;
}
const seconds = Number(process.hrtime.bigint() - start) / 1e9;
console.log(JSON.stringify({ tokens, documents, bytes, seconds }));
JS
input_mb=$(stat -c %s "$corpus" | awk '{printf "%.1f", $1 / 1e6}')
echo "corpus: $corpus ($input_mb MB of JSON lines), tokenizer $name; $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
printf '%-6s %-34s %10s %12s %10s\n' round implementation "seconds" "tokens" "MB/s"
binaries=(build/bin/strata)
[ "${NODE:-1}" = 0 ] && node_bytes=$(/usr/bin/python3 -c "import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open(sys.argv[1]) if l.strip()))" "$corpus")
[ -n "${BASELINE:-}" ] && binaries=("$BASELINE" build/bin/strata)
for round in $(seq 1 "$rounds"); do
  if [ "${NODE:-1}" != 0 ]; then
    node_json=$(node "$work/encode.mjs" "$(realpath "$refs/npm/node_modules")" "$refs/$name" "$corpus")
    read -r node_tokens node_documents node_bytes node_seconds < <(/usr/bin/python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(d['tokens'], d['documents'], d['bytes'], d['seconds'])" "$node_json")
    printf '%-6s %-34s %10.2f %12d %10.1f\n' "$round" "tokenizers.js 0.2.0 (Node $(node --version))" "$node_seconds" "$node_tokens" \
      "$(echo "$node_bytes / $node_seconds / 1000000" | bc -l)"
  fi
  for binary in "${binaries[@]}"; do
  label="strata prepare"
  [ "$binary" != build/bin/strata ] && label="baseline prepare"
  for threads in 1 2; do
    start=$(date +%s.%N)
    log=$("$binary" prepare --tokenizer "$refs/$name" --out "$work/out.bin" --threads "$threads" "$corpus")
    end=$(date +%s.%N)
    tokens=$(echo "$log" | sed -n 's/^wrote .*: \([0-9]*\) tokens.*/\1/p')
    documents=$(echo "$log" | sed -n 's/^\([0-9]*\) documents.*/\1/p')
    if [ "${NODE:-1}" = 0 ]; then  # no reference counts: the first binary's stand in for them
      node_documents=${node_documents:-$documents}
      node_tokens=${node_tokens:-$((tokens - documents))}
      [ "$tokens" -ge $((node_tokens + documents)) ] || node_tokens=$((tokens - documents))
    fi
    [ "$documents" = "$node_documents" ] || { echo "documents differ: $documents vs $node_documents"; exit 1; }
    # strata frames each document with eos, and with bos too where the tokenizer adds one (LLaMA 3).
    framing=$((tokens - node_tokens))
    [ "$framing" = "$documents" ] || [ "$framing" = $((2 * documents)) ] ||
      { echo "token counts differ: $tokens (with bos/eos) vs $node_tokens for $documents documents"; exit 1; }
    seconds=$(echo "$end - $start" | bc -l)
    printf '%-6s %-34s %10.2f %12d %10.1f\n' "$round" "$label, $threads thread(s)" "$seconds" "$((tokens - framing))" \
      "$(echo "$node_bytes / $seconds / 1000000" | bc -l)"
  done
  done
done
