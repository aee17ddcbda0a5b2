#!/usr/bin/env bash
# Installs the Debian packages Strata and its tests need (only those missing), then configures and
# builds a Release tree in build/ with everything: tests, fuzz smoke targets, benchmarks and, when
# nvcc is found, the CUDA backend. Run as root on Debian 12; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/install-packages.sh
install_missing "${strata_build_packages[@]}" "${strata_test_packages[@]}"
install_node_unless_present

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON
cmake --build build -j"$(nproc)"
