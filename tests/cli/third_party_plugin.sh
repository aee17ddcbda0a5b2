#!/usr/bin/env bash
# The out-of-tree example plugin builds against the *installed* SDK (find_package(strata)), and the
# installed strata finds it on STRATA_PLUGIN_PATH, lists it and trains with it.
set -euo pipefail
build_dir=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
strata="$work/prefix/bin/strata"
cmake -S examples/third-party-plugin -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" || { cat "$work/build.log"; exit 1; }
export STRATA_PLUGIN_PATH="$work/build"
"$strata" plugins --verbose > "$work/plugins.txt"
grep -q "loss_ema" "$work/plugins.txt" || { cat "$work/plugins.txt"; echo "loss_ema not listed"; exit 1; }
grep -q "$work/prefix/lib/strata/plugins/libstrata-adamw.so" "$work/plugins.txt" ||
  { cat "$work/plugins.txt"; echo "the installed strata must use the plugins installed beside it"; exit 1; }
sed -e "s#data/kjv.txt#$PWD/data/kjv.txt#" -e '/^\[checkpoint\]/,$d' examples/quickstart.toml > "$work/m.toml"
printf '[[telemetry]]\nplugin = "loss_ema"\nalpha = 0.5\npath = "%s"\n' "$work/ema.csv" >> "$work/m.toml"
"$strata" train "$work/m.toml" --set train.steps=5 --set model.n_layer=2 --set model.seq_len=16 \
  --set train.batch=4 > "$work/train.log" 2>&1 || { cat "$work/train.log"; exit 1; }
[ "$(wc -l < "$work/ema.csv")" = 6 ] || { cat "$work/ema.csv"; echo "expected a header and 5 steps"; exit 1; }
grep -q "loss_ema: smoothed training loss" "$work/train.log" || { cat "$work/train.log"; exit 1; }
# A relocated prefix still finds its plugins: the search is relative to the program.
mv "$work/prefix" "$work/moved"
"$work/moved/bin/strata" plugins > "$work/moved.txt"
grep -q "$work/moved/lib/strata/plugins/libstrata-adamw.so" "$work/moved.txt" ||
  { cat "$work/moved.txt"; echo "a moved prefix must find its plugins"; exit 1; }
echo "third-party plugin: built against the installed SDK, listed, and trained with; the prefix relocates"
