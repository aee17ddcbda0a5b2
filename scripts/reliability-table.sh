#!/usr/bin/env bash
# Regenerates the table in docs/reliability.md by running the CLI fault scripts against build/:
# each row is a case the scripts check (its exit code and message), with the message as printed.
set -euo pipefail
cd "$(dirname "$0")/.."
table=$(mktemp)
trap 'rm -f "$table"' EXIT
# The tokenizer script reads the references CTest makes (tests/tokenizers/make_all.sh).
references=build/tests/tokenizer_references
[ -d "$references/gpt2" ] || bash tests/tokenizers/make_all.sh "$references" > /dev/null
for script in exit_codes reliability reliability_saves reliability_inputs disk_tier data_parallel tokenizer generate \
  prompt_completion; do
  extra=()
  [ "$script" = tokenizer ] || [ "$script" = prompt_completion ] && extra=("$references")
  RELIABILITY_TABLE=$table OMP_WAIT_POLICY=PASSIVE bash "tests/cli/$script.sh" build/bin/strata "build/tests/table_$script" \
    "${extra[@]}" > /dev/null || { echo "tests/cli/$script.sh failed; the table was not written"; exit 1; }
done
python3 - "$table" docs/reliability.md <<'PY'
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
escape = lambda text: text.replace("|", "\\|").replace("`", "'")
out = ["| # | bad input or fault | exit | message (paths shortened: WORK is the test's scratch directory) |",
       "|---|---|---|---|"]
for i, (what, code, message) in enumerate(rows, 1):
    out.append(f"| {i} | {escape(what)} | {code} | `{escape(message)}` |")
doc = open(sys.argv[2]).read()
begin, end = "<!-- table: begin -->", "<!-- table: end -->"
head, rest = doc.split(begin)
_, tail = rest.split(end)
open(sys.argv[2], "w").write(head + begin + "\n" + "\n".join(out) + "\n" + end + tail)
print(f"{len(rows)} cases written to {sys.argv[2]}")
PY
