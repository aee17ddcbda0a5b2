"""The table of bench/gpu_bench.sh: Strata's runs (their JSONL) beside PyTorch's (bench/torch_gpt2_gpu.py's
JSON), one row per configuration: ms/step, tokens/s, peak device MiB, MFU. Also the model-FLOPs formula
that both use.

  gpu_bench_table.py [--torch JSON[,SMI_LOG]]... [--skip N] [--peak-flops F] [--json OUT] [NAME=JSONL[,SMI_LOG]]...

NAME=JSONL: a Strata run's telemetry; ms/step is the median of its step records after the first N (--skip,
default 2: start-up and first-use costs), tokens/s is tokens per step over that median, peak device MiB is
the summary's peak of live device bytes (Strata's allocator, whole run). SMI_LOG, when given: nvidia-smi
memory.used samples (MiB, one per line, the first one taken before the run) whose peak over the first is
the 'smi MiB' column, the process's whole footprint on the device (CUDA context included).
"""
import argparse, json, statistics, sys

GPT2_124M = dict(n_layer=12, n_head=12, d_model=768, vocab=50257, seq_len=1024)
FLOPS_FORMULA = ("model FLOPs per token = 6*N + 12*n_layer*T*d_model "
                 "(N: parameters as Strata counts them, real vocab, wpe included, tied head once; "
                 "attention's score and value products counted in full, not halved for causality); "
                 "MFU = FLOPs per token * tokens/s / peak")


def gpt2_parameter_count(n_layer, d_model, vocab, seq_len, **_):
    """GPT-2's parameters as core/model/gpt2/gpt2_config.cpp counts them (the real vocab, not the padded one)."""
    C = d_model
    per_layer = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * 4 * C + 4 * C) + (4 * C * C + C)
    return vocab * C + seq_len * C + n_layer * per_layer + 2 * C


def flops_per_token(n_params, n_layer, seq_len, d_model, **_):
    return 6 * n_params + 12 * n_layer * seq_len * d_model


def read_jsonl(path):
    steps, run, summary = [], None, None
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            record = json.loads(line)
            kind = record.get("record")
            if kind == "run":
                run = record
            elif kind == "summary":
                summary = record
            elif "step" in record:
                steps.append(record)
    return run, steps, summary


def smi_peak_mib(path):
    try:
        with open(path) as f:
            samples = [float(line.split()[0]) for line in f if line.strip() and line.split()[0].replace(".", "").isdigit()]
    except OSError:
        return None
    return max(samples) - samples[0] if len(samples) > 1 else None


def strata_row(name, path, smi, skip, shape, peak_flops):
    row = dict(config=name, source="strata", jsonl=path)
    try:
        run, steps, summary = read_jsonl(path)
    except OSError:
        return dict(row, error=f"no telemetry: the run failed (its log: {path.removesuffix('.jsonl')}.log)")
    except ValueError as error:
        return dict(row, error=f"unreadable telemetry ({error})")
    if not steps:
        return dict(row, error=f"no step records (its log: {path.removesuffix('.jsonl')}.log)")
    if summary is None:
        row["config"] += " (cut short)"
    timed = steps[skip:] if len(steps) > skip else steps
    median_ms = statistics.median(s["ms"] for s in timed)
    tokens_per_step = (run or {}).get("tokens_per_step") or shape["seq_len"] * 16
    n_params = (run or {}).get("parameter_count") or gpt2_parameter_count(**shape)
    tokens_per_s = tokens_per_step / (median_ms / 1000)
    peak = (summary or {}).get("peak_device_bytes") or max(s.get("peak_device_bytes", 0) for s in steps)
    return dict(row, steps=len(steps), timed_steps=len(timed), median_ms=median_ms, tokens_per_s=tokens_per_s,
                peak_device_mib=peak / 2**20, smi_mib=smi_peak_mib(smi) if smi else None,
                mfu=flops_per_token(n_params, **shape) * tokens_per_s / peak_flops,
                final_loss=steps[-1].get("loss"), complete=summary is not None)


def torch_rows(path, smi):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as error:
        return [dict(config="torch", source="torch", error=f"no results ({error})")]
    rows = []
    for result in report.get("results", []):
        rows.append(dict(result, config="torch " + result["mode"], source="torch",
                         peak_device_mib=result["max_memory_allocated"] / 2**20,
                         reserved_mib=result["max_memory_reserved"] / 2**20,
                         smi_mib=smi_peak_mib(smi) if smi else None))
    for failure in report.get("failed", []):
        rows.append(dict(config="torch " + failure["mode"], source="torch", error="failed: " + failure["error"]))
    return rows


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def print_table(rows, peak_flops):
    w = max([len("config")] + [len(r["config"]) for r in rows])
    header = f"{'config':<{w}} {'ms/step':>9} {'tokens/s':>10} {'peak MiB':>9} {'rsvd MiB':>9} {'smi MiB':>8} {'MFU':>6}"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['config']:<{w}} {r['error']}")
            continue
        print(f"{r['config']:<{w}} {r['median_ms']:>9.1f} {r['tokens_per_s']:>10.0f} {r['peak_device_mib']:>9.0f} "
              f"{fmt(r.get('reserved_mib'), '9.0f'):>9} {fmt(r.get('smi_mib'), '8.0f'):>8} {100 * r['mfu']:>5.1f}%")
    print(f"peak MiB: Strata's peak live device bytes / torch.cuda.max_memory_allocated; rsvd: "
          f"max_memory_reserved; smi: nvidia-smi's peak memory.used over its level before the run")
    print(FLOPS_FORMULA + f", peak {peak_flops:.3g} FLOP/s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("strata", nargs="*", help="NAME=JSONL[,SMI_LOG]")
    parser.add_argument("--torch", action="append", default=[], help="JSON[,SMI_LOG]: bench/torch_gpt2_gpu.py's (repeatable)")
    parser.add_argument("--skip", type=int, default=2, help="Strata steps left out of the median (default 2)")
    parser.add_argument("--peak-flops", type=float, default=989e12, help="dense bf16 FLOP/s (H100 SXM: 989e12)")
    parser.add_argument("--shape", default="", help="n_layer,d_model,seq_len,vocab (default GPT-2 124M, T 1024)")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()
    shape = dict(GPT2_124M)
    if args.shape:
        n_layer, d_model, seq_len, vocab = (int(v) for v in args.shape.split(","))
        shape.update(n_layer=n_layer, d_model=d_model, seq_len=seq_len, vocab=vocab)
    rows = []
    for spec in args.strata:
        if "=" not in spec:
            parser.error(f"'{spec}' is not NAME=JSONL[,SMI_LOG]")
        name, paths = spec.split("=", 1)
        path, _, smi = paths.partition(",")
        rows.append(strata_row(name, path, smi or None, args.skip, shape, args.peak_flops))
    for spec in args.torch:
        path, _, smi = spec.partition(",")
        rows.extend(torch_rows(path, smi or None))
    print_table(rows, args.peak_flops)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(formula=FLOPS_FORMULA, peak_flops=args.peak_flops, rows=rows), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
