# Shared by the CLI fault scripts, sourced as `source expect.sh STRATA WORK`: sets $strata, $work
# (emptied) and $q (the quickstart manifest, its outputs under $work). `expect CODE TEXT -- command...` runs the command
# and checks its exit code and that its output holds TEXT. `fault WHAT CODE TEXT -- command...`
# does the same and, when RELIABILITY_TABLE names a file, appends a row (what, code, the output
# line holding TEXT) that scripts/reliability-table.sh turns into docs/reliability.md.
fail() { echo "FAIL: $*"; exit 1; }
expect() {
  local code=$1 text=$2; shift 3
  output=$("$@" 2>&1); actual=$?
  [ "$actual" = "$code" ] || fail "'$*' exited $actual, expected $code: $output"
  grep -qF -- "$text" <<< "$output" || fail "'$*' did not say '$text': $output"
  echo "ok ($code): $*"
}
fault() {
  local what=$1; shift
  expect "$@"
  [ -n "${RELIABILITY_TABLE:-}" ] || return 0
  local line
  line=$(echo "$output" | grep -F -m1 -- "$2" | sed -e 's/^\[[0-9: .-]*\] //' -e "s#$work#WORK#g" -e "s#$PWD/##g")
  printf '%s\t%s\t%s\n' "$what" "$1" "$line" >> "$RELIABILITY_TABLE"
}
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
# The quickstart manifest, writing its checkpoints and telemetry under $work: scripts run side by
# side, and a run refuses a checkpoint directory that holds another run's saves.
q="$work/quickstart.toml"
sed -e "s#runs/quickstart#$work/runs/quickstart#g" examples/quickstart.toml > "$q"
