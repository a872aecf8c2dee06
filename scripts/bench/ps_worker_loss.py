#!/usr/bin/python3
"""How fast a parameter-server run recovers from a worker killed with kill -9.

The cnn preset on Fashion-MNIST, global batch 128, SGD momentum 0.9, lr 0.05
(scripts/bench/bench_job.py's job), [strategy] type = "parameter_server", 3 workers x 1
thread + 1 shard, consistency = "async" (the bar's), or "sync" with --consistency sync
(where the update under way waits for a survivor to compute the lost slice). Each trial starts the run, kills worker 1 (rank 1,
not the chief) with SIGKILL --kill-after seconds after its first step, and lets the
survivors finish.

The shard logs every push it applies with the time (DTRAIN_TEST_PS_APPLIED_LOG), so the
rate of training is measured where updates happen:
  rate        samples applied (all workers) in one second, measured from every --window
              step (1 s sliding windows: shorter ones hold too few updates to be steady);
  before      the median rate over the seconds before the kill;
  survivors   the median rate from 4 s after the kill to 2 s before the end;
  recovery    from the kill to the start of the first second whose rate is >= 90% of the
              survivors' (bar: <= 2 s);
  once        whether every worker's slice of every global batch was applied exactly once
              (the killed worker's remaining slices by the survivors).
Figures are the median and the worst over --trials.

Usage: scripts/bench/ps_worker_loss.py [--consistency async|sync] [--trials N] [--steps N] [--kill-after S] [--dtrain PATH] [--json FILE]
"""
import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_job import write_bench_job
from distributed_vs_pytorch import children_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/datasets/fashion-mnist"
WORKERS = 3
BATCH = 128
STRATEGY = '[strategy]\ntype = "parameter_server"\nworkers = 3\nps = 1\nconsistency = "{}"\n'


def first_step_seen(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    return os.path.exists(path) and '"split":"train"' in open(path).read()


def slice_size(slice_index):
    # WorkerPool::split: rows [n*r/world, n*(r+1)/world) of each batch of n.
    return BATCH * (slice_index + 1) // WORKERS - BATCH * slice_index // WORKERS


def trial(dtrain, work, n, steps, kill_after, window, consistency):
    run_dir = os.path.join(work, f"run{n}")
    job = write_bench_job(os.path.join(work, f"job{n}.toml"), "loss", run_dir, "cnn", steps,
                          job_extra="threads = 1\n", strategy=STRATEGY.format(consistency))
    applied = os.path.join(work, f"applied{n}")
    env = dict(os.environ, DTRAIN_TEST_PS_APPLIED_LOG=applied)
    log = open(os.path.join(work, f"log{n}"), "w")
    host = subprocess.Popen([dtrain, "train", job, "-q"], stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while not first_step_seen(run_dir):
        if host.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"trial {n}: the run did not start: {open(log.name).read()[-800:]}")
        time.sleep(0.05)
    time.sleep(kill_after)
    procs = children_of(host.pid)
    if len(procs) != WORKERS + 1:
        raise RuntimeError(f"trial {n}: expected {WORKERS + 1} processes, found {procs}")
    killed_at = time.monotonic()
    os.kill(procs[1], signal.SIGKILL)
    code = host.wait(timeout=1800)
    log.close()
    if code != 0:
        raise RuntimeError(f"trial {n}: dtrain exited {code}: {open(log.name).read()[-800:]}")

    pushes = []
    counts = collections.Counter()
    for line in open(applied + ".shard0"):
        worker, batch, slc, t = line.split()
        pushes.append((float(t), slice_size(int(slc))))
        counts[(int(batch), int(slc))] += 1
    once = (len(counts) == WORKERS * steps and all(v == 1 for v in counts.values()))
    end = max(t for t, _ in pushes)
    quarters = collections.Counter()
    for t, samples in pushes:
        quarters[int((t - killed_at) // window)] += samples
    per_s = int(round(1 / window))
    # The rate over the second that starts at quarter k.
    rate = lambda k: sum(quarters.get(j, 0) for j in range(k, k + per_s))
    before = statistics.median(rate(k) for k in range(-7 * per_s, -per_s))
    last = int((end - killed_at) // window) - 2 * per_s
    survivors = statistics.median(rate(k) for k in range(4 * per_s, last))
    recovery = None
    for k in range(0, last):
        if rate(k) >= 0.9 * survivors:
            recovery = k * window  # from here on, a second's rate is back at the survivors'
            break
    return {"before": before, "survivors": survivors, "recovery_s": recovery, "once": once,
            "pushes": len(pushes)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--consistency", choices=["async", "sync"], default="async")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--steps", type=int, default=1600,
                    help="global batches per trial (each worker steps them all; the run must outlast the kill by 6 s)")
    ap.add_argument("--kill-after", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=0.25)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", help="also write the figures to this file")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")) and not os.path.exists(
            os.path.join(DATA, "train-images-idx3-ubyte")):
        sys.exit(f"ps_worker_loss: no Fashion-MNIST in {DATA}: install dataset-fashion-mnist")
    results = []
    with tempfile.TemporaryDirectory(prefix="ps_loss_bench_") as work:
        for n in range(a.trials):
            r = trial(a.dtrain, work, n, a.steps, a.kill_after, a.window, a.consistency)
            results.append(r)
            rec = "never" if r["recovery_s"] is None else f"{r['recovery_s']:.2f} s"
            print(f"  trial {n + 1}: {r['before']:,.0f} img/s before the kill, {r['survivors']:,.0f} after; "
                  f"back to the survivors' rate {rec} after the kill; every slice once: {r['once']}",
                  flush=True)
    recoveries = [r["recovery_s"] for r in results]
    ok = all(x is not None for x in recoveries) and all(r["once"] for r in results)
    worst = max(recoveries) if ok else None
    median = statistics.median(recoveries) if ok else None
    passed = ok and worst <= 2.0
    print(f"\ncnn, Fashion-MNIST, {a.consistency} parameter server, {WORKERS} workers x 1 thread + 1 shard, worker 1 "
          f"killed (kill -9) {a.kill_after:g} s in, {a.trials} trials")
    if ok:
        print(f"  recovery: median {median:.2f} s, worst {worst:.2f} s (bar <= 2 s): {'PASS' if passed else 'FAIL'}")
    else:
        print("  FAIL: a trial never recovered, or a slice was not applied exactly once")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"consistency": a.consistency, "trials": results, "median_recovery_s": median, "worst_recovery_s": worst,
                       "pass": passed}, f, indent=2)


if __name__ == "__main__":
    main()
