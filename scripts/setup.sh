#!/usr/bin/env bash
# Installs the Debian packages Strata needs (only those missing), then configures and builds
# a Release tree in build/. Run as root on Debian 12; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/install-packages.sh
install_missing build-essential cmake ninja-build ccache pkg-config python3 clang-format \
  libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev \
  libboost-dev libboost-filesystem-dev libboost-program-options-dev \
  libgtest-dev libopenblas-openmp-dev python3-numpy

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON
cmake --build build -j"$(nproc)"
