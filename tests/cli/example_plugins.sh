# Sourced by the third-party plugin tests: installs BUILD_DIR into WORK/prefix, builds
# examples/third-party-plugin against that installed SDK only (the targets named, or every plugin),
# and points the shell at them: $strata is the installed program, STRATA_PLUGIN_PATH the plugins.
#   install_and_build_examples BUILD_DIR WORK [TARGET...]
install_and_build_examples() {
  local build_dir=$1 work=$2
  shift 2
  rm -rf "$work" && mkdir -p "$work"
  cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
  strata="$work/prefix/bin/strata"
  cmake -S examples/third-party-plugin -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
  local targets=()
  for target in "$@"; do targets+=(--target "$target"); done
  cmake --build "$work/build" "${targets[@]}" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
  export STRATA_PLUGIN_PATH="$work/build"
}

# Plans each named run as `strata plan WORK/NAME.toml ARGS...` and checks its predicted device peak
# against the peak the run measured (WORK/NAME.jsonl): within 5% (or 64 KiB).
#   plan_matches_runs WORK "NAME..." ARGS...
plan_matches_runs() {
  local work=$1 names=$2
  shift 2
  for run in $names; do
    "$strata" plan "$work/$run.toml" "$@" --json > "$work/$run.plan.json" || { cat "$work/$run.plan.json"; return 1; }
  done
  python3 -c 'import json, sys
for run in sys.argv[2:]:
    measured = [json.loads(l) for l in open("%s/%s.jsonl" % (sys.argv[1], run))][-1]["peak_device_bytes"]
    predicted = json.load(open("%s/%s.plan.json" % (sys.argv[1], run)))["device"]["peak_bytes"]
    print("%s plan: predicted %d, measured %d bytes" % (run, predicted, measured))
    assert abs(predicted - measured) <= max(0.05 * measured, 65536), run' "$work" $names
}
