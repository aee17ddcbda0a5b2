"""The device-memory floor of a training step, from `strata plan --full`, beside a measured peak.

The floor is what any schedule must hold at the busiest moment of the backward pass when every
block is checkpointed and streamed and the optimizer state lives on the host: the parameters
outside the blocks and their gradients (the embedding and head run on the device), the global
activations and the backward workspace, every block's kept output, and one block's weights,
gradients and full activations.

usage: python3 bench/analytic_floor.py PLAN_FULL.txt RUN.jsonl
"""
import json
import sys

MIB = 1024 * 1024


def rows(plan_path):
    for line in open(plan_path):
        words = line.split()
        if len(words) < 7 or words[0] == "tensor" or not words[-1].replace(".", "").isdigit():
            continue
        name, layer, category, mib = words[0], words[1], words[4], float(words[-1])
        yield name, layer, category, mib


def floor_mib(plan_path):
    total = 0.0
    for name, layer, category, mib in rows(plan_path):
        if category == "optimizer":
            continue
        if layer == "-":  # globals: parameters, their gradients, activations, workspace
            total += mib
        elif name.endswith(".act.output"):  # every block keeps its output
            total += mib
        elif layer == "0":  # one block's weights, gradients and activations
            total += mib
    return total


def main():
    plan_path, jsonl_path = sys.argv[1], sys.argv[2]
    summary = [json.loads(l) for l in open(jsonl_path) if '"record":"summary"' in l][0]
    measured = summary["peak_device_bytes"] / MIB
    floor = floor_mib(plan_path)
    print(f"all strategies: measured peak {measured:.1f} MiB, analytic floor {floor:.1f} MiB, "
          f"ratio {measured / floor:.2f}")


if __name__ == "__main__":
    main()
