"""Summarizes bench/finetune_bench.sh: per stack, over seeds, the validation loss on corpus B, the
forgetting on corpus A (loss on A's probe after fine-tuning minus the base's), the allocator's peak
device MiB (total and by category, from each run's JSONL summary), the trainable parameters (the
elements its checkpoint's model.safetensors holds: frozen weights are left out) and the median
ms/step; then LoRA's gap to the full fine-tune and its share of the full fine-tune's peak, and the
bases under LoRA (f32, bf16, int8, NF4): weights against the f32 base's, validation loss against LoRA
on bf16's (QLoRA's target: within 2%).

  finetune_summary.py DIR   (runs/bench-finetune)"""
import glob, json, os, statistics, struct, sys

directory = sys.argv[1]
configs = ["full", "lora", "lora-checkpoint", "lora-bf16", "lora-int8", "lora-nf4", "sparse-freeze", "sparse-skip"]
base_a = float(open(os.path.join(directory, "base-on-A.txt")).read())
base_b = float(open(os.path.join(directory, "base-on-B.txt")).read())


def checkpoint_elements(ckpt):
    latest = open(os.path.join(ckpt, "latest")).read().strip()
    with open(os.path.join(ckpt, latest, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    total = 0
    for name, entry in header.items():
        if name != "__metadata__":
            count = 1
            for extent in entry["shape"]:
                count *= extent
            total += count
    return total


rows = {}
for config in configs:
    runs = []
    for run in sorted(glob.glob(os.path.join(directory, f"{config}-[0-9]*"))):
        if not os.path.isdir(run):
            continue
        summary = None
        with open(os.path.join(run, "steps.jsonl")) as f:
            for line in f:
                record = json.loads(line)
                if record.get("record") == "summary":
                    summary = record
        if summary is None or "final_val_loss" not in summary:
            print(f"{run}: no summary (failed or unfinished)")
            continue
        on_a = float(open(os.path.join(run, "on-A.txt")).read())
        runs.append({"seed": run.rsplit("-", 1)[1], "val": summary["final_val_loss"], "forget": on_a - base_a,
                     "ms": summary["median_ms"], "peak": summary["peak_device_bytes"],
                     "by": summary["peak_device_bytes_by_category"],
                     "trainable": checkpoint_elements(os.path.join(run, "ckpt"))})
    if runs:
        rows[config] = runs

mib = 2.0 ** 20
print(f"base (no fine-tune): loss on B {base_b:.4f}, on A {base_a:.4f}\n")
print(f"{'stack':<16} {'val loss on B per seed':<24} {'mean':>7} {'forget A':>9} {'peak MiB':>9} {'weights':>8} "
      f"{'grads':>7} {'optim':>7} {'activ':>7} {'wspace':>7} {'trainable':>10} {'ms/step':>8}")
for config, runs in rows.items():
    mean = lambda key: statistics.mean(r[key] for r in runs)
    peak_by = lambda category: max(r["by"][category] for r in runs) / mib
    per_seed = " ".join(format(r["val"], ".4f") for r in runs)
    print(f"{config:<16} {per_seed:<24} {mean('val'):7.4f} "
          f"{mean('forget'):+9.4f} {max(r['peak'] for r in runs) / mib:9.2f} {peak_by('weights'):8.2f} "
          f"{peak_by('grads'):7.2f} {peak_by('optimizer'):7.2f} {peak_by('activations'):7.2f} "
          f"{peak_by('workspace'):7.2f} {runs[0]['trainable']:>10,} {statistics.median(r['ms'] for r in runs):8.1f}")
if "full" in rows:
    full_val = statistics.mean(r["val"] for r in rows["full"])
    full_peak = max(r["peak"] for r in rows["full"])
    print()
    for config in ("lora", "lora-checkpoint", "lora-int8"):
        if config in rows:
            val = statistics.mean(r["val"] for r in rows[config])
            peak = max(r["peak"] for r in rows[config])
            print(f"{config}: val loss {100 * (val - full_val) / full_val:+.2f}% of the full fine-tune's "
                  f"(target within 5%), peak {peak / full_peak:.2f}x of its peak (target <= 0.35)")
if "lora" in rows and "lora-bf16" in rows:
    print()
    weights_f32 = max(r["by"]["weights"] for r in rows["lora"])
    bf16_val = statistics.mean(r["val"] for r in rows["lora-bf16"])
    for config in ("lora", "lora-bf16", "lora-int8", "lora-nf4"):
        if config in rows:
            weights = max(r["by"]["weights"] for r in rows[config])
            val = statistics.mean(r["val"] for r in rows[config])
            print(f"{config}: weights {weights / mib:.2f} MiB, {weights / weights_f32:.3f}x the f32 base's; val loss "
                  f"{100 * (val - bf16_val) / bf16_val:+.2f}% of LoRA on bf16's")
