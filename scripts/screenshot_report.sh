#!/usr/bin/env bash
# Renders an HTML report (from `strata ab --html`) in Debian's headless Chromium and saves a PNG,
# to check that the report draws with nothing fetched from the network.
# Usage: bash scripts/screenshot_report.sh REPORT.html [OUT.png]   (apt-get install chromium)
set -euo pipefail
report=$(realpath "$1")
png=${2:-${report%.html}.png}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "chromium is not installed: apt-get install chromium" >&2; exit 2; }
# --no-sandbox: the browser runs as root in containers and CI.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,1900 \
  --screenshot="$png" "file://$report" 2>/dev/null
[ -s "$png" ] || { echo "no screenshot was written" >&2; exit 1; }
echo "screenshot: $png"
