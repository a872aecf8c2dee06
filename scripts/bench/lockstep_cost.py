#!/usr/bin/env python3
"""What running in lockstep costs two ranks on this machine, without any communication.

Two one-rank dtrain runs of the cnn at batch 64 are started at the same moment, one per
core, and never talk to each other. Each writes its step times (metrics.jsonl). A
synchronous 2-rank run takes, at every step, as long as the slower of its two ranks; pairing
the two runs' steps one by one and taking the slower of each pair estimates what the same
work costs in lockstep. The difference to the mean is the price of the machine's per-step
jitter alone, which no collective can avoid. For comparison each round also times the real
mirrored 2 x 1 run (global batch 128) and the one-rank baseline of the scaling bar (1 x 1,
batch 128).

  scripts/bench/lockstep_cost.py [--rounds 3] [--steps 300] [--dtrain build/dtrain]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_job import write_bench_job  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARMUP = 30


def job(workdir, name, batch, steps, strategy):
    run_dir = os.path.join(workdir, name)
    path = write_bench_job(os.path.join(workdir, name + ".toml"), name, run_dir, "cnn", steps,
                           job_extra="threads = 1\n", strategy=strategy, batch_size=batch)
    return path, run_dir


def step_ms(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.endswith("}\n")]
    train = [r for r in rows if r["split"] == "train"][WARMUP:]
    return [r["samples"] / r["images_per_s"] * 1e3 for r in train], sum(r["samples"] for r in train)


def start(dtrain, path):
    return subprocess.Popen([dtrain, "train", path, "--quiet", "--overwrite"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def finish(p, what):
    _, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"lockstep_cost: {what} failed (exit {p.returncode}): {err.strip()[-400:]}")


def images_per_s(dtrain, path, run_dir):
    finish(start(dtrain, path), path)
    ms, samples = step_ms(run_dir)
    return samples / (sum(ms) / 1e3)


def describe(ms):
    s = sorted(ms)
    return f"median {s[len(s) // 2]:.1f} ms, p90 {s[9 * len(s) // 10]:.1f}, sd {statistics.pstdev(ms):.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    a = ap.parse_args()
    if not os.access(a.dtrain, os.X_OK):
        sys.exit(f"lockstep_cost: no dtrain binary at {a.dtrain}; build it first (scripts/build.sh)")
    one = '[strategy]\ntype = "one_device"\n'
    with tempfile.TemporaryDirectory() as workdir:
        pair = [job(workdir, f"alone{i}", 64, a.steps, one) for i in range(2)]
        mirrored = job(workdir, "mirrored", 64 * 2, a.steps, '[strategy]\ntype = "mirrored"\nworkers = 2\n')
        single = job(workdir, "single", 128, a.steps, one)
        for rnd in range(1, a.rounds + 1):
            procs = [start(a.dtrain, path) for path, _ in pair]
            for p, (path, _) in zip(procs, pair):
                finish(p, path)
            (ms_a, _), (ms_b, _) = (step_ms(run_dir) for _, run_dir in pair)
            n = min(len(ms_a), len(ms_b))
            mean = (statistics.mean(ms_a[:n]) + statistics.mean(ms_b[:n])) / 2
            lockstep = statistics.mean(max(x, y) for x, y in zip(ms_a[:n], ms_b[:n]))
            free = 64 / (statistics.mean(ms_a[:n]) / 1e3) + 64 / (statistics.mean(ms_b[:n]) / 1e3)
            two = images_per_s(a.dtrain, *mirrored)
            base = images_per_s(a.dtrain, *single)
            print(f"round {rnd}: two lone 64-image runs at once: {describe(ms_a)} | {describe(ms_b)}")
            print(f"  unsynchronised {free:,.0f} img/s ({free / base:.2f}x 1x1); in lockstep "
                  f"{128 / (lockstep / 1e3):,.0f} img/s ({128 / (lockstep / 1e3) / base:.2f}x), "
                  f"+{100 * (lockstep / mean - 1):.1f}% per step")
            print(f"  mirrored 2x1 {two:,.0f} img/s ({two / base:.2f}x); 1x1 batch 128 {base:,.0f} img/s",
                  flush=True)


if __name__ == "__main__":
    main()
