#!/usr/bin/env python3
"""How far a frozen Adam direction carries (bench/predictor_probe.sh): from per-step checkpoints
first..first+K of an AdamW run, the norms of Adam's K real steps, the cosine between consecutive
ones, and what a predict phase would do from step `first`: move K steps along
m / (sqrt(v) + eps) by Adam's own step lengths. Printed: the cosine of that direction with the
first real step and with the K-step displacement, and how far its endpoint lands from Adam's.
Reads safetensors with the standard library only (all tensors, in name order).
Usage: python3 bench/predictor_probe.py CHECKPOINT_DIR FIRST K"""
import array
import json
import math
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        tensors[name] = values
    return tensors


def flat(tensors, names, suffix=""):
    out = []
    for name in names:
        out.extend(tensors[name + suffix])
    return out


def norm(x):
    return math.sqrt(sum(t * t for t in x))


def sub(a, b):
    return [x - y for x, y in zip(a, b)]


def cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


def main():
    directory, first, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    saves = [load(f"{directory}/step_{first + i:08d}/model.safetensors") for i in range(k + 1)]
    names = sorted(saves[0])
    weights = [flat(s, names) for s in saves]
    state = load(f"{directory}/step_{first:08d}/optimizer.safetensors")
    m, v = flat(state, names, ".state0"), flat(state, names, ".state1")
    direction = [-a / (math.sqrt(b) + 1e-8) for a, b in zip(m, v)]
    steps = [sub(weights[i + 1], weights[i]) for i in range(k)]
    lengths = [norm(s) for s in steps]
    displacement = sub(weights[k], weights[0])
    scale = sum(lengths) / norm(direction)
    predicted = [d * scale for d in direction]
    print("Adam's step norms:", " ".join(f"{x:.4f}" for x in lengths))
    print("cosine of consecutive steps:", " ".join(f"{cos(steps[i], steps[i + 1]):.3f}" for i in range(k - 1)))
    print(f"displacement over {k} steps: {norm(displacement):.4f} (sum of step norms {sum(lengths):.4f})")
    print(f"frozen direction: cosine {cos(direction, steps[0]):.3f} with the next step, "
          f"{cos(direction, displacement):.3f} with the {k}-step displacement")
    print(f"its {k}-step endpoint lands {norm(sub(predicted, displacement)):.4f} from Adam's")


if __name__ == "__main__":
    main()
