"""Summarises bench/data_parallel_bench.sh's runs from their telemetry: per round, the one-process
step, and per zero stage and overlap setting the median step (the first left out), its ratio, and
each rank's median communication time (waiting for the other rank included), the part of it hidden
behind computing, bytes sent per step, and its last step's device peak by category (the
allocator's, from rank 0's JSONL `ranks` list).

  data_parallel_summary.py DIR ROUNDS"""
import json
import os
import statistics
import sys
d = sys.argv[1]
mib = lambda b: f"{b / 2**20:.1f}"
def load(name):
    return [json.loads(l) for l in open(f"{d}/{name}.jsonl") if '"step"' in l]
for rnd in range(1, int(sys.argv[2]) + 1):
    one = load(f"one-r{rnd}")
    one_ms = statistics.median(r["ms"] for r in one[1:])
    c = one[-1]["peak_device_bytes_by_category"]
    print(f"round {rnd} one process: {one_ms:.0f} ms; step peak {mib(one[-1]['peak_device_bytes'])} MiB: w {mib(c['weights'])} g {mib(c['grads'])} o {mib(c['optimizer'])} a {mib(c['activations'])}")
    for z in range(4):
      for overlap in ("true", "false"):
        name = f"z{z}-{overlap}-r{rnd}"
        if not os.path.exists(f"{d}/{name}.jsonl"): continue
        rec = load(name)
        ms = statistics.median(r["ms"] for r in rec[1:])
        print(f"  zero {z}, overlap {overlap}: {ms:.0f} ms ({ms / one_ms:.3f}x)")
        for rank in range(2):
            es = [r["ranks"][rank] for r in rec[1:]]
            c = es[-1]["peak_device_bytes_by_category"]
            comm = statistics.median(e["communication_ms"] for e in es)
            hidden = statistics.median(e["hidden_ms"] for e in es)
            sent = statistics.median(e["bytes_sent"] for e in es)
            print(f"    rank {rank}: comm {comm:.0f} ms ({100*comm/ms:.1f}%), hidden {hidden:.0f} ms ({100*hidden/max(comm, 1e-9):.0f}%), sent {mib(sent)} MiB/step; step peak {mib(es[-1]['peak_device_bytes'])} MiB: w {mib(c['weights'])} g {mib(c['grads'])} o {mib(c['optimizer'])} a {mib(c['activations'])}")
