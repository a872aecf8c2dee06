#!/usr/bin/python3
"""dtrain's parameter-server strategy against its mirrored strategy, in one run.

The cnn preset on Fashion-MNIST, global batch 128, SGD momentum 0.9, lr 0.05, 2 epochs
(scripts/bench/bench_job.py's job), on this host:
  mirrored   2 workers x 1 thread, gradients all-reduced (shared memory);
  ps sync    2 workers x 1 thread + 1 shard, consistency = "sync";
  ps async   2 workers x 1 thread + 1 shard, consistency = "async";
  ps sync whole  as ps sync (whose CPU workers push their gradients in parts during
             backward), each gradient pushed whole after backward (gradient_push =
             "after_backward"; no bar: what the parts gain here).
Each configuration trains the 2 epochs and then evaluates on the test split. Runs are
interleaved (--rounds of all four) so drift in machine load hits all alike.

Figures:
  images/s   training samples of all workers / the training's wall time, from
             metrics.jsonl: the chief's first to last train line, scaled by the steps
             the first line stands for (each worker trains the same number of steps);
             median over the rounds.
  accuracy   the test accuracy after the 2 epochs (last round's), in points.
Bars (issue 18): sync images/s >= 0.85x mirrored's, async >= 0.95x; accuracy: sync
within 0.3 points of mirrored, async within 1 point.

Usage: scripts/bench/ps_vs_mirrored.py [--rounds N] [--epochs N] [--configs NAME ...] [--dtrain PATH]
                                       [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_job import write_bench_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/datasets/fashion-mnist"

CONFIGS = {
    "mirrored": '[strategy]\ntype = "mirrored"\nworkers = 2\n',
    "ps_sync": '[strategy]\ntype = "parameter_server"\nworkers = 2\nps = 1\nconsistency = "sync"\n',
    "ps_async": '[strategy]\ntype = "parameter_server"\nworkers = 2\nps = 1\nconsistency = "async"\n',
    # Sync with each gradient pushed whole after backward, against the default's parts during it.
    "ps_sync_whole": '[strategy]\ntype = "parameter_server"\nworkers = 2\nps = 1\nconsistency = "sync"\n'
                     'gradient_push = "after_backward"\n',
}
BARS = {"ps_sync": (0.85, 0.3), "ps_async": (0.95, 1.0)}  # images/s ratio, accuracy points


def train_rate(metrics_path, samples_per_epoch, epochs):
    """Samples of all workers per second of training, from the chief's train lines."""
    lines = [json.loads(l) for l in open(metrics_path) if '"split":"train"' in l]
    if len(lines) < 3:
        raise RuntimeError(f"{metrics_path}: only {len(lines)} train lines")
    span = lines[-1]["time"] - lines[0]["time"]
    steps = lines[-1]["step"] - lines[0]["step"]
    # The first line's time marks the end of its step: count that step's share too.
    seconds = span * (steps + 1) / steps
    return samples_per_epoch * epochs / seconds


def run(dtrain, work, name, epochs, rnd):
    run_dir = os.path.join(work, f"{name}-{rnd}")
    job = os.path.join(work, f"{name}-{rnd}.toml")
    # An epoch is ceil(60000 / 128) = 469 global batches.
    write_bench_job(job, "bench", run_dir, "cnn", 469 * epochs, job_extra="threads = 1\n", strategy=CONFIGS[name])
    p = subprocess.run([dtrain, "train", job, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: dtrain exited {p.returncode}: {p.stdout[-500:]} {p.stderr[-500:]}")
    accuracy = None
    for line in p.stdout.splitlines():
        if "test accuracy" in line:
            accuracy = float(line.split("test accuracy")[1].split()[0].strip(","))
    return train_rate(os.path.join(run_dir, "metrics.jsonl"), 60000, epochs), accuracy


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS),
                    help="run only these (the bars need mirrored, the parts' gain ps_sync and ps_sync_whole)")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(DATA, "train-images-idx3-ubyte.gz")) and not os.path.exists(
            os.path.join(DATA, "train-images-idx3-ubyte")):
        sys.exit(f"ps_vs_mirrored: no Fashion-MNIST in {DATA}: install dataset-fashion-mnist")
    configs = [name for name in CONFIGS if name in a.configs]
    rates = {name: [] for name in configs}
    accuracy = {}
    with tempfile.TemporaryDirectory(prefix="ps_bench_") as work:
        for rnd in range(a.rounds):
            order = configs if rnd % 2 == 0 else list(reversed(configs))
            for name in order:
                rate, acc = run(a.dtrain, work, name, a.epochs, rnd)
                rates[name].append(rate)
                accuracy[name] = acc
                print(f"  round {rnd + 1} {name}: {rate:,.0f} img/s, test accuracy {acc:.4f}", flush=True)
    median = {name: statistics.median(r) for name, r in rates.items()}
    out = {"epochs": a.epochs, "rounds": a.rounds, "images_per_s": median, "runs": rates, "accuracy": accuracy,
           "results": {}}
    print(f"\ncnn, Fashion-MNIST, 2 workers x 1 thread (+1 shard), {a.epochs} epochs, "
          f"medians of {a.rounds} interleaved rounds")
    if "mirrored" in median:
        print(f"  mirrored: {median['mirrored']:,.0f} img/s, accuracy {accuracy['mirrored']:.4f}")
    if "ps_sync_whole" in median and "ps_sync" in median:
        whole = median["ps_sync_whole"]
        parts_gain = median["ps_sync"] / whole
        out["results"]["ps_sync_whole"] = {"parts_to_whole": parts_gain}
        print(f"  ps_sync_whole: {whole:,.0f} img/s; ps_sync's parts during backward = {parts_gain:.2f}x "
              f"whole pushes (no bar)")
    for name, (rate_bar, points_bar) in BARS.items():
        if name not in median or "mirrored" not in median:
            continue
        ratio = median[name] / median["mirrored"]
        points = abs(accuracy[name] - accuracy["mirrored"]) * 100
        ok = ratio >= rate_bar and points <= points_bar
        out["results"][name] = {"ratio": ratio, "accuracy_points": points, "pass": ok}
        print(f"  {name}: {median[name]:,.0f} img/s = {ratio:.2f}x mirrored (bar >= {rate_bar}), accuracy "
              f"{accuracy[name]:.4f}, {points:.2f} points from mirrored (bar <= {points_bar}): "
              f"{'PASS' if ok else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
