#!/usr/bin/env bash
# Writes tests/abi/sdk.abi.gz, the description of the released SDK that the `sdk_abi` test compares
# today's headers with. Run it when a major version is released (strata/abi.hpp), from a build
# tree: scripts/sdk-abi-baseline.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
cmake --build "$build" --target strata_sdk_abi_probe
abidw --no-corpus-path "$build/tests/abi/libstrata_sdk_abi_probe.so" | gzip -9 > tests/abi/sdk.abi.gz
echo "wrote tests/abi/sdk.abi.gz"
