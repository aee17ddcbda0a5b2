#!/usr/bin/env bash
# The quickstart: the small GPT of examples/quickstart.toml trained twice, without and with every
# memory strategy (examples/all-strategies.toml), compared by `strata ab` (about a minute on 2 CPU
# cores). Each run's log, JSONL and an HTML report land in runs/quickstart/.
#
# It installs only the packages the build needs and builds only what it runs, in a tree of its own
# (build-quickstart/): the `strata` binary and the six plugins the two manifests load. No tests,
# benchmarks or CUDA backend: scripts/setup.sh (the test command's set-up) builds those in build/,
# a separate tree, so neither command depends on which ran first. A binary inside its build tree
# loads that tree's plugins (build-quickstart/plugins).
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/install-packages.sh
install_missing "${strata_build_packages[@]}"

cmake -S . -B build-quickstart -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR=ON \
  -DSTRATA_TESTS=OFF -DSTRATA_BENCH=OFF -DSTRATA_CUDA=OFF
# adamw: [optimizer]; precision: fp32; console, jsonl: [[telemetry]]; checkpoint, offload: [[strategy]].
cmake --build build-quickstart -j"$(nproc)" --target strata strata_plugin_adamw strata_plugin_precision \
  strata_plugin_console strata_plugin_jsonl strata_plugin_checkpoint strata_plugin_offload

./build-quickstart/bin/strata ab examples/quickstart.toml examples/all-strategies.toml --steps 500 \
  --out runs/quickstart --html runs/quickstart/report.html
