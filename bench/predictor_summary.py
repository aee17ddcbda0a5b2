#!/usr/bin/env python3
"""Summarises bench/predictor_bench.sh: per arm and seed, the final validation loss, backward
passes, training time (the steps' own time: evaluations excluded, the predictor's calls included),
and, against the AdamW reference of the same seed:
  - to target: the first evaluation whose validation loss is at or below the reference's final one,
    with the backward passes and training time spent until then (the issue's target: >= 25% fewer
    backward passes and <= 0.9x the time);
  - equal steps: the relative gap of the final validation losses;
  - equal time: the relative gap between the run's final validation loss and the reference's,
    interpolated between its evaluations at the run's total training time;
  - the run's own loss: the backward passes and time the reference needed to first reach the run's
    final validation loss, against the run's (below 1x: the reference got there cheaper);
  - predict/full: a predict step's median time over a full step's, within the run;
  - own-speed time: the run's training time over (steps x its own median full-step time), a
    time ratio free of the machine's drift between runs (absolute times move by 15-50% within
    minutes on these machines).
Usage: python3 bench/predictor_summary.py runs/bench-predictor"""
import json
import sys
from pathlib import Path


def read(path):
    steps, summary = [], {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        kind = record.get("record", "step")
        if kind == "summary":
            summary = record
        elif kind == "step":
            steps.append(record)
    full_ms = sorted(s["ms"] for s in steps if s.get("backward", True))
    predict_ms = sorted(s["ms"] for s in steps if not s.get("backward", True))
    elapsed, backward, evals = 0.0, 0, []
    for s in steps:
        elapsed += s["ms"] / 1000.0
        backward += 1 if s.get("backward", True) else 0
        if "val_loss" in s:
            evals.append((s["step"], backward, elapsed, s["val_loss"]))
    own_speed = elapsed / (len(steps) * full_ms[len(full_ms) // 2] / 1000.0) if full_ms else 0.0
    # A predict step's cost: its median time over the median full step's, within the run.
    predict_cost = predict_ms[len(predict_ms) // 2] / full_ms[len(full_ms) // 2] if predict_ms and full_ms else 0.0
    return {"evals": evals, "seconds": elapsed, "backward": backward, "steps": len(steps), "summary": summary,
            "own_speed": own_speed, "predict_cost": predict_cost}


def reach(run, target):
    for step, backward, seconds, val in run["evals"]:
        if val <= target:
            return step, backward, seconds
    return None


def val_at_time(run, seconds):
    points = [(0.0, None)] + [(t, v) for _, _, t, v in run["evals"]]
    for (t0, v0), (t1, v1) in zip(points, points[1:]):
        if t0 <= seconds <= t1:
            if v0 is None:
                return v1
            return v0 + (v1 - v0) * (seconds - t0) / (t1 - t0)
    return points[-1][1]


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/bench-predictor")
    runs = {}
    for path in sorted(root.glob("*.jsonl")):
        arm, seed = path.stem.rsplit("-", 1)
        run = read(path)
        if run["summary"]:
            runs[(arm, seed)] = run
    seeds = sorted({seed for _, seed in runs})
    arms = [a for a in ("adamw", "rssm", "last") if any((a, s) in runs for s in seeds)]
    header = (f"{'arm':6} {'seed':4} {'val loss':>8} {'backward':>8} {'train s':>8} {'rolled':>6} "
              f"{'pred s':>6} {'pred/full':>9} {'own-speed':>9} {'to target: step / backward / s':>32} {'gap@steps':>9} {'gap@time':>8} "
              f"{'reference to this loss: backward / s':>38}")
    print(header)
    totals = {}
    for arm in arms:
        for seed in seeds:
            run, reference = runs.get((arm, seed)), runs.get(("adamw", seed))
            if run is None or reference is None:
                continue
            final = run["evals"][-1][3]
            target = reference["evals"][-1][3]
            reached = reach(run, target)
            ref_reached = reach(reference, target)
            if reached:
                ratio_b = reached[1] / ref_reached[1]
                ratio_t = reached[2] / ref_reached[2]
                to_target = f"{reached[0]} / {reached[1]} ({ratio_b:.2f}x) / {reached[2]:.0f} ({ratio_t:.2f}x)"
            else:
                to_target = "not reached"
            gap_steps = (final - target) / target
            gap_time = (final - val_at_time(reference, run["seconds"])) / val_at_time(reference, run["seconds"])
            s = run["summary"]
            mine = reach(reference, final)
            if mine:
                theirs = f"{mine[1]} ({mine[1] / run['backward']:.2f}x) / {mine[2]:.0f} ({mine[2] / run['seconds']:.2f}x)"
            else:
                theirs = "not reached"
            print(f"{arm:6} {seed:4} {final:8.4f} {run['backward']:8d} {run['seconds']:8.1f} "
                  f"{s.get('rollbacks', 0):6d} {s.get('predictor_ms', 0) / 1000:6.1f} {run['predict_cost']:8.2f}x {run['own_speed']:8.2f}x "
                  f"{to_target:>32} {100 * gap_steps:+8.2f}% {100 * gap_time:+7.2f}% {theirs:>38}")
            t = totals.setdefault(arm, {"n": 0, "val": 0.0, "steps": 0.0, "time": 0.0, "reached": 0,
                                         "backward": 0.0, "seconds": 0.0})
            t["n"] += 1
            t["val"] += final
            t["steps"] += gap_steps
            t["time"] += gap_time
            t["backward"] += run["backward"]
            t["seconds"] += run["seconds"]
            t["reached"] += 1 if reached else 0
    print()
    for arm, t in totals.items():
        n = t["n"]
        print(f"{arm:6} mean over {n} seeds: val {t['val'] / n:.4f}, backward passes {t['backward'] / n:.0f}, "
              f"train {t['seconds'] / n:.1f} s, gap at equal steps {100 * t['steps'] / n:+.2f}%, "
              f"at equal time {100 * t['time'] / n:+.2f}%, reached the reference's loss in {t['reached']} of {n}")


if __name__ == "__main__":
    main()
