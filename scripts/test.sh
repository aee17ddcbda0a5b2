#!/usr/bin/env bash
# Set-up, build, check formatting, then run the whole test suite through CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/check-format.sh
cd build
# Two tests at a time on a 2-core machine, each with two OpenMP threads. OpenMP threads that wait
# by spinning stalled each other at every barrier when two tests shared the cores (19 s serial
# against 36-185 s with -j2); threads that sleep while they wait do not (passive): the suite took
# 441.5 s with -j2 against 728 s serially (2026-11-27).
export OMP_WAIT_POLICY=passive
ctest --output-on-failure -j"$(nproc)"
