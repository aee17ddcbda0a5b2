#!/usr/bin/env bash
# GaLore and ActNN-style activation compression, built out of tree against the installed SDK
# (examples/third-party-plugin), on GPT-2 small's shapes (124M parameters, GPT-2's tokenizer on the
# shipped King James text), side by side with `strata ab`, each comparison against AdamW:
#   galore:  adamw | galore (rank 128, projection refreshed every 50 steps by the range finder)
#   actnn:   adamw | actnn (every saved activation of the blocks as 8-bit codes)
#            | stack (checkpoint: the LM head's logits recomputed and the even blocks;
#              offload: the optimizer state on the host) | stack_actnn (the stack and the codec)
# Prints strata ab's table and, from each run's JSONL summary, the optimizer and activation peaks
# (the allocator's) and the final validation loss. docs/benchmarks.md has the figures.
#   bench/research_plugins_bench.sh galore|actnn [BUILD_DIR] [STEPS]    (defaults: build, 150)
set -euo pipefail
cd "$(dirname "$0")/.."
comparison=${1:?galore or actnn}
build=${2:-build}
steps=${3:-150}
out=runs/research
mkdir -p "$out"
source tests/cli/example_plugins.sh  # sets $strata (the installed program) and STRATA_PLUGIN_PATH
install_and_build_examples "$build" "$PWD/$out/install" strata-galore strata-actnn
export OMP_WAIT_POLICY=passive
[ -f "$build/tests/tokenizer_references/gpt2/tokenizer.json" ] ||
  bash tests/tokenizers/make_all.sh "$build/tests/tokenizer_references" > "$out/tokenizers.log"
[ -f "$out/kjv_gpt2.bin" ] ||
  "$strata" prepare --tokenizer "$build/tests/tokenizer_references/gpt2" --out "$out/kjv_gpt2.bin" data/kjv.txt

# GPT-2 small at T = 256, batch 2: the last 10% of the tokens is the validation split, evaluated
# once at the end on 16 batches.
sed -e "s#runs/bench/gpt2_tokens.bin#$out/kjv_gpt2.bin#" -e '/^\[checkpoint\]/,/^every/d' -e '/^\[\[telemetry\]\]/,$d' \
  examples/gpt2-124m.toml > "$out/adamw.toml"
sed -e 's/^plugin = "adamw"/plugin = "galore"\nrank = 128\nrefresh_every = 50/' "$out/adamw.toml" > "$out/galore.toml"
cp "$out/adamw.toml" "$out/actnn.toml"
printf '\n[[strategy]]\nplugin = "actnn"\ngroup = 256\n' >> "$out/actnn.toml"
cp "$out/adamw.toml" "$out/stack.toml"
printf '\n[[strategy]]\nplugin = "checkpoint"\nlayers = [0, 2, 4, 6, 8, 10]\nlogits = "recompute"\n\n[[strategy]]\nplugin = "offload"\noptimizer_state = "host"\n' \
  >> "$out/stack.toml"
cp "$out/stack.toml" "$out/stack_actnn.toml"
printf '\n[[strategy]]\nplugin = "actnn"\ngroup = 256\n' >> "$out/stack_actnn.toml"

common=(--set model.seq_len=256 --set train.batch=2 --set train.micro_batches=1 --set train.warmup_steps=20
  --set "train.eval_every=$steps" --set train.eval_batches=16)
case $comparison in
  galore) runs=(adamw galore) ;;
  actnn) runs=(adamw actnn stack stack_actnn) ;;
  *) echo "usage: $0 galore|actnn [BUILD_DIR] [STEPS]" >&2; exit 2 ;;
esac
rm -rf "$out/ab-$comparison"
"$strata" ab $(printf "$out/%s.toml " "${runs[@]}") --steps "$steps" "${common[@]}" --out "$out/ab-$comparison" |
  tee "$out/ab-$comparison.txt"

python3 - "$out/ab-$comparison" <<'EOF'
import glob, json, os, sys
runs = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    records = [json.loads(line) for line in open(path)]
    runs[os.path.basename(path)[:-len(".jsonl")]] = records[-1]
def figure(name, key):
    for run, summary in runs.items():
        if run.split("-", 1)[1] == name:
            return summary["peak_device_bytes_by_category"][key] if key != "val" else summary["final_val_loss"]
    raise SystemExit("no run named %s in %s" % (name, sorted(runs)))
print("run          optimizer MiB  activations MiB  val loss")
for name in sorted(runs, key=lambda run: int(run.split("-")[0])):
    name = name.split("-", 1)[1]
    print("%-12s %13.1f %16.1f %9.4f" % (name, figure(name, "optimizer") / 2**20,
                                          figure(name, "activations") / 2**20, figure(name, "val")))
ratio = lambda a, b, key: figure(a, key) / figure(b, key)
if len(runs) == 2:
    print("galore / adamw: optimizer %.3fx, val loss %+.2f%%" % (ratio("galore", "adamw", "optimizer"),
                                                               100 * (ratio("galore", "adamw", "val") - 1)))
    raise SystemExit(0)
print("actnn / adamw: activations %.3fx, val loss %+.2f%%" % (ratio("actnn", "adamw", "activations"),
                                                                100 * (ratio("actnn", "adamw", "val") - 1)))
print("stack_actnn / stack: activations %.3fx, val loss %+.2f%%" % (
    ratio("stack_actnn", "stack", "activations"), 100 * (ratio("stack_actnn", "stack", "val") - 1)))
print("stack_actnn / adamw: activations %.3fx, val loss %+.2f%%" % (
    ratio("stack_actnn", "adamw", "activations"), 100 * (ratio("stack_actnn", "adamw", "val") - 1)))
EOF
