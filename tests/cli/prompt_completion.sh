#!/usr/bin/env bash
# Prompt and completion data end to end, on GPT-2's real vocabulary (REFS: the CTest fixture
# tokenizer_references). Usage: prompt_completion.sh STRATA WORK REFS
#   - `strata prepare --prompt-completion` writes a loss mask beside each token file: in every
#     document the prompt's ids are not targets, then the completion's and eos are;
#   - training reads the mask (its log says how many tokens are targets) and lowers the loss,
#     and `strata eval` of the save gives the validation loss training measured over the targets;
#   - bad input is refused, exit 2: a line without a completion (file and line named), --field with
#     --prompt-completion, a mask that no longer belongs to its token file, a resume over an edited
#     mask; a plain prepare over the same --out removes the old mask, saying so.
source "$(dirname "$0")/expect.sh" "$1" "$2"
refs=$3
python=/usr/bin/python3

# 600 pairs from the corpus: a verse's first half asks, its second half answers.
"$python" - "$work/pairs.jsonl" <<'PY'
import json, sys
lines = [l.strip() for l in open('data/kjv.txt', encoding='utf-8') if len(l.split()) >= 8][:600]
with open(sys.argv[1], 'w', encoding='utf-8') as out:
    for line in lines:
        words = line.split()
        half = len(words) // 2
        out.write(json.dumps({"prompt": "Continue: " + " ".join(words[:half]), "completion": " " + " ".join(words[half:])}) + "\n")
PY
"$strata" prepare --prompt-completion --tokenizer "$refs/gpt2" --out "$work/train.bin" --val-out "$work/val.bin" \
  --threads 2 "$work/pairs.jsonl" > "$work/prepare.log" || fail "prepare: $(cat "$work/prepare.log")"
grep -q "wrote $work/train.bin.mask: .* tokens are targets (the completions and eos)" "$work/prepare.log" ||
  fail "no mask reported: $(cat "$work/prepare.log")"
[ -f "$work/val.bin.mask" ] || fail "no validation mask"
"$python" - "$work/train.bin" "$work/train.bin.mask" <<'PY' || fail "the mask does not frame prompts and completions"
import struct, sys
data, mask = open(sys.argv[1], 'rb').read(), open(sys.argv[2], 'rb').read()
magic, version, count = struct.unpack('<3i', data[:12])
ids = struct.unpack('<%dH' % count, data[1024:1024 + 2 * count])
m_magic, m_version, m_count = struct.unpack('<3i', mask[:12])
assert (m_magic, m_version, m_count) == (20261208, 1, count), (m_magic, m_version, m_count, count)
targets = mask[1024:]
assert len(targets) == count
documents, start = 0, 0
for i, token in enumerate(ids):
    if token != 50256:
        continue
    doc = targets[start:i + 1]
    first = doc.index(1)
    assert first > 0 and all(t == 0 for t in doc[:first]) and all(t == 1 for t in doc[first:]), (start, list(doc))
    documents, start = documents + 1, i + 1
assert start == count and documents > 500, (start, count, documents)
print(f"{documents} documents: prompt 0s, then completion and eos 1s")
PY
echo "ok: prepare --prompt-completion masks the prompts"

# A small GPT-2 on them: the mask is read, the loss over the completions falls, eval agrees.
cat > "$work/m.toml" <<TOML
[model]
n_layer = 2
n_head = 2
d_model = 64
vocab = 50304
seq_len = 64
[data]
train = "$work/train.bin"
val = "$work/val.bin"
[train]
steps = 40
batch = 8
lr = 3e-3
seed = 7
eval_every = 40
eval_batches = 4
threads = 2
[checkpoint]
dir = "$work/ckpt"
[[telemetry]]
plugin = "jsonl"
path = "$work/steps.jsonl"
TOML
"$strata" train "$work/m.toml" > "$work/train.log" 2>&1 || fail "train: $(tail -5 "$work/train.log")"
grep -q "loss mask: .* training tokens are targets" "$work/train.log" || fail "no loss mask read: $(head "$work/train.log")"
"$python" - "$work/steps.jsonl" "$("$strata" eval "$work/m.toml" --checkpoint "$work/ckpt" 2>/dev/null | tail -n 1)" <<'PY' ||
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in records if 'record' not in r and 'step' in r]
summary = [r for r in records if r.get('record') == 'summary'][0]
first, last = steps[0]['loss'], steps[-1]['loss']
evaluated = float(sys.argv[2].split('=')[1])
assert last < first - 1.0, (first, last)
assert abs(evaluated - summary['final_val_loss']) < 5e-7, (evaluated, summary['final_val_loss'])  # eval prints 6 decimals
print(f"loss over the completions {first:.3f} -> {last:.3f}; eval {evaluated:.6f} = the run's validation loss")
PY
  fail "training on the masked data"
echo "ok: training reads the mask, the loss falls, eval agrees"

# Bad input.
printf '{"prompt": "a", "completion": "b"}\n{"prompt": "no answer"}\n' > "$work/bad.jsonl"
fault "prepare --prompt-completion: a line without a completion" 2 "bad.jsonl:2: no string field \"completion\"" -- \
  "$strata" prepare --prompt-completion --tokenizer "$refs/gpt2" --out "$work/bad.bin" "$work/bad.jsonl"
[ ! -e "$work/bad.bin" ] && [ ! -e "$work/bad.bin.mask" ] || fail "a refused prepare wrote files"
fault "prepare: --field with --prompt-completion" 2 "--field names the text of plain lines" -- \
  "$strata" prepare --prompt-completion --field text --tokenizer "$refs/gpt2" --out "$work/x.bin" "$work/pairs.jsonl"
cp "$work/val.bin" "$work/val.bin.saved"
"$python" - "$work/val.bin" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
data[1024] ^= 1  # the first token, another id
open(path, 'wb').write(bytes(data))
PY
fault "eval: a loss mask whose token file changed" 2 "val.bin.mask (the loss mask of $work/val.bin): written for other tokens" -- \
  "$strata" eval "$work/m.toml" --checkpoint "$work/ckpt"
cp "$work/val.bin.saved" "$work/val.bin"
# A resume checks the mask too: one prompt token made a target is another run's data.
cp "$work/train.bin.mask" "$work/train.bin.mask.saved"
"$python" - "$work/train.bin.mask" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
data[1024 + data[1024:].index(0)] = 1
open(path, 'wb').write(bytes(data))
PY
fault "train --resume over an edited loss mask" 2 "changed since the save" -- "$strata" train "$work/m.toml" --resume --set train.steps=41
cp "$work/train.bin.mask.saved" "$work/train.bin.mask"
printf '{"text": "In the beginning"}\n' > "$work/plain.jsonl"
fault "prepare without --prompt-completion over an --out with a mask" 0 "removed $work/val.bin.mask" -- \
  "$strata" prepare --tokenizer "$refs/gpt2" --out "$work/plain.bin" --val-out "$work/val.bin" --val-fraction 0.5 \
  "$work/plain.jsonl" "$work/plain.jsonl"
[ ! -e "$work/val.bin.mask" ] || fail "the old mask is still beside a token file written without one"
echo "prompt_completion: all passed"
