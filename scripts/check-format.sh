#!/usr/bin/env bash
# Fails, naming the files, when a tracked C++ source differs from .clang-format.
# Fix with: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=()
while IFS= read -r file; do
  clang-format --dry-run --Werror "$file" >/dev/null 2>&1 || unformatted+=("$file")
done < <(git ls-files '*.cpp' '*.hpp' '*.cu')
if [ ${#unformatted[@]} -gt 0 ]; then
  echo "not clang-formatted (run: git ls-files '*.cpp' '*.hpp' | xargs clang-format -i):"
  printf '  %s\n' "${unformatted[@]}"
  exit 1
fi
echo "clang-format: all sources formatted"
