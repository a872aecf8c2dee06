#!/usr/bin/python3
"""dtrain's sharded strategy (ZeRO stages 1 and 2) against its mirrored strategy, in one run:
what each worker holds of the training state, and the speed.

--model gpt (the default): a byte-level GPT of 16 blocks, width 512, context 128 (50.6M
parameters) on dict-gcide's English text, global batch 8 sequences, gradients clipped to norm 1;
--model mlp: a wide mlp (13 hidden layers of 2048: 52.0M parameters) on Fashion-MNIST, global
batch 128. AdamW fp32, N workers x 1 thread on this host (shared memory), --steps steps:
  mirrored   every worker holds parameters, gradients and both moments whole (16 bytes a parameter);
  stage1     each worker keeps 1/N of the moments;
  stage2     and of the summed gradients (reduce-scattered during backward);
  stage3     and of the parameters (each layer group all-gathered before its forward and backward).
Runs are interleaved (--rounds of all) so drift in machine load hits all alike.

Figures:
  model state  per worker, parameters + gradients + optimizer state in bytes: mirrored's is its
               whole buffers (4n each for parameters and gradients, 8n for AdamW's moments, all
               written every step); a sharded worker's from its own counters in metrics.jsonl
               (params_mb, grads_peak_mb: the parameter and gradient buffers' most resident bytes
               in the step, optimizer_state_mb), the largest of its steps after the first (the
               first starts from whole parameters). As a fraction of mirrored's.
  peak RSS     per worker process (VmHWM), the largest; beside it, no bar: it holds the
               activations, the dataset and the program too.
  images/s     (tokens/s for the GPT) training samples of all workers / the training's wall time,
               from metrics.jsonl
               (the chief's first to last train line); median over the rounds; as a ratio to
               mirrored's.
Bars (issue 34): model state stage 1 <= (2 + 2/N)/4 + 5%, stage 2 <= (1 + 3/N)/4 + 5%, stage 3
<= 1/N + 10% plus one gathered group (the largest) of mirrored's; images/s >= 0.95x mirrored's for
stages 1 and 2, >= 0.8x for stage 3. The largest group is the model's largest layer, from
`dtrain check`.

With --limit-mb M (root, a memory cgroup): no timing; mirrored and stage 3 are started inside a
memory cgroup of M MB per worker (M x N for the host's workers; cgroup v1 memory.limit_in_bytes or
v2 memory.max). Bar (issue 34): mirrored stops at once with one line naming its bytes and the
limit; stage 3 trains the --steps to the end (the kernel kills a process over the limit).

Usage: scripts/bench/sharded_vs_mirrored.py [--model gpt|mlp] [--workers N] [--rounds N] [--steps N]
                                            [--limit-mb M] [--dtrain PATH] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/datasets/fashion-mnist"
HIDDEN = [2048] * 13
TEXT = "/usr/share/dictd/gcide.dict.dz"

MODELS = {
    "mlp": (f"""[model]
preset = "mlp"
hidden = {HIDDEN}
dropout = 0.0
[data]
dataset = "fashion_mnist"
[train]
batch_size = 128
""", 128),
    "gpt": ("""[model]
preset = "gpt"
layers = 16
heads = 8
dim = 512
context = 128
dropout = 0.0
[data]
dataset = "text"
files = "/usr/share/dictd/gcide.dict.dz"
context = 128
validation_fraction = 0.0005
[train]
batch_size = 8
grad_clip_norm = 1.0
""", 8 * 128),
}


def job_text(model, run_dir, steps, strategy):
    return f"""[job]
name = "sharded_bench"
run_dir = "{run_dir}"
threads = 1
{MODELS[model][0]}steps = {steps}
eval_every_epoch = false
checkpoint_every_epoch = false
checkpoint_every_steps = 0
[optimizer]
type = "adamw"
lr = 0.0003
beta1 = 0.9
beta2 = 0.95
weight_decay = 0.1
{strategy}"""


def model_sizes(dtrain, work, model):
    """(parameters, the largest layer's parameters) from `dtrain check`'s model table."""
    job = os.path.join(work, "check.toml")
    with open(job, "w") as f:
        f.write(job_text(model, os.path.join(work, "check"), 1, ""))
    out = subprocess.run([dtrain, "check", job], capture_output=True, text=True, check=True).stdout
    counts = []
    for line in out.splitlines():
        cols = line.split()
        nums = [c for c in cols if c.replace(",", "").isdigit() and "," in c or c == "0"]
        if line.startswith("total"):
            total = int(cols[1].replace(",", ""))
        elif nums and "[" in line:
            counts.append(int(nums[0].replace(",", "")))
    return total, max(counts)


def strategy(name, workers):
    if name == "mirrored":
        return f'[strategy]\ntype = "mirrored"\nworkers = {workers}\n'
    return f'[strategy]\ntype = "sharded"\nworkers = {workers}\nstage = {name[-1]}\n'


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def peak_rss_watch(pid, peaks, done):
    """Each worker process's VmHWM, polled until `done` (a worker's last reading stands)."""
    while not done.is_set():
        for child in descendants(pid):
            try:
                with open(f"/proc/{child}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peaks[child] = max(peaks.get(child, 0), int(line.split()[1]) * 1024)
            except OSError:
                pass
        time.sleep(0.2)


def train_rate(lines, per_step):
    span = lines[-1]["time"] - lines[0]["time"]
    steps = lines[-1]["step"] - lines[0]["step"]
    return per_step * steps / span  # samples (tokens) of the steps after the first line's


def run(dtrain, work, model, n, name, workers, steps, rnd):
    run_dir = os.path.join(work, f"{name}-{rnd}")
    job = os.path.join(work, f"{name}-{rnd}.toml")
    with open(job, "w") as f:
        f.write(job_text(model, run_dir, steps, strategy(name, workers)))
    peaks, done = {}, threading.Event()
    p = subprocess.Popen([dtrain, "train", job, "-q"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watcher = threading.Thread(target=peak_rss_watch, args=(p.pid, peaks, done))
    watcher.start()
    output = p.communicate()[0]
    done.set()
    watcher.join()
    if p.returncode != 0:
        raise RuntimeError(f"{name}: dtrain exited {p.returncode}: {output[-800:]}")
    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"split":"train"' in l]
    if name == "mirrored":
        state = 16 * n
    else:
        state = max((l["params_mb"] + l["grads_peak_mb"] + l["optimizer_state_mb"]) for l in lines[1:]) * (1 << 20)
    # The first steps allocate and fault in: the rate is taken over the last two thirds.
    rate = train_rate(lines[len(lines) // 3:], MODELS[model][1])
    return rate, state, max(peaks.values()) if peaks else 0


def make_cgroup(limit_bytes):
    """A memory cgroup of its own (v1 or v2) limited to limit_bytes: its directory."""
    name = f"dtrain-bench-{os.getpid()}"
    for root, limit_file in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes"), ("/sys/fs/cgroup", "memory.max")):
        if not os.path.exists(os.path.join(root, "cgroup.procs")):
            continue
        path = os.path.join(root, name)
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, limit_file), "w") as f:
                f.write(str(limit_bytes))
            return path
        except OSError:
            continue
    sys.exit("sharded_vs_mirrored: no memory cgroup could be made (needs root and a memory controller)")


def limit_bar(a):
    cgroup = make_cgroup(a.limit_mb * a.workers << 20)
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="sharded_limit_") as work:
            for name in ("mirrored", "stage3"):
                run_dir = os.path.join(work, name)
                job = os.path.join(work, name + ".toml")
                with open(job, "w") as f:
                    f.write(job_text(a.model, run_dir, a.steps, strategy(name, a.workers)))
                inside = f'echo $$ > {cgroup}/cgroup.procs && exec "$0" "$@"'
                p = subprocess.run(["sh", "-c", inside, a.dtrain, "train", job, "-q"], capture_output=True,
                                   text=True)
                out = (p.stdout + p.stderr).strip()
                results[name] = {"exit": p.returncode, "output": out[-600:]}
                print(f"  {name}: exit {p.returncode}: {out.splitlines()[-1] if out else ''}", flush=True)
    finally:
        os.rmdir(cgroup)
    mirrored_ok = results["mirrored"]["exit"] == 2 and len(results["mirrored"]["output"].splitlines()) == 1
    stage3_ok = results["stage3"]["exit"] == 0
    print(f"\n{a.model}, {a.workers} workers under {a.limit_mb} MB each: mirrored refused in one line: "
          f"{mirrored_ok}; stage 3 trained {a.steps} steps: {stage3_ok}: {'PASS' if mirrored_ok and stage3_ok else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"limit_mb": a.limit_mb, "workers": a.workers, "results": results}, f, indent=2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=list(MODELS), default="gpt")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--limit-mb", type=int, help="the memory-limit bar instead of timing (root)")
    a = ap.parse_args()
    if a.model == "mlp" and not os.path.isdir(DATA):
        sys.exit(f"sharded_vs_mirrored: no Fashion-MNIST in {DATA}: install dataset-fashion-mnist")
    if a.model == "gpt" and not os.path.exists(TEXT):
        sys.exit(f"sharded_vs_mirrored: no {TEXT}: install dict-gcide")
    if a.limit_mb:
        return limit_bar(a)
    configs = ["mirrored", "stage1", "stage2", "stage3"]
    rates = {c: [] for c in configs}
    state, rss = {}, {}
    unit = "tok/s" if a.model == "gpt" else "img/s"
    with tempfile.TemporaryDirectory(prefix="sharded_bench_") as work:
        n, largest = model_sizes(a.dtrain, work, a.model)
        for rnd in range(a.rounds):
            for name in (configs if rnd % 2 == 0 else list(reversed(configs))):
                rate, st, peak = run(a.dtrain, work, a.model, n, name, a.workers, a.steps, rnd)
                rates[name].append(rate)
                state[name] = st
                rss[name] = max(rss.get(name, 0), peak)
                print(f"  round {rnd + 1} {name}: {rate:,.0f} {unit}, model state {st / 2**20:,.0f} MB, "
                      f"peak RSS {peak / 2**20:,.0f} MB", flush=True)
    N = a.workers
    median = {c: statistics.median(r) for c, r in rates.items()}
    bars = {"stage1": (2 + 2 / N) / 4 + 0.05, "stage2": (1 + 3 / N) / 4 + 0.05,
            "stage3": 1 / N + 0.10 + largest / (4 * n)}  # one group's 4 bytes a parameter of mirrored's 16
    speed_bars = {"stage1": 0.95, "stage2": 0.95, "stage3": 0.8}
    out = {"model": a.model, "workers": N, "parameters": n, "steps": a.steps, "rounds": a.rounds, "images_per_s": median,
           "runs": rates, "model_state_bytes": state, "peak_rss_bytes": rss, "results": {}}
    print(f"\n{a.model} ({n / 1e6:.1f}M parameters), AdamW fp32, {N} workers x 1 thread, "
          f"medians of {a.rounds} interleaved rounds")
    print(f"  mirrored: {median['mirrored']:,.0f} {unit}, model state {state['mirrored'] / 2**20:,.0f} MB per "
          f"worker, peak RSS {rss['mirrored'] / 2**20:,.0f} MB")
    for name in ("stage1", "stage2", "stage3"):
        fraction = state[name] / state["mirrored"]
        speed = median[name] / median["mirrored"]
        ok = fraction <= bars[name] and speed >= speed_bars[name]
        out["results"][name] = {"state_fraction": fraction, "speed_ratio": speed,
                                "rss_fraction": rss[name] / rss["mirrored"], "pass": ok}
        print(f"  {name}: model state {state[name] / 2**20:,.0f} MB = {fraction:.3f} of mirrored's (bar <= "
              f"{bars[name]:.3f}); peak RSS {rss[name] / 2**20:,.0f} MB = {rss[name] / rss['mirrored']:.3f} "
              f"(no bar); {median[name]:,.0f} {unit} = {speed:.2f}x mirrored (bar >= {speed_bars[name]}): "
              f"{'PASS' if ok else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
