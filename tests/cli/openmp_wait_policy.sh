#!/usr/bin/env bash
# OpenMP threads spin briefly before they sleep unless the user says otherwise (hosts/strata/
# openmp_wait_policy.cpp): libgomp, asked to print its settings (OMP_DISPLAY_ENV), reports 10000
# turns for a strata started without a setting (its own default is 300000), the user's settings
# when there are some, and a run started without one trains as before (the restart keeps the
# process and the arguments).
set -euo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
spin() {  # how long libgomp's threads spin before they sleep, in a `strata plugins` started so
  env "$@" OMP_DISPLAY_ENV=verbose "$strata" plugins 2>&1 >/dev/null | sed -n "s/^ *GOMP_SPINCOUNT = '\(.*\)'$/\1/p"
}
policy() {  # the wait policy libgomp reports likewise
  env "$@" OMP_DISPLAY_ENV=true "$strata" plugins 2>&1 >/dev/null | sed -n "s/^ *OMP_WAIT_POLICY = '\(.*\)'$/\1/p"
}
[ "$(spin -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)" = 10000 ] ||
  { spin -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT; echo "strata must default to a short spin"; exit 1; }
[ "$(spin -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive)" = 0 ] || { echo "a user's passive policy must be kept"; exit 1; }
[ "$(policy OMP_WAIT_POLICY=active)" = ACTIVE ] || { echo "a user's OMP_WAIT_POLICY must be kept"; exit 1; }
[ "$(spin -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000)" = 1000 ] ||
  { echo "a user's GOMP_SPINCOUNT must be left to libgomp"; exit 1; }
# The restarted program keeps its arguments and its process: a short run trains and writes its
# metrics; the policy is printed once (the first image never started libgomp).
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$work/m.toml"
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=true "$strata" train "$work/m.toml" --set train.steps=3 --set train.eval_every=0 \
  --metrics "$work/m.jsonl" > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
[ "$(grep -c "OMP_WAIT_POLICY = " "$work/train.log")" = 1 ] || { cat "$work/train.log"; exit 1; }
[ "$(grep -c '"step"' "$work/m.jsonl")" = 3 ] || { cat "$work/m.jsonl"; exit 1; }
echo "openmp waiting: a short spin by default, the user's settings when set"
