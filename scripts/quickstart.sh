#!/usr/bin/env bash
# Set-up, build, then train the quickstart model (about a minute on 2 CPU cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/bin/strata train examples/quickstart.toml
