#!/usr/bin/env bash
# Set-up, build, check formatting, then run the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check-format.sh
cd build
# One test at a time: every test already runs two OpenMP threads, and on a 2-core machine two
# tests at once stall each other at every OpenMP barrier (measured: 19 s serial, 36-185 s with -j2).
ctest --output-on-failure -j1
