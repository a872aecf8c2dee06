#!/usr/bin/env python3
"""dtrain on CUDA against PyTorch eager on the same GPU, in one run.

Configurations (model preset, batch, bar on dtrain images/s / PyTorch images/s):
  mlp 128 >= 2.0, cnn 128 >= 2.0, cnn 1024 >= 1.2, mlp 4096 >= 1.2.
Both train the same model (scripts/bench/peer_models.py mirrors models/model_builder.cpp)
on the same data (Fashion-MNIST when found, else synthetic 1x28x28 with 10 classes), SGD
momentum 0.9, lr 0.05, softmax cross-entropy, fp32 with TF32 off.

  dtrain   `dtrain train` of a generated job (device cuda, precision fp32). images/s = the
           samples of the steps after the warm-up / the wall time between the end of the
           warm-up's last step and the end of the last step (metrics.jsonl "time"); the
           median of the per-step figures is kept in the JSON too. A first short run per
           configuration (not counted) finds how many steps fill --seconds.
  PyTorch  a process of this script (--peer): the model on cuda, cudnn.benchmark on,
           batches sliced from a pinned host copy of the data (its order drawn once:
           the peer is not charged for reshuffling) and copied with non_blocking=True
           each step; after the warm-up steps, a loop of --seconds between two
           torch.cuda.synchronize() calls; images/s = images / that time.
Runs alternate (dtrain first in even rounds, PyTorch first in odd ones); each figure is
the median over the rounds. Also measured: the GPU's fp32 matrix-product ceiling
(torch.matmul 8192x8192, TF32 off; median of 10 timed with CUDA events), and per
configuration the share of it a step reaches: 3 x forward FLOPs per image x images/s /
ceiling (forward FLOPs from `dtrain check`; backward counted as twice the forward).

Prints a table and writes the figures as JSON (--json).

Usage: scripts/bench/gpu_vs_pytorch.py [--dtrain PATH] [--data DIR|synthetic] [--seconds S]
                                       [--rounds N] [--only mlp128 ...] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_job import write_bench_job  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = [("mlp", 128, 2.0), ("cnn", 128, 2.0), ("cnn", 1024, 1.2), ("mlp", 4096, 1.2)]
DATA_DIRS = [os.path.join(ROOT, ".gpu-deps", "root", "usr", "share", "datasets", "fashion-mnist"),
             "/usr/share/datasets/fashion-mnist"]
TRAIN_SAMPLES = 60000  # Fashion-MNIST's training set; the synthetic set is made as large
CALIBRATION_STEPS = 100


def name_of(model, batch):
    return f"{model}{batch}"


def has_fashion_mnist(d):
    return any(os.path.exists(os.path.join(d, "train-images-idx3-ubyte" + ext)) for ext in ("", ".gz"))


# ---------------------------------------------------------------------------- PyTorch side

def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch


def peer_data(torch, data):
    """(images N x 1 x 28 x 28 float in [0,1], labels N int64), on the host."""
    if data == "synthetic":
        g = torch.Generator().manual_seed(0)
        return torch.rand(TRAIN_SAMPLES, 1, 28, 28, generator=g), torch.randint(0, 10, (TRAIN_SAMPLES,), generator=g)
    from pytorch_peer import read_idx

    def path(stem):
        return next(p for p in (os.path.join(data, stem), os.path.join(data, stem + ".gz")) if os.path.exists(p))

    x = torch.from_numpy(read_idx(path("train-images-idx3-ubyte")).copy()).unsqueeze(1).float().div_(255.0)
    y = torch.from_numpy(read_idx(path("train-labels-idx1-ubyte")).astype("int64"))
    return x, y


def peer_train(model, batch, seconds, warmup, data):
    torch = torch_setup()
    from peer_models import build
    dev = torch.device("cuda")
    torch.manual_seed(0)
    x, y = peer_data(torch, data)
    perm = torch.randperm(x.shape[0])
    x, y = x[perm].pin_memory(), y[perm].pin_memory()
    per_epoch = x.shape[0] // batch  # full batches only
    net = build(model).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step(i):
        j = (i % per_epoch) * batch
        xb = x[j:j + batch].to(dev, non_blocking=True)
        yb = y[j:j + batch].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss_fn(net(xb), yb).backward()
        opt.step()

    for i in range(warmup):
        step(i)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    i = warmup
    while time.perf_counter() - t0 < seconds:
        step(i)
        i += 1
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    steps = i - warmup
    return {"images_per_s": steps * batch / dt, "steps": steps, "seconds": dt}


def peer_ceiling(n=8192, reps=10):
    """fp32 matrix product n x n x n with TF32 off: TFLOP/s, median of reps."""
    torch = torch_setup()
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    c = torch.empty(n, n, device="cuda")
    for _ in range(3):
        torch.matmul(a, b, out=c)
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.matmul(a, b, out=c)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    tflops = [2 * n ** 3 / t / 1e12 for t in times]
    props = torch.cuda.get_device_properties(0)
    return {"tflops": statistics.median(tflops), "runs": tflops, "n": n, "gpu": props.name,
            "gpu_memory_gib": props.total_memory / 2 ** 30, "torch": torch.__version__, "cuda": torch.version.cuda}


def run_peer(a, what, model="", batch=0):
    cmd = [sys.executable, os.path.abspath(__file__), "--peer", what, "--data", a.data, "--seconds", str(a.seconds),
           "--warmup", str(a.warmup)]
    if model:
        cmd += ["--model", model, "--batch", str(batch)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.seconds + 120)
    except subprocess.TimeoutExpired:
        return None, f"PyTorch peer ({what} {model} {batch}) still running after {a.seconds + 120:.0f} s; ended"
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode != 0 or not lines:
        tail = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()][-3:]
        return None, f"PyTorch peer exit {p.returncode}: " + " | ".join(tail)
    return json.loads(lines[-1]), None


# ---------------------------------------------------------------------------- dtrain side

def dtrain_job(a, model, batch, steps):
    name = f"gpu_{name_of(model, batch)}"
    run_dir = os.path.join(a.work, f"run_{name}")
    path = write_bench_job(os.path.join(a.work, f"{name}.toml"), name, run_dir, model, steps,
                           job_extra='device = "cuda"\nprecision = "fp32"\n', batch_size=batch)
    return path, run_dir


def data_overrides(a):
    if a.data == "synthetic":
        return ["--set", "data.dataset=synthetic", "--set", f"data.train_samples={TRAIN_SAMPLES}",
                "--set", "data.test_samples=10000"]
    return ["--set", f"data.dir={a.data}"]


def dtrain_forward_flops(a, model, batch):
    """(forward FLOPs per sample, where the figure came from)."""
    job, _ = dtrain_job(a, model, batch, 1)
    p = subprocess.run([a.dtrain, "check", job] + data_overrides(a), capture_output=True, text=True, timeout=120)
    total = [l for l in p.stdout.splitlines() if l.startswith("total ")]
    if p.returncode == 0 and total:
        return int(total[-1].split()[-1].replace(",", "")), "dtrain check"
    from peer_models import forward_flops
    return forward_flops(model), "peer_models.forward_flops (dtrain check failed)"


def dtrain_run(a, model, batch, steps):
    """(images/s over the post-warm-up steps, median per-step images/s), or (None, error)."""
    job, run_dir = dtrain_job(a, model, batch, a.warmup + steps)
    limit = 3 * a.seconds + 120  # calibrated for --seconds; a hang must not stall the benchmark
    try:
        p = subprocess.run([a.dtrain, "train", job, "--quiet", "--overwrite"] + data_overrides(a),
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, (f"dtrain ({name_of(model, batch)}, {a.warmup + steps} steps) still running after "
                      f"{limit:.0f} s; ended")
    if p.returncode != 0:
        tail = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()][-3:]
        return None, f"dtrain exit {p.returncode}: " + " | ".join(tail)
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(l) for l in f if l.endswith("}\n")]
    train = [r for r in rows if r["split"] == "train"]
    t0 = next(r["time"] for r in train if r["step"] == a.warmup)
    after = [r for r in train if r["step"] > a.warmup]
    rate = sum(r["samples"] for r in after) / (after[-1]["time"] - t0)
    return (rate, statistics.median(r["images_per_s"] for r in after)), None


# ---------------------------------------------------------------------------- main

def measure(a):
    started = time.monotonic()
    ceiling, err = run_peer(a, "ceiling")
    if err:
        sys.exit(f"gpu_vs_pytorch: the matrix-product ceiling could not be measured: {err}")
    print(f"GPU {ceiling['gpu']}; PyTorch {ceiling['torch']} (CUDA {ceiling['cuda']}); "
          f"fp32 matmul ceiling {ceiling['tflops']:.1f} TFLOP/s", flush=True)
    configs = [c for c in CONFIGS if name_of(c[0], c[1]) in a.only]
    res = {}
    for model, batch, bar in configs:
        r = {"model": model, "batch": batch, "bar": bar, "dtrain_runs": [], "dtrain_step_medians": [],
             "torch_runs": [], "errors": []}
        r["forward_flops"], r["flops_source"] = dtrain_forward_flops(a, model, batch)
        # Calibration: how many steps make --seconds.
        got, err = dtrain_run(a, model, batch, CALIBRATION_STEPS)
        if err:
            r["errors"].append(err)
            r["steps"] = 0
        else:
            r["steps"] = max(CALIBRATION_STEPS, min(500000, int(got[0] * a.seconds / batch)))
        print(f"  {name_of(model, batch)}: forward {r['forward_flops']:,} FLOPs/sample ({r['flops_source']}); "
              f"{r['steps']} timed steps" + (f"; {err}" if err else ""), flush=True)
        res[name_of(model, batch)] = r
    round_s, rounds_done = 0.0, 0
    for rnd in range(a.rounds):
        # A round that would end past the budget is not started (the first always is).
        if rnd and time.monotonic() - started + round_s > a.budget:
            print(f"  time budget of {a.budget:.0f} s: {rnd} of {a.rounds} rounds measured", flush=True)
            break
        round_t0 = time.monotonic()
        for model, batch, _ in configs:
            r = res[name_of(model, batch)]
            sides = ["dtrain", "torch"] if rnd % 2 == 0 else ["torch", "dtrain"]
            for side in sides:
                if side == "dtrain" and r["steps"]:
                    got, err = dtrain_run(a, model, batch, r["steps"])
                    if got:
                        r["dtrain_runs"].append(got[0])
                        r["dtrain_step_medians"].append(got[1])
                elif side == "torch":
                    got, err = run_peer(a, "train", model, batch)
                    if got:
                        r["torch_runs"].append(got["images_per_s"])
                else:
                    continue
                if err and err not in r["errors"]:
                    r["errors"].append(err)
        print(f"  round {rnd + 1}: " + ", ".join(
            f"{k} dtrain {v['dtrain_runs'][-1] if v['dtrain_runs'] else 0:,.0f} / torch "
            f"{v['torch_runs'][-1] if v['torch_runs'] else 0:,.0f}" for k, v in res.items()) + " img/s", flush=True)
        round_s = time.monotonic() - round_t0
        rounds_done += 1
    for r in res.values():
        d = statistics.median(r["dtrain_runs"]) if r["dtrain_runs"] else None
        t = statistics.median(r["torch_runs"]) if r["torch_runs"] else None
        r["dtrain_images_per_s"], r["torch_images_per_s"] = d, t
        r["ratio"] = d / t if d and t else None
        r["pass"] = bool(r["ratio"] and r["ratio"] >= r["bar"])
        flops = 3 * r["forward_flops"]
        r["dtrain_ceiling_share"] = flops * d / (ceiling["tflops"] * 1e12) if d else None
        r["torch_ceiling_share"] = flops * t / (ceiling["tflops"] * 1e12) if t else None
    return {"ceiling": ceiling, "configs": res, "seconds": a.seconds, "warmup_steps": a.warmup,
            "rounds": rounds_done, "data": a.data,
            "wall_s": time.monotonic() - started,
            "method": "dtrain: post-warm-up samples / wall time from metrics.jsonl; PyTorch: images / "
                      "synchronized wall time; medians over interleaved rounds; TF32 off on both"}


def print_table(out):
    c = out["ceiling"]
    print(f"\n{c['gpu']}; PyTorch {c['torch']}; fp32, TF32 off; data {out['data']}; "
          f"fp32 matmul ceiling {c['tflops']:.1f} TFLOP/s ({c['n']}^3, median of {len(c['runs'])})")
    print(f"{'config':10} {'dtrain img/s':>13} {'PyTorch img/s':>14} {'ratio':>6}  {'bar':7} {'result':6} "
          f"{'dtrain %ceil':>12} {'torch %ceil':>11}")

    def num(v, fmt, unit=""):
        return format(v, fmt) + unit if v is not None else "-"

    for name, r in out["configs"].items():
        share_d = r["dtrain_ceiling_share"] * 100 if r["dtrain_ceiling_share"] is not None else None
        share_t = r["torch_ceiling_share"] * 100 if r["torch_ceiling_share"] is not None else None
        print(f"{name:10} {num(r['dtrain_images_per_s'], ',.0f'):>13} {num(r['torch_images_per_s'], ',.0f'):>14} "
              f"{num(r['ratio'], '.2f'):>6}  >= {r['bar']:<4} {'PASS' if r['pass'] else 'FAIL':6} "
              f"{num(share_d, '.1f', '%'):>12} {num(share_t, '.1f', '%'):>11}")
    for name, r in out["configs"].items():
        print(f"  {name}: dtrain {[round(v) for v in r['dtrain_runs']]}, PyTorch {[round(v) for v in r['torch_runs']]}"
              + "".join(f"\n    error: {e}" for e in r["errors"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build-gpu", "dtrain"), help="the dtrain binary")
    ap.add_argument("--data", default="", help="Fashion-MNIST folder, or 'synthetic' (default: the first found "
                                               "of .gpu-deps/root/usr/share/datasets/fashion-mnist and "
                                               "/usr/share/datasets/fashion-mnist, else synthetic)")
    ap.add_argument("--seconds", type=float, default=10, help="timed seconds per run (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=50, help="warm-up steps per run, not timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=480,
                    help="start no round that would end after this many seconds (the first always runs)")
    ap.add_argument("--only", nargs="+", default=[name_of(m, b) for m, b, _ in CONFIGS],
                    choices=[name_of(m, b) for m, b, _ in CONFIGS])
    ap.add_argument("--work", default="", help="folder for the jobs and runs (default: a temporary one)")
    ap.add_argument("--json", default="", help="write the figures here")
    ap.add_argument("--peer", choices=["train", "ceiling"], help=argparse.SUPPRESS)
    ap.add_argument("--model", choices=["mlp", "cnn"], help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.warmup < 1:
        sys.exit("gpu_vs_pytorch: --warmup must be at least 1 step")
    if not a.data:
        a.data = next((d for d in DATA_DIRS if has_fashion_mnist(d)), "synthetic")
    elif a.data != "synthetic" and not has_fashion_mnist(a.data):
        sys.exit(f"gpu_vs_pytorch: no Fashion-MNIST in {a.data}; give a folder holding "
                 f"train-images-idx3-ubyte[.gz], or --data synthetic")
    a.data = a.data if a.data == "synthetic" else os.path.abspath(a.data)

    if a.peer:
        out = peer_ceiling() if a.peer == "ceiling" else peer_train(a.model, a.batch, a.seconds, a.warmup, a.data)
        print(json.dumps(out))
        return
    if not os.path.exists(a.dtrain):
        sys.exit(f"gpu_vs_pytorch: {a.dtrain} not found; build it (scripts/gpu/check.sh build) or pass --dtrain")
    a.dtrain = os.path.abspath(a.dtrain)
    with tempfile.TemporaryDirectory() as tmp:
        a.work = os.path.abspath(a.work) if a.work else tmp
        os.makedirs(a.work, exist_ok=True)
        out = measure(a)
    print_table(out)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
        print(f"figures written to {a.json}")


if __name__ == "__main__":
    main()
