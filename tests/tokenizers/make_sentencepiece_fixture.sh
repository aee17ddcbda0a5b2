#!/usr/bin/env bash
# Builds Strata's SentencePiece tokenizer fixtures.
#
# Usage: make_sentencepiece_fixture.sh OUT_DIR
#
# Trains two small models with Debian's spm_train on spm_train.txt + corpus.txt:
#   OUT_DIR/spm_bpe/      BPE, LLaMA-style settings (identity normalisation,
#                         no whitespace folding, split digits, byte fallback)
#   OUT_DIR/spm_unigram/  unigram, SentencePiece defaults (nmt_nfkc
#                         normalisation, extra whitespace removed, byte fallback)
# Each gets tokenizer.model, tokenizer_config.json and expected.json
# ({"cases": [{"text": ..., "ids": [...]}, ...]}, no BOS/EOS), with ids from
# Debian's python3-sentencepiece. Each model is trained twice and the two files
# must be byte-identical. The per-line ids are also checked against spm_encode.
# Needs: spm_train, spm_encode (package sentencepiece) and a python3 that can
# import sentencepiece (package python3-sentencepiece); set SPM_PYTHON to pick
# the interpreter.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"

for tool in spm_train spm_encode; do
  command -v "$tool" >/dev/null || { echo "make_sentencepiece_fixture: $tool not found (apt install sentencepiece)" >&2; exit 1; }
done
PY=""
for cand in ${SPM_PYTHON:-} /usr/bin/python3 python3; do
  if "$cand" -c 'import sentencepiece' 2>/dev/null; then PY="$cand"; break; fi
done
[[ -n "$PY" ]] || { echo "make_sentencepiece_fixture: no python3 with sentencepiece (apt install python3-sentencepiece)" >&2; exit 1; }

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# The model file records its trainer flags, including --input and
# --model_prefix, so train inside a scratch folder with relative names: the
# model bytes then do not depend on where the checkout lives.
COMMON=(
  --input=spm_train.txt,corpus.txt
  --model_prefix=tokenizer
  --vocab_size=1000
  --byte_fallback=true
  --character_coverage=1.0
  --num_threads=1
  --input_sentence_size=0
  --shuffle_input_sentence=false
  --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1
  --minloglevel=1
)
BPE_FLAGS=(
  --model_type=bpe
  --normalization_rule_name=identity
  --remove_extra_whitespaces=false
  --split_digits=true
  --allow_whitespace_only_pieces=true
)
UNIGRAM_FLAGS=(
  --model_type=unigram
)

train() { # name flags...
  local name="$1"; shift
  local run
  for run in a b; do
    rm -rf "$TMP/work" && mkdir -p "$TMP/work" "$TMP/$name.$run"
    cp "$HERE/spm_train.txt" "$HERE/corpus.txt" "$TMP/work/"
    if ! (cd "$TMP/work" && spm_train "${COMMON[@]}" "$@") >"$TMP/$name.$run/log" 2>&1; then
      cat "$TMP/$name.$run/log" >&2
      echo "make_sentencepiece_fixture: spm_train failed for $name" >&2
      exit 1
    fi
    mv "$TMP/work/tokenizer.model" "$TMP/$name.$run/m.model"
  done
  if ! cmp -s "$TMP/$name.a/m.model" "$TMP/$name.b/m.model"; then
    echo "make_sentencepiece_fixture: spm_train is not deterministic for $name (two runs differ)" >&2
    exit 1
  fi
  mkdir -p "$OUT/$name"
  cp "$TMP/$name.a/m.model" "$OUT/$name/tokenizer.model"
  cat >"$OUT/$name/tokenizer_config.json" <<'EOF'
{
 "add_bos_token": true,
 "add_eos_token": false,
 "bos_token": "<s>",
 "eos_token": "</s>",
 "unk_token": "<unk>",
 "pad_token": null,
 "clean_up_tokenization_spaces": false
}
EOF
  echo "[$name] trained twice, model files identical ($(wc -c <"$OUT/$name/tokenizer.model") bytes)"
}

train spm_bpe "${BPE_FLAGS[@]}"
train spm_unigram "${UNIGRAM_FLAGS[@]}"

# expected.json from python3-sentencepiece, plus checks.
"$PY" - "$HERE/corpus.txt" "$OUT" "$TMP" <<'PYEOF'
import json, subprocess, sys
import sentencepiece as spm

corpus_path, out, tmp = sys.argv[1:4]
with open(corpus_path, encoding="utf-8", newline="") as f:
    corpus = f.read()

# Same case list as make_fixtures.mjs: each line ("\r" kept), chunks of 8
# lines, then the whole file; duplicates dropped.
texts, seen = [], set()
def add(t):
    if t not in seen:
        seen.add(t)
        texts.append(t)
lines = corpus.split("\n")
if lines and lines[-1] == "":
    lines.pop()
for line in lines:
    add(line)
for i in range(0, len(lines), 8):
    add("\n".join(lines[i:i + 8]) + "\n")
add(corpus)

failed = False
for name, lossless in (("spm_bpe", True), ("spm_unigram", False)):
    model = f"{out}/{name}/tokenizer.model"
    sp = spm.SentencePieceProcessor(model_file=model)
    assert sp.piece_to_id("<s>") == 1 and sp.piece_to_id("</s>") == 2 and sp.unk_id() == 0, name
    assert sp.piece_to_id("<0x00>") == 3 and sp.piece_to_id("<0xFF>") == 258, name
    cases = []
    lossy = 0
    for t in texts:
        ids = sp.encode(t)
        if sp.decode(ids) != t:
            lossy += 1
            if lossless:
                print(f"[{name}] decode(encode(x)) != x for {t!r}: {sp.decode(ids)!r}", file=sys.stderr)
                failed = True
        cases.append({"text": t, "ids": ids})

    # Cross-check single lines with the spm_encode command-line tool.
    # (spm_encode reads one sentence per line, so only texts without "\n".)
    line_cases = [c for c in cases if "\n" not in c["text"] and "\r" not in c["text"] and c["text"] != ""]
    inp = "".join(c["text"] + "\n" for c in line_cases).encode("utf-8")
    res = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"],
                         input=inp, capture_output=True, check=True)
    got = res.stdout.decode("utf-8").split("\n")[:len(line_cases)]
    for c, g in zip(line_cases, got):
        gi = [int(x) for x in g.split()]
        if gi != c["ids"]:
            print(f"[{name}] spm_encode disagrees for {c['text']!r}: {gi} vs {c['ids']}", file=sys.stderr)
            failed = True

    with open(f"{out}/{name}/expected.json", "w", encoding="utf-8") as f:
        f.write('{"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")
    n_ids = sum(len(c["ids"]) for c in cases)
    print(f"[{name}] {len(cases)} cases, {n_ids} ids; spm_encode agrees on {len(line_cases)} single-line cases; "
          f"decode(encode(x)) != x for {lossy} cases" + ("" if lossless else " (expected: nmt_nfkc normalisation)"))
sys.exit(1 if failed else 0)
PYEOF
