#!/usr/bin/env bash
# Exit codes as documented: 0 success, 1 the run failed, 2 invalid input.
set -uo pipefail
strata=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect CODE TEXT -- command...
  local code=$1 text=$2; shift 3
  output=$("$@" 2>&1); actual=$?
  [ "$actual" = "$code" ] || fail "'$*' exited $actual, expected $code: $output"
  echo "$output" | grep -qF -- "$text" || fail "'$*' did not say '$text': $output"
  echo "ok ($code): $*"
}
expect 0 "usage: strata train" -- "$strata" train --help
expect 0 "ok (adamw + fp32" -- "$strata" validate examples/quickstart.toml
expect 2 "unknown key 'stpes'" -- "$strata" validate examples/quickstart.toml --set train.stpes=3
expect 2 "no such manifest file" -- "$strata" train "$work/missing.toml"
expect 2 "unknown command" -- "$strata" frobnicate
expect 2 "no such file" -- "$strata" train examples/quickstart.toml --set data.train=\"$work/nothing.txt\"
# A version-2 (uint32) token file whose id 70000 is outside quickstart's vocab of 256.
python3 -c 'import struct, sys
tokens = [1] * 2000; tokens[3] = 70000
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 2, len(tokens), *[0] * 253) + struct.pack("<%dI" % len(tokens), *tokens))' "$work/wide.bin"
expect 2 "wide.bin: token 70000 at position 3 is outside the model's vocabulary (model.vocab = 256)" -- \
  "$strata" train examples/quickstart.toml --set data.train=\"$work/wide.bin\"
expect 2 "invalid checkpoint" -- "$strata" eval examples/quickstart.toml --checkpoint "$work"
expect 1 "memory limit exceeded" -- "$strata" train examples/quickstart.toml --set device.memory_limit=\"8MiB\" --set train.steps=2
# SGD at lr 10 with momentum overflows the weights within a few steps: the loss goes non-finite.
cat > "$work/diverge.toml" <<EOF
[model]
n_layer = 2
n_head = 2
d_model = 32
vocab = 256
seq_len = 16
[data]
train = "$PWD/data/kjv.txt"
[train]
steps = 200
batch = 4
lr = 10
[optimizer]
plugin = "sgd"
momentum = 0.9
[[telemetry]]
plugin = "csv"
path = "/dev/null"
EOF
expect 1 "training diverged: the loss is" -- "$strata" train "$work/diverge.toml"
expect 0 "optimizer 'adamw'" -- env STRATA_PLUGIN_PATH=build/tests/fixture_plugins "$strata" plugins --verbose
echo "all exit codes as documented"
