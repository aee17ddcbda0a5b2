#!/usr/bin/env bash
# Set-up, build, then the quickstart: the small GPT of examples/quickstart.toml trained twice,
# without and with every memory strategy (examples/all-strategies.toml), compared by `strata ab`
# (about a minute on 2 CPU cores). Each run's log, JSONL and an HTML report land in runs/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
./build/bin/strata ab examples/quickstart.toml examples/all-strategies.toml --steps 500 \
  --out runs/quickstart --html runs/quickstart/report.html
