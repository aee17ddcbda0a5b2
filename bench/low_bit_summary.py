"""Summarizes bench/low_bit_bench.sh's runs: final validation loss per stack and seed (from each run's
JSONL summary record), the mean over seeds, its gap to the reference (the first manifest), median
ms/step, and the allocator's peak device bytes for weights and optimizer state.

  low_bit_summary.py DIR...   (each DIR is one `strata ab --out` directory)"""
import glob, json, os, statistics, sys
from collections import defaultdict

rows = defaultdict(list)  # stack -> [(val, ms, weights, optimizer)]
order = []
for directory in sys.argv[1:]:
    for path in sorted(glob.glob(os.path.join(directory, "*.jsonl"))):
        stack = os.path.basename(path)[:-len(".jsonl")].split("-", 1)[1]
        summary = None
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if record.get("record") == "summary":
                    summary = record
        if summary is None or "final_val_loss" not in summary:
            print(f"{path}: no summary with a validation loss (run failed or unfinished)")
            continue
        if stack not in order:
            order.append(stack)
        peaks = summary["peak_device_bytes_by_category"]
        rows[stack].append((summary["final_val_loss"], summary["median_ms"], peaks["weights"], peaks["optimizer"]))

reference = statistics.mean(v for v, *_ in rows[order[0]]) if order else 0.0
print(f"{'stack':<14} {'val loss per seed':<28} {'mean':>7} {'vs ref':>8} {'ms/step':>8} {'weights MiB':>12} {'optimizer MiB':>14}")
for stack in order:
    runs = rows[stack]
    vals = [v for v, *_ in runs]
    mean = statistics.mean(vals)
    ms = statistics.median(m for _, m, _, _ in runs)
    weights = max(w for *_, w, _ in runs) / 2**20
    optimizer = max(o for *_, o in runs) / 2**20
    print(f"{stack:<14} {' '.join(f'{v:.4f}' for v in vals):<28} {mean:7.4f} {100 * (mean - reference) / reference:+7.2f}% "
          f"{ms:8.1f} {weights:12.3f} {optimizer:14.3f}")
