#!/usr/bin/python3
"""dtrain's CPU benchmark against PyTorch (Debian's python3-torch), in one run.

For the mlp (784-512-256-10) and the cnn presets at batch 128 on Fashion-MNIST
it measures training images/s of dtrain and of PyTorch at each of its thread
settings (the best one is the peer), the ratio, and the peak RSS of both
processes. It also times `dtrain check`, and with --accuracy trains the shipped
configs to the end and reports their test accuracy.

With --pypi the peer also includes the latest PyTorch from PyPI (in the virtual environment
pipeline_vs_one.py makes, ~/.cache/dtrain-bench/torch-venv, made here if missing), in fp32 and
under its CPU bf16 autocast: the best of every setting is the peer.

Usage: scripts/bench/cpu_vs_pytorch.py [--steps N] [--repeats R] [--accuracy] [--pypi]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench_job import write_bench_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
PEER = os.path.join(ROOT, "scripts", "bench", "pytorch_peer.py")


def run_with_rss(cmd, env=None):
    """Runs cmd and returns (stdout, peak RSS MB) using wait4's rusage."""
    # stderr joins stdout so one pipe is read to its end; then wait4 reaps the
    # child and returns its own rusage (Popen.wait would discard it).
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({proc.returncode}):\n{out[-2000:]}")
    return out, usage.ru_maxrss / 1024.0


def torch_version():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True).stdout.strip()


def dtrain_job(model, steps, workdir):
    return write_bench_job(os.path.join(workdir, f"bench_{model}.toml"), f"bench_{model}",
                           f"{workdir}/run_{model}", model, steps)


def dtrain_throughput(model, warmup, steps, workdir):
    job = dtrain_job(model, warmup + steps, workdir)
    _, rss = run_with_rss([DTRAIN, "train", job, "--quiet", "--overwrite"])
    lines = [json.loads(l) for l in open(os.path.join(workdir, f"run_{model}", "metrics.jsonl"))]
    train = [l for l in lines if l["split"] == "train"]
    t0 = next(l["time"] for l in train if l["step"] == warmup)
    t1 = train[-1]["time"]
    samples = sum(l["samples"] for l in train if l["step"] > warmup)
    return samples / (t1 - t0), rss


# PyTorch's thread settings tried; the best is the peer. Debian's torch calls
# OpenBLAS (its own threads) under its OpenMP threads, so "2 threads, BLAS 1"
# avoids oversubscribing the cores. name -> (threads, environment, python, bf16 autocast)
TORCH_SETTINGS = {
    "1t": (1, {}, "/usr/bin/python3", False),
    "2t": (2, {}, "/usr/bin/python3", False),
    "2t+blas1": (2, {"OPENBLAS_NUM_THREADS": "1"}, "/usr/bin/python3", False),
}


def add_pypi_settings():
    """The latest PyTorch from PyPI (oneDNN, AVX-512 and AMX kernels of its own) in fp32 and
    under bf16 autocast, at 1 and 2 threads."""
    import pipeline_vs_one
    python = pipeline_vs_one.ensure_venv(pipeline_vs_one.DEFAULT_VENV)
    for threads in (1, 2):
        TORCH_SETTINGS[f"pypi {threads}t"] = (threads, {}, python, False)
        TORCH_SETTINGS[f"pypi {threads}t bf16"] = (threads, {}, python, True)


def torch_throughput(model, setting, warmup, steps):
    threads, extra_env, python, bf16 = TORCH_SETTINGS[setting]
    env = dict(os.environ, **extra_env)
    out, rss = run_with_rss([python, PEER, "--model", model, "--threads", str(threads),
                             "--warmup", str(warmup), "--steps", str(steps)] + (["--bf16"] if bf16 else []),
                            env=env)
    return json.loads(out.strip().splitlines()[-1])["images_per_s"], rss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0, help="measured steps (default: 1000 mlp, 100 cnn)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--accuracy", action="store_true", help="also train the shipped configs to the end")
    ap.add_argument("--pypi", action="store_true", help="also the latest PyTorch from PyPI, fp32 and bf16 autocast")
    a = ap.parse_args()
    if a.pypi:
        add_pypi_settings()
    if not os.path.exists(DTRAIN):
        sys.exit("bench: build/dtrain not found; run scripts/build.sh first")

    results = {}
    with tempfile.TemporaryDirectory() as work:
        for model in ("mlp", "cnn"):
            steps = a.steps or (1000 if model == "mlp" else 100)
            warmup = 20 if model == "mlp" else 10
            d_runs, t_runs = [], {k: [] for k in TORCH_SETTINGS}
            d_rss, t_rss = [], {k: [] for k in TORCH_SETTINGS}
            # Interleave the programs so drift in machine load hits both alike.
            for _ in range(a.repeats):
                ips, rss = dtrain_throughput(model, warmup, steps, work)
                d_runs.append(ips)
                d_rss.append(rss)
                for setting in TORCH_SETTINGS:
                    ips, rss = torch_throughput(model, setting, warmup, steps)
                    t_runs[setting].append(ips)
                    t_rss[setting].append(rss)
            best_th = max(TORCH_SETTINGS, key=lambda k: statistics.median(t_runs[k]))
            results[model] = {
                "dtrain_images_per_s": statistics.median(d_runs),
                "torch_images_per_s": {th: statistics.median(v) for th, v in t_runs.items()},
                "torch_best_threads": best_th,
                "dtrain_peak_rss_mb": max(d_rss),
                "torch_peak_rss_mb": max(t_rss[best_th]),
            }

        check_times = []
        for _ in range(10):
            t = time.perf_counter()
            subprocess.run([DTRAIN, "check", os.path.join(ROOT, "configs", "fashion_cnn.toml")], check=True,
                           stdout=subprocess.DEVNULL)
            check_times.append(time.perf_counter() - t)

        print(f"machine: {os.cpu_count()} cores; batch 128; medians of {a.repeats} runs; PyTorch "
              f"{torch_version()} at settings {', '.join(TORCH_SETTINGS)}, the best is the peer")
        print(f"{'model':6} {'dtrain img/s':>13} {'torch img/s (' + ' / '.join(TORCH_SETTINGS) + ')':>34} "
              f"{'ratio':>7} {'dtrain RSS MB':>14} {'torch RSS MB':>13} {'RSS ratio':>10}")
        for model, r in results.items():
            t = r["torch_images_per_s"]
            best = t[r["torch_best_threads"]]
            torch_cols = " / ".join(f"{t[k]:.0f}" for k in TORCH_SETTINGS)
            print(f"{model:6} {r['dtrain_images_per_s']:13.0f} {torch_cols:>34} "
                  f"{r['dtrain_images_per_s'] / best:7.2f} {r['dtrain_peak_rss_mb']:14.0f} "
                  f"{r['torch_peak_rss_mb']:13.0f} {r['dtrain_peak_rss_mb'] / r['torch_peak_rss_mb']:10.2f}")
        print(f"dtrain check configs/fashion_cnn.toml: median {statistics.median(check_times) * 1000:.1f} ms "
              f"over 10 runs")

        if a.accuracy:
            for model in ("mlp", "cnn"):
                cfg = os.path.join(ROOT, "configs", f"fashion_{model}.toml")
                run_dir = os.path.join(work, f"acc_{model}")
                t = time.perf_counter()
                subprocess.run([DTRAIN, "train", cfg, "--quiet", "--set", f"job.run_dir={run_dir}"], check=True,
                               stdout=subprocess.DEVNULL)
                dt = time.perf_counter() - t
                out = subprocess.run([DTRAIN, "eval", run_dir, "--json"], check=True, capture_output=True,
                                     text=True).stdout
                acc = json.loads(out)["accuracy"]
                print(f"accuracy {model}: {acc:.4f} test accuracy after the shipped config ({dt:.0f} s)")


if __name__ == "__main__":
    main()
