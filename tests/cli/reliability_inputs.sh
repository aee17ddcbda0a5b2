#!/usr/bin/env bash
# Inputs read by what they are, output that must arrive, and inputs that used to crash or hang the
# process (reliability round two): data files by content, stdout failures, broken plugin libraries,
# wrapping shapes, every problem of a manifest at once, deep TOML keys, ab's outputs. Each case
# checks its exit code and message; with RELIABILITY_TABLE set, each adds a row to
# docs/reliability.md's table.
set -uo pipefail
source "$(dirname "$0")/expect.sh" "$1" "$2"
small=(--set model.n_layer=2 --set model.d_model=32 --set model.seq_len=16 --set train.batch=4
  --set train.eval_batches=2 --set telemetry.1.path=\"$work/steps.jsonl\")

# Data files are told apart by their first bytes, whatever their names. Token 300 is outside the
# byte vocabulary (256): only a file read as tokens can hold it, so the refusal proves the reading.
python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, 64, *[0] * 253) + struct.pack("<64H", *([300] + [65] * 63)))' \
  "$work/tokens"
for name in OK.BIN no_suffix header.txt; do
  cp "$work/tokens" "$work/$name"
  fault "token file named $name" 2 "$name: token 300 at position 0 is outside the model's vocabulary" -- \
    "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/$name\"
done
head -c 4096 data/kjv.txt > "$work/text.Bin"
fault "a .Bin file without the magic number" 2 "text.Bin: wrong magic number" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/text.Bin\"
printf '{"text": "In the beginning"}\n' > "$work/corpus.jsonl"
fault "a .jsonl corpus without a tokenizer" 2 "corpus.jsonl: a .jsonl corpus needs a tokenizer" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/corpus.jsonl\"
printf '{"text": "In the beginning"}\n' > "$work/corpus.json"
fault "a .json file as a corpus" 2 "corpus.json: JSON is not a corpus format Strata reads" -- \
  "$strata" train $q "${small[@]}" --set train.steps=1 --set data.train=\"$work/corpus.json\"

# Output that never arrives is a failed command; train writes its checkpoint first. The full
# device is a node made here (never the machine's own /dev/full).
if mknod "$work/full" c 1 7 2> /dev/null; then
  expect 1 "writing to standard output failed" -- sh -c "\"\$0\" \"\$@\" > \"$work/full\"" "$strata" train $q "${small[@]}" \
    --set train.steps=2 --set checkpoint.dir=\"$work/full_ckpt\"
  [ "$(cat "$work/full_ckpt/latest")" = step_00000002 ] || fail "train with a full stdout did not checkpoint first"
  fault "eval with stdout on a full device" 1 "strata eval: writing to standard output failed" -- \
    sh -c "\"\$0\" \"\$@\" > \"$work/full\"" "$strata" eval $q "${small[@]}" --checkpoint "$work/full_ckpt"
  fault "plan with stdout on a full device" 1 "strata plan: writing to standard output failed" -- \
    sh -c "\"\$0\" \"\$@\" > \"$work/full\"" "$strata" plan $q
else
  echo "skipped: mknod is not permitted here (the full-device cases need a character device node)"
fi
fault "eval with stdout closed" 1 "strata eval: writing to standard output failed" -- \
  sh -c "\"\$0\" \"\$@\" >&-" "$strata" eval $q "${small[@]}" --checkpoint "$work/full_ckpt"

# Broken libraries on the plugin path are named, never skipped in silence, and never crash.
plugins=$(dirname "$strata")/../plugins
mkdir -p "$work/plugins_random" "$work/plugins_libz" "$work/plugins_truncated"
head -c 4096 /dev/urandom > "$work/plugins_random/libstrata-adamw.so"
cp "$(ls /usr/lib/*/libz.so.1 | head -n 1)" "$work/plugins_libz/libstrata-adamw.so"
head -c 20000 "$plugins/libstrata-adamw.so" > "$work/plugins_truncated/libstrata-sgd.so"
fault "random bytes shadowing a built-in plugin" 0 "plugin library $work/plugins_random/libstrata-adamw.so was not loaded" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_random\"
fault "libz shadowing a built-in plugin" 0 "was not loaded: not a Strata plugin" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_libz\"
fault "a truncated plugin library on the search path" 0 "libstrata-sgd.so was not loaded: truncated" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_truncated\"
expect 0 "failed to load" -- env STRATA_PLUGIN_PATH="$work/plugins_truncated" "$strata" plugins
# A whole library whose first relocation points into its read-only ELF header: dlopen would write
# there and die. A probe process dies instead, and every command goes on without the library.
mkdir -p "$work/plugins_relocation"
python3 - "$plugins/libstrata-sgd.so" "$work/plugins_relocation/libstrata-sgd.so" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
shoff, = struct.unpack_from("<Q", data, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
section = lambda i: struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
names = section(shstrndx)[4]
for i in range(shnum):
    name, kind, _, _, offset = section(i)[:5]
    if data[names + name:names + name + 9] == b".rela.dyn":
        struct.pack_into("<Q", data, offset, 0)  # r_offset of the first relocation := 0
open(sys.argv[2], "wb").write(data)
PY
# A library whose initialiser ends the process that loads it (exit(0), not a crash) is named too.
mkdir -p "$work/plugins_exit"
printf '#include <stdlib.h>\n__attribute__((constructor)) static void end(void) { exit(0); }\n' > "$work/exit.c"
cc -shared -fPIC -o "$work/plugins_exit/libstrata-exit.so" "$work/exit.c" || fail "could not build the exit(0) library"
fault "a plugin library whose initialiser calls exit(0)" 0 "libstrata-exit.so was not loaded: crashed the loader (exit code 0" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_exit\"
fault "a plugin library whose relocations crash dlopen" 0 "libstrata-sgd.so was not loaded: crashed the loader" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_relocation\"

# A library whose dynamic section is junk can end the process in an ld.so assertion (exit 127)
# that the probe does not always meet first: the section is checked before any dlopen.
mkdir -p "$work/plugins_dynamic"
python3 - "$plugins/libstrata-sgd.so" "$work/plugins_dynamic/libstrata-sgd.so" <<'PY'
import random, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
junk = random.Random(6)
for i in range(phnum):
    kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if kind == 2:  # PT_DYNAMIC
        data[offset:offset + filesz] = bytes(junk.randrange(256) for _ in range(filesz))
open(sys.argv[2], "wb").write(data)
PY
fault "a plugin library whose dynamic section is junk" 0 "libstrata-sgd.so was not loaded: corrupt: its dynamic section" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_dynamic\"

# A library whose finalisers crash (a corrupt DT_FINI_ARRAYSZ) would end every command as it
# unloads its plugins (exit 139, after a run's saves): the probe unloads what it loaded, and names it.
mkdir -p "$work/plugins_fini"
python3 - "$plugins/libstrata-sgd.so" "$work/plugins_fini/libstrata-sgd.so" <<'PY'
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
for i in range(phnum):
    kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if kind == 2:  # PT_DYNAMIC
        for at in range(offset, offset + filesz, 16):
            if struct.unpack_from("<q", data, at)[0] == 28:  # DT_FINI_ARRAYSZ
                struct.pack_into("<Q", data, at + 8, 1 << 40)
open(sys.argv[2], "wb").write(data)
PY
fault "a plugin library whose finalisers crash" 0 "libstrata-sgd.so was not loaded: crashed the loader while unloading" -- \
  "$strata" validate $q --set plugin_path=\"$work/plugins_fini\"

# Shapes too large to count are refused by name, not printed wrapped.
fault "plan with tokens per micro batch beyond int" 2 "tokens per micro batch, more than 2147483647" -- \
  "$strata" plan $q --set train.batch=2147483647
fault "plan with a row beyond a petabyte" 2 "needs more than" -- "$strata" plan $q --set model.arch='"llama"' \
  --set model.d_ff=2147483647 --set model.seq_len=65536 --set train.batch=16 --set model.n_head=8 --set model.d_model=512

# Every problem of a manifest at once: flash at head dim 32 has no CUDA kernel (int8 and f16
# weights, adamw8bit and LoRA's dropout do, in a build with nvcc), and no GPU is visible here.
{ cat $q; printf '[[strategy]]\nplugin = "lora"\nrank = 4\ndropout = 0.1\n'; } > "$work/many.toml"
expect 2 '[kernels] attention = "flash"' -- "$strata" validate "$work/many.toml" --set device.kind='"cuda:0"' \
  --set precision.plugin='"fp16"' --set optimizer.plugin='"adamw8bit"' --set kernels.attention='"flash"'
for problem in "flash" "cuda:0"; do
  grep -qi -- "$problem" <<< "$output" || fail "validate did not list the $problem problem with the others: $output"
done
echo "ok: validate listed every problem"
# ... and across stages: a key out of range, a misspelt plugin, missing data and an uncreatable
# checkpoint directory, each found by a different stage, all named by one validate.
mkdir -p "$work/a_file" && : > "$work/a_file/file"
fault "several problems in different stages (keys, stack, data, checkpoint dir)" 2 "steps = 0 is out of range" -- \
  "$strata" validate $q --set train.steps=0 --set optimizer.plugin='"adamx"' --set data.train=\"$work/none.txt\" \
  --set checkpoint.dir=\"$work/a_file/file/ckpt\"
for problem in "unknown optimizer plugin 'adamx'" "none.txt: no such file" "file/ckpt ([checkpoint] dir)"; do
  grep -qF -- "$problem" <<< "$output" || fail "validate did not list \"$problem\" with the others: $output"
done

# A refused value is not then checked against other keys: a refused [model] key leaves the shape at
# its default, so the plugins' checks against the shape are left out (and validate says so); a
# refused offload value does not also count as "nothing to offload".
fault "int8 block_size beside a refused d_model" 2 "d_model = 0 is out of range" -- \
  "$strata" validate $q --set model.d_model=0 --set precision.plugin='"int8"' --set precision.block_size=200
grep -q "does not divide" <<< "$output" && fail "block_size was checked against a d_model the manifest does not hold: $output"
sed 's/^d_model = /d_modle = /' $q > "$work/misspelt_model.toml"
expect 2 "unknown key 'd_modle'" -- "$strata" validate "$work/misspelt_model.toml" --set precision.plugin='"int8"' \
  --set precision.block_size=200
grep -q "does not divide" <<< "$output" && fail "block_size was checked against a default d_model: $output"
expect 2 "unknown optimizer plugin 'adamx'" -- "$strata" validate $q --set model.n_layer=0 --set optimizer.plugin='"adamx"' \
  --set 'strategy=[{plugin="offload",optimizer_state="host",max_resident_layers=20}]'
grep -q "out of range \[1, 12\]" <<< "$output" && fail "max_resident_layers was checked against the default n_layer: $output"
grep -q "does not divide" <<< "$output" && fail "block_size was checked against a d_model the manifest does not hold: $output"
grep -q "the plugins' own keys, which are read against the model, were left unchecked" <<< "$output" ||
  fail "validate did not say what it left out: $output"
{ cat $q; printf '[[strategy]]\nplugin = "offload"\noptimizer_state = "hots"\nactivations = "hots"\n'; } > "$work/offload_typo.toml"
fault "offload with misspelt values" 2 'optimizer_state = "hots" is not one of' -- "$strata" validate "$work/offload_typo.toml"
grep -q "nothing to offload" <<< "$output" && fail "a refused value also counted as nothing to offload: $output"
grep -q 'activations = "hots" is not one of' <<< "$output" || fail "validate did not name the second refused value: $output"

# A key of 40,000 dotted parts would overflow toml++'s recursion.
python3 -c 'import sys; open(sys.argv[1], "w").write("a" + ".a" * 40000 + " = 1\n")' "$work/deep.toml"
fault "a dotted key of 40,001 parts" 2 "deep.toml:1:128: malformed TOML: a dotted key or table name of more than 64 parts" -- \
  timeout 60 "$strata" validate "$work/deep.toml"
python3 -c 'import sys; open(sys.argv[1], "w").write("[" + ".".join(["t"] * 40000) + "]\n")' "$work/deep_table.toml"
fault "a table name of 40,000 parts" 2 "malformed TOML: a dotted key or table name of more than 64 parts" -- \
  timeout 60 "$strata" validate "$work/deep_table.toml"

# ab checks where its report goes before it trains anything.
fault "ab with an --html path that cannot be created" 2 "--html /proc/none/r.html: cannot be created" -- \
  timeout 120 "$strata" ab $q $q --steps 1 --out "$work/ab" --html /proc/none/r.html
[ -z "$(ls "$work/ab" 2> /dev/null)" ] || fail "ab trained before refusing its --html path"
# Under an address-space limit too small for OpenBLAS's work buffers, OpenBLAS would retry its
# allocation forever before main; Strata checks first and says so. Whether 800000 KiB is too small
# depends on the build (the CUDA libraries take address space) and the cores: either the command
# runs, or it fails with the message; it never spins.
limited=(timeout 60 bash -c 'ulimit -v 800000 && exec "$0" "$@"' "$strata" validate $q)
"${limited[@]}" > "$work/ulimit.txt" 2>&1
code=$?
# A sanitizer build cannot reserve its shadow memory under such a limit at all (exit 86).
grep -q "Sanitizer" "$work/ulimit.txt" && code=sanitized
case $code in
  sanitized) echo "skipped: the sanitizers need more address space than ulimit -v 800000 before main" ;;
  0) echo "ok: validate ran under ulimit -v 800000 (this build and machine fit)" ;;
  1) fault "ulimit -v 800000: too little address space for OpenBLAS" 1 "leaves too little room for OpenBLAS's work buffers" -- \
       "${limited[@]}" ;;
  *) fail "validate under ulimit -v 800000 neither ran nor refused: $(cat "$work/ulimit.txt")" ;;
esac
# A limit that admits the start but not OpenBLAS's per-thread buffers during the run: refused
# before the first step (exit 1), or trains (exit 0); never a spin (timeout's exit 124 or 137).
timeout -k 5 120 bash -c 'ulimit -v 1200000 && exec "$0" "$@"' "$strata" train $q --set train.steps=2 \
  --set telemetry.1.path=\"$work/limited.jsonl\" > "$work/ulimit_train.txt" 2>&1
code=$?
grep -q "Sanitizer" "$work/ulimit_train.txt" && code=0
[ "$code" = 0 ] || [ "$code" = 1 ] || fail "train under ulimit -v 1200000 exited $code: $(tail -3 "$work/ulimit_train.txt")"
echo "ok: train under ulimit -v 1200000 exited $code: $(tail -1 "$work/ulimit_train.txt" | cut -c1-120)"
echo "every input refused or read by what it is"
