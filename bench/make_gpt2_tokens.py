"""Writes random GPT-2-vocabulary tokens as an llm.c token file, for the 124M benchmark shape."""
import random, struct, sys
path, count = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200000
random.seed(0)
with open(path, "wb") as f:
    header = [20240520, 1, count] + [0] * 253
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % count, *(random.randrange(50257) for _ in range(count))))
