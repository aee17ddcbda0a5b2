#!/usr/bin/env bash
# Compares the SDK's ABI (the probe library built from today's headers) with the released SDK's
# description (abidw's XML, gzipped): tests/abi/check_sdk_abi.sh PROBE.so BASELINE.abi.gz. abidiff's exit status is a bit
# mask (4: changed, 8: incompatible by its own measure); the report says what changed, and only a
# change the version rule gives to a major fails. Without abidiff (abigail-tools) it fails saying so.
set -uo pipefail
probe=$1
baseline=$2
command -v abidiff > /dev/null || { echo "abidiff not found: install abigail-tools (scripts/install-packages.sh)"; exit 1; }
released=$(mktemp --suffix=.abi)
trap 'rm -f "$released"' EXIT
gzip -dc "$baseline" > "$released"
report=$(abidiff --no-show-locs "$released" "$probe")
status=$?
# abidiff counts an appended virtual as incompatible (a derived class built earlier lacks the slot);
# the version rule allows it (the host never calls it on such a plugin), so only these fail: a
# removal, a moved vtable slot, a changed size, offset, type or enumerator value.
breaking='ABI incompatible change|deletion|[1-9][0-9]* Removed|size changed|offset changed|type name changed|changed value|changed from'
if (( status & 3 )); then
  echo "$report"
  echo "abidiff failed (status $status)"
  exit 1
fi
if (( status & 12 )) && grep -Eq "$breaking" <<< "$report"; then
  echo "$report"
  echo "the SDK's ABI changed incompatibly since the released SDK: that is a major version (strata/abi.hpp)"
  exit 1
fi
if (( status & 12 )); then
  echo "$report"
  echo "additions since the released SDK that a minor may make (appended entry points or enumerators)"
fi
echo "SDK ABI: compatible with the released SDK ($(basename "$baseline"))"
