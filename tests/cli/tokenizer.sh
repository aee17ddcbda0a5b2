#!/usr/bin/env bash
# Tokenizers end to end: `strata prepare` and [data] tokenizer, on the real GPT-2 and LLaMA 3
# vocabularies and the SentencePiece model that tests/tokenizers/make_all.sh made into REFS (the
# CTest fixture tokenizer_references). Usage: tokenizer.sh STRATA WORK REFS
#   - prepare's tokens for the corpus are Hugging Face's (tokenizers.js) ids with eos after each
#     document; one thread and two give the same file; a .txt cut into chunks on two threads gives
#     the ids of the same text encoded whole (a .jsonl line);
#   - version 1 files for GPT-2, version 2 for LLaMA 3's 128256 ids; a validation split;
#   - a run with [data] tokenizer trains, lowers its loss, writes its cache and reads it next time;
#   - bad input is refused, exit 2, naming the file (and line) and writing nothing.
source "$(dirname "$0")/expect.sh" "$1" "$2"
refs=$3
python=/usr/bin/python3
corpus=tests/tokenizers/corpus.txt

# Prepare's ids for the whole corpus against tokenizers.js's (the expected.json case whose text is
# the whole file), plus eos; and the same with two threads and with one.
ids_of() {  # FILE -> the ids, one per line
  "$python" - "$1" <<'PY'
import sys, struct
data = open(sys.argv[1], 'rb').read()
magic, version, count = struct.unpack('<3i', data[:12])
assert magic == 20240520, magic
width = 2 if version == 1 else 4
ids = struct.unpack('<%d%s' % (count, 'H' if width == 2 else 'I'), data[1024:1024 + count * width])
print('\n'.join(map(str, ids)))
PY
}
expected_ids() {  # NAME EOS -> tokenizers.js's ids for the whole corpus, then EOS
  "$python" - "$refs/$1/expected.json" "$corpus" "$2" <<'PY'
import sys, json
cases = json.load(open(sys.argv[1], encoding='utf-8'))['cases']
text = open(sys.argv[2], encoding='utf-8', newline='').read()
whole = [c for c in cases if c['text'] == text]
assert len(whole) == 1, 'no whole-corpus case'
print('\n'.join(map(str, whole[0]['ids'] + [int(sys.argv[3])])))
PY
}
"$strata" prepare --tokenizer "$refs/gpt2" --out "$work/gpt2.bin" --threads 1 "$corpus" > "$work/prepare.log" ||
  fail "prepare failed: $(cat "$work/prepare.log")"
grep -q "version 1, uint16" "$work/prepare.log" || fail "GPT-2 ids fit uint16: $(cat "$work/prepare.log")"
diff <(ids_of "$work/gpt2.bin") <(expected_ids gpt2 50256) > /dev/null || fail "GPT-2 prepare differs from tokenizers.js"
"$strata" prepare --tokenizer "$refs/llama3" --out "$work/llama3.bin" "$corpus" > "$work/prepare3.log"
grep -q "version 2, uint32" "$work/prepare3.log" || fail "LLaMA 3 needs uint32: $(cat "$work/prepare3.log")"
# LLaMA 3 starts each document with <|begin_of_text|> (its template) and ends it with <|end_of_text|>.
diff <(ids_of "$work/llama3.bin") <(echo 128000; expected_ids llama3 128001) > /dev/null ||
  fail "LLaMA 3 prepare differs from tokenizers.js"
echo "ok: prepare's ids are tokenizers.js's (GPT-2, LLaMA 3)"

# A text large enough to be cut into chunks (about 256 KiB each), on one thread and two, and the
# same text as one .jsonl document, encoded whole: one file, byte for byte. 10 MB (40 chunks, more
# than one 8 MiB read); the sanitized suite sets STRATA_CLI_TEXT_BYTES lower, since the same code
# runs on every chunk and the cut itself has its own unit test there.
"$python" - "$corpus" "$work/big.txt" "$work/big.jsonl" "${STRATA_CLI_TEXT_BYTES:-10000000}" <<'PY'
import sys, json, random
lines = open(sys.argv[1], encoding='utf-8', newline='').read().split('\n')
random.seed(7)
parts, size = [], 0
while size < int(sys.argv[4]):
    line = random.choice(lines) + random.choice(['\n', '\n', '\n\n', ' \n', '\r\n'])
    parts.append(line); size += len(line.encode())
text = ''.join(parts)
open(sys.argv[2], 'w', encoding='utf-8', newline='').write(text)
open(sys.argv[3], 'w', encoding='utf-8').write(json.dumps({'text': text}) + '\n')
PY
for tokenizer in gpt2 llama3 spm_bpe spm_unigram; do
  "$strata" prepare --tokenizer "$refs/$tokenizer" --out "$work/one.bin" --threads 1 "$work/big.txt" > /dev/null
  "$strata" prepare --tokenizer "$refs/$tokenizer" --out "$work/two.bin" --threads 2 "$work/big.txt" > /dev/null
  "$strata" prepare --tokenizer "$refs/$tokenizer" --out "$work/whole.bin" "$work/big.jsonl" > /dev/null
  cmp -s "$work/one.bin" "$work/two.bin" || fail "$tokenizer: one thread and two differ"
  cmp -s "$work/one.bin" "$work/whole.bin" || fail "$tokenizer: chunked text differs from the text encoded whole"
done
echo "ok: chunked on two threads == whole (GPT-2, LLaMA 3, SentencePiece BPE; unigram is held whole)"

# Documents of a .jsonl, a validation split, SentencePiece.
"$python" - "$work/docs.jsonl" <<'PY'
import sys, json
with open(sys.argv[1], 'w') as f:
    for i in range(400):
        f.write(json.dumps({'body': 'Document %d says: the quick brown fox jumps over the lazy dog. ' % i * 3}) + '\n')
PY
"$strata" prepare --tokenizer "$refs/spm_bpe" --field body --out "$work/docs.bin" --val-out "$work/docs_val.bin" \
  --val-fraction 0.25 "$work/docs.jsonl" > "$work/docs.log" || fail "prepare .jsonl: $(cat "$work/docs.log")"
grep -q "400 documents" "$work/docs.log" || fail "400 documents: $(cat "$work/docs.log")"
train_count=$(ids_of "$work/docs.bin" | wc -l)
val_count=$(ids_of "$work/docs_val.bin" | wc -l)
[ "$val_count" -gt $((train_count / 4)) ] && [ "$val_count" -lt $((train_count / 2)) ] ||
  fail "the validation split holds $val_count tokens against $train_count"
echo "ok: .jsonl documents and a validation split (SentencePiece)"

# Bad input: exit 2, naming the file (and the line), and nothing written.
printf 'fine\n\xC3(\n' > "$work/bad_utf8.txt"
fault "prepare: text that is not UTF-8" 2 "bad_utf8.txt: the text is not valid UTF-8 at byte 5" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/never.bin" "$work/bad_utf8.txt"
# tokenizer_config.json fields of the wrong type, named with their file (they were a bare JSON type
# error, or, for add_bos_token, read as absent).
for edit in 'eos_token=5:eos_token = 5 is neither a token'"'"'s text nor an object with its "content"' \
            'add_bos_token="yes":add_bos_token = "yes" is not true or false'; do
  rm -rf "$work/badconfig" && cp -r "$refs/gpt2" "$work/badconfig"
  "$python" - "$work/badconfig/tokenizer_config.json" "${edit%%:*}" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
field, value = sys.argv[2].split('=', 1)
config[field] = json.loads(value)
json.dump(config, open(sys.argv[1], 'w'))
PY
  fault "prepare: tokenizer_config.json's ${edit%%=*} of the wrong type" 2 \
    "$work/badconfig/tokenizer_config.json: ${edit#*:}" -- \
    "$strata" prepare --tokenizer "$work/badconfig" --out "$work/never.bin" "$work/bad_utf8.txt"
done
# Past the first 8 MiB read (a later chunk): the offset is still the file's.
"$python" -c 'import sys; open(sys.argv[1], "wb").write(b"plain words on a line\n" * 500000 + b"bad \xff here\n")' \
  "$work/late_bad_utf8.txt"
fault "prepare: text that is not UTF-8, 11 MB in" 2 "late_bad_utf8.txt: the text is not valid UTF-8 at byte 11000004" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/never.bin" "$work/late_bad_utf8.txt"
printf '{"text": "one"}\n{"txt": "two"}\n' > "$work/no_field.jsonl"
fault "prepare: a .jsonl line without the text field" 2 "no_field.jsonl:2: no string field \"text\"" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/never.bin" "$work/no_field.jsonl"
printf '{"text": "one"}\n{"text": "two"\n' > "$work/broken.jsonl"
fault "prepare: a .jsonl line that is not JSON" 2 "broken.jsonl:2: not a JSON line" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/never.bin" "$work/broken.jsonl"
[ ! -e "$work/never.bin" ] || fail "a failed prepare left never.bin"
mkdir -p "$work/wordpiece"
"$python" -c "import json; json.dump({'model': {'type': 'WordPiece', 'vocab': {}}, 'pre_tokenizer': None}, open('$work/wordpiece/tokenizer.json', 'w'))"
fault "prepare: a WordPiece tokenizer.json" 2 "model.type = \"WordPiece\" is not implemented" -- \
  "$strata" prepare --tokenizer "$work/wordpiece" --out "$work/never.bin" "$corpus"
expect 2 "holds neither tokenizer.json nor tokenizer.model" -- \
  "$strata" prepare --tokenizer "$work" --out "$work/never.bin" "$corpus"
expect 2 "--val-fraction needs --val-out" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/never.bin" --val-fraction 0.1 "$corpus"
cp "$work/gpt2.bin" "$work/keep.bin"
expect 2 "is both an input and an output" -- "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/keep.bin" "$work/keep.bin"
cmp -s "$work/gpt2.bin" "$work/keep.bin" || fail "a refused prepare changed its output"

# Training with [data] tokenizer: the text is tokenized when the run starts, cached beside it, and
# the cache is read by the next run; the loss falls.
head -c 400000 data/kjv.txt > "$work/kjv.txt"
cat > "$work/tok.toml" <<TOML
[model]
arch = "gpt2"
n_layer = 1
n_head = 2
d_model = 32
vocab = 50257
seq_len = 32
[data]
train = "$work/kjv.txt"
tokenizer = "$refs/gpt2"
[train]
steps = 30
batch = 8
lr = 1e-2
TOML
"$strata" train "$work/tok.toml" --metrics "$work/tok.jsonl" > "$work/tok.log" 2>&1 || fail "train: $(cat "$work/tok.log")"
ls "$work"/kjv.txt.tokens-*.bin > /dev/null 2>&1 || fail "no token cache beside the data"
"$python" - "$work/tok.jsonl" <<'PY'
import sys, json
losses = [json.loads(l)['loss'] for l in open(sys.argv[1]) if '"loss"' in l]
first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
assert last < first - 1.0, (first, last)
PY
"$strata" train "$work/tok.toml" > "$work/tok2.log" 2>&1 || fail "second train: $(cat "$work/tok2.log")"
grep -q "tokens from the cache" "$work/tok2.log" || fail "the second run did not read the cache"
echo "ok: [data] tokenizer trains and caches"
# The cache follows the text's content, not its size and time: a text edited in place with both
# restored is tokenized again; and a cache whose ids were edited is not used.
cache=$(ls "$work"/kjv.txt.tokens-*.bin)
stamp=$(stat -c %y "$work/kjv.txt")
"$python" - "$work/kjv.txt" <<'PY'
import sys
data = bytearray(open(sys.argv[1], 'rb').read())
data[100:103] = b'XYZ'  # same size
open(sys.argv[1], 'wb').write(bytes(data))
PY
touch -d "$stamp" "$work/kjv.txt"
"$strata" train "$work/tok.toml" --set train.steps=1 > "$work/tok4.log" 2>&1 || fail "train: $(cat "$work/tok4.log")"
grep -q "tokens from the cache" "$work/tok4.log" && fail "a text edited with its size and time kept used the old cache"
edited=$(ls -t "$work"/kjv.txt.tokens-*.bin | head -n 1)
[ "$edited" != "$cache" ] || fail "the edited text's cache has the old name"
"$python" - "$edited" <<'PY'
import sys
data = bytearray(open(sys.argv[1], 'rb').read())
first = int.from_bytes(data[1024:1026], 'little')
data[1024:1026] = (1 if first == 0 else 0).to_bytes(2, 'little')  # another id, still in the vocabulary
open(sys.argv[1], 'wb').write(bytes(data))
PY
fault "train: a token cache whose ids were edited" 0 "the cache's tokens are not those written" -- \
  "$strata" train "$work/tok.toml" --set train.steps=1
echo "ok: the cache follows the text's content and is checked"
# export --hf carries the tokenizer: its files are the run's byte for byte, config.json has its bos
# and eos, and a manifest whose [model] from is the exported directory finds the tokenizer there.
"$strata" train "$work/tok.toml" --set train.steps=2 --set "checkpoint.dir=\"$work/tok-ckpt\"" > "$work/tok3.log" 2>&1 ||
  fail "train with a checkpoint: $(cat "$work/tok3.log")"
"$strata" export "$work/tok.toml" --checkpoint "$work/tok-ckpt" --hf "$work/tok-hf" > "$work/export.log" ||
  fail "export --hf: $(cat "$work/export.log")"
grep -q "config.json; tokenizer.json, tokenizer_config.json" "$work/export.log" || fail "export: $(cat "$work/export.log")"
for file in tokenizer.json tokenizer_config.json; do
  cmp -s "$refs/gpt2/$file" "$work/tok-hf/$file" || fail "export --hf did not copy $file"
done
"$python" -c 'import json, sys; c = json.load(open(sys.argv[1])); assert (c["bos_token_id"], c["eos_token_id"]) == (50256, 50256), c' \
  "$work/tok-hf/config.json" || fail "config.json lacks the tokenizer's bos and eos"
printf '[model]\nfrom = "%s"\n[data]\ntrain = "%s"\n' "$work/tok-hf" "$work/kjv.txt" > "$work/from-hf.toml"
"$strata" generate "$work/from-hf.toml" --prompt "In the beginning" --max-new-tokens 4 --temperature 0 \
  > "$work/generated.txt" 2> "$work/generate.log" || fail "generate from the export: $(cat "$work/generate.log")"
# "In the beginning" is 3 tokens in GPT-2's vocabulary (byte ids without the tokenizer: 16).
grep -q "base weights from $work/tok-hf" "$work/generate.log" && grep -q "^prompt 3 tokens" "$work/generate.log" &&
  [ -s "$work/generated.txt" ] || fail "generate from the export: $(cat "$work/generate.log" "$work/generated.txt")"
echo "ok: export --hf carries the tokenizer, and generation reads it from the exported directory"
# A model of 60000 ids with GPT-2's 50257-id tokenizer samples text among the tokenizer's ids: one
# of the others stopped the text mid-way (exit 2); a sixth of the ids are past the tokenizer's.
"$strata" train "$work/tok.toml" --set model.vocab=60000 --set train.steps=2 --set "checkpoint.dir=\"$work/wide\"" \
  > "$work/wide.log" 2>&1 || fail "train with 60000 ids: $(cat "$work/wide.log")"
fault "generate: a model with more ids (60000) than its tokenizer (50257)" 0 "sampling among the tokenizer's" -- \
  "$strata" generate "$work/tok.toml" --set model.vocab=60000 --checkpoint "$work/wide" --prompt "In the beginning" \
  --max-new-tokens 40 --temperature 1.5 --seed 1
for seed in 2 3; do
  expect 0 "its tokenizer 50257: sampling among the tokenizer's" -- "$strata" generate "$work/tok.toml" \
    --set model.vocab=60000 --checkpoint "$work/wide" --prompt "In the beginning" --max-new-tokens 40 \
    --temperature 1.5 --seed $seed
done
fault "train: a tokenizer larger than model.vocab" 2 "is larger than model.vocab = 50000" -- \
  "$strata" train "$work/tok.toml" --set model.vocab=50000
fault "validate: a tokenizer larger than model.vocab" 2 "is larger than model.vocab = 50000" -- \
  "$strata" validate "$work/tok.toml" --set model.vocab=50000
expect 0 "" -- "$strata" validate "$work/tok.toml"
fault "train: a .jsonl corpus without a tokenizer" 2 "a .jsonl corpus needs a tokenizer" -- \
  "$strata" train $q --set data.train=\"$work/docs.jsonl\" --set train.steps=1
fault "train: [data] tokenizer naming a directory without one" 2 "is not a directory holding tokenizer.json" -- \
  "$strata" train $q --set data.tokenizer=\"$work\" --set train.steps=1
expect 0 "never train" -- "$strata" train $q --set model.vocab=300 --set train.steps=1
echo "tokenizer: all passed"
