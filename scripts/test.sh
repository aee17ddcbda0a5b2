#!/usr/bin/env bash
# Set-up, build, check formatting, then run the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check-format.sh
cd build
ctest --output-on-failure -j"$(nproc)"
