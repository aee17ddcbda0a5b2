"""Writes random GPT-2-vocabulary tokens as an llm.c token file, for the 124M benchmark shape.

  make_gpt2_tokens.py OUT [count] [vocab]   (vocab defaults to GPT-2's 50257; the file is version 1,
                                              uint16 ids, when every id fits, else version 2, uint32
                                              ids, as Strata's writer chooses)"""
import os, random, struct, sys
path = sys.argv[1]
os.makedirs(os.path.dirname(path) or ".", exist_ok=True)  # a fresh checkout has no runs/
count = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
vocab = int(sys.argv[3]) if len(sys.argv) > 3 else 50257
random.seed(0)
tokens = [random.randrange(vocab) for _ in range(count)]
version = 1 if max(tokens, default=0) < 65536 else 2
with open(path, "wb") as f:
    header = [20240520, version, count] + [0] * 253
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%d%s" % (count, "H" if version == 1 else "I"), *tokens))
