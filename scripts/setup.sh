#!/usr/bin/env bash
# Installs the Debian packages Strata needs (only those missing), then configures and builds
# a Release tree in build/. Run as root on Debian 12; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache pkg-config python3 clang-format
  libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev
  libboost-dev libboost-filesystem-dev libboost-program-options-dev
  libgtest-dev libopenblas-openmp-dev python3-numpy)
missing=()
for package in "${packages[@]}"; do
  dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON
cmake --build build -j"$(nproc)"
