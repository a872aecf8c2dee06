#!/usr/bin/python3
"""dtrain's pipeline against one process, and against PyTorch's torch.distributed.pipelining.

ResNet-20 (configs/fashion_resnet20.toml) on Fashion-MNIST, SGD momentum, on this host, for
each --batch (global batch):
  one        one_device, 1 thread;
  1f1b       pipeline, 2 stages x 1 thread, 8 micro-batches, schedule 1f1b, split automatically;
  gpipe      the same with schedule gpipe (for its activation memory);
  beside     two one_device runs at once, 1 thread each: what a core computes while the other
             is busy too (the ceiling for 2 stages is twice that, before any bubble);
  torch      torch.distributed.pipelining, 2 stages x 1 thread, Gloo, the same micro-batches
             and schedule (scripts/bench/pipeline_peer.py, in a virtual environment this script
             makes with torch from PyPI).
Runs are interleaved (--rounds of all of them) so drift in the machine's speed hits all alike.

Figures:
  images/s       dtrain: the training lines of metrics.jsonl after --warmup steps: samples /
                 seconds between the first and the last of them; torch: its own clock over the
                 same steps; median over the rounds.
  bubble         dtrain 1f1b: metrics.jsonl's pipeline_bubble (the share of the stages' time,
                 each the slowest stage's span, not spent in forward or backward), median over
                 the timed steps; against GPipe's (N-1)/(M+N-1) = 1/9.
  activations    the start-up line's "activations held per stage": each stage's activation and
                 activation-gradient buffers for the micro-batches it holds at once.
Bars (issue 19): 1f1b >= 1.6x one process; the measured bubble within 3 points of 1/9;
1f1b's activations <= 0.6x gpipe's on every stage; 1f1b >= 1.5x torch.

Usage: scripts/bench/pipeline_vs_one.py [--batch 128 512] [--rounds N] [--steps N] [--warmup N]
                                        [--no-torch] [--venv DIR] [--dtrain PATH] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(ROOT, "configs", "fashion_resnet20.toml")
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "dtrain-bench", "torch-venv")
STAGES, MICRO = 2, 8

DTRAIN_CONFIGS = {
    "one": [],
    "1f1b": ["strategy.type=pipeline", f"strategy.stages={STAGES}", f"strategy.micro_batches={MICRO}",
             "strategy.schedule=1f1b"],
    "gpipe": ["strategy.type=pipeline", f"strategy.stages={STAGES}", f"strategy.micro_batches={MICRO}",
              "strategy.schedule=gpipe"],
}


def torch_works(python):
    code = "import torch, torch.distributed.pipelining; print(torch.__version__)"
    p = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def ensure_venv(venv):
    """The venv's python, with torch 2.4 or newer (torch.distributed.pipelining); made on first use."""
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python) and torch_works(python):
        return python
    print(f"pipeline_vs_one: making {venv} (torch from PyPI)", flush=True)
    subprocess.run(["rm", "-rf", venv], check=True)
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    subprocess.run(["python3", "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "torch>=2.4", "numpy"],
                   check=True)
    if not torch_works(python):
        sys.exit(f"pipeline_vs_one: torch in {venv} has no torch.distributed.pipelining")
    return python


def dtrain_command(dtrain, run_dir, batch, steps, sets):
    cmd = [dtrain, "train", JOB, "--overwrite", "--set", f"job.run_dir={run_dir}", "--set", "job.threads=1",
           "--set", "job.device=cpu", "--set", f"train.batch_size={batch}", "--set", f"train.steps={steps}",
           "--set", "train.eval_every_steps=0", "--set", "train.eval_every_epoch=false",
           "--set", "train.checkpoint_every_steps=0"]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def finished(name, run_dir, p, out, err):
    if p.returncode != 0:
        sys.exit(f"pipeline_vs_one: {name} failed:\n{out[-2000:]}{err[-2000:]}")
    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return [l for l in lines if l.get("split") == "train"], out + err


def run_dtrain(dtrain, work, name, batch, steps, sets):
    run_dir = os.path.join(work, name)
    p = subprocess.run(dtrain_command(dtrain, run_dir, batch, steps, sets), capture_output=True, text=True)
    return finished(name, run_dir, p, p.stdout, p.stderr)


def run_side_by_side(dtrain, work, batch, steps):
    """Two one-process runs at once, each its own core: what each core computes while the other is
    busy too, as two pipeline stages are (shared cache and memory bandwidth, the cores' clocks)."""
    runs = []
    for k in range(2):
        run_dir = os.path.join(work, f"beside_{batch}_{k}")
        runs.append((run_dir, subprocess.Popen(dtrain_command(dtrain, run_dir, batch, steps, []),
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    return [finished("one beside another", run_dir, p, *p.communicate())[0] for run_dir, p in runs]


def rate(train_lines, warmup):
    timed = [l for l in train_lines if l["step"] > warmup]
    if len(timed) < 2:
        sys.exit("pipeline_vs_one: too few timed steps; raise --steps")
    samples = sum(l["samples"] for l in timed[1:])
    return samples / (timed[-1]["time"] - timed[0]["time"])


def held(output):
    m = re.search(r"activations held per stage ([0-9./ ]+) MB", output)
    return [float(x) for x in m.group(1).split("/")] if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=0, help="steps per run (default: 2560 samples' worth, at least 8)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps (default 3: the pipeline re-plans its split after step 3)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--venv", default=DEFAULT_VENV)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    python = None if a.no_torch else ensure_venv(a.venv)
    results = {}
    with tempfile.TemporaryDirectory(prefix="dtrain-pipeline-bench-") as work:
        for batch in a.batch:
            steps = a.steps or max(8, 2560 // batch) + a.warmup
            rates = {k: [] for k in list(DTRAIN_CONFIGS) + ["beside"] + (["torch"] if python else [])}
            bubbles, memory = [], {}
            for r in range(a.rounds):
                for name, sets in DTRAIN_CONFIGS.items():
                    lines, output = run_dtrain(a.dtrain, work, f"{name}_{batch}", batch, steps, sets)
                    rates[name].append(rate(lines, a.warmup))
                    if name != "one":
                        memory[name] = held(output)
                    if name == "1f1b":
                        bubbles += [l["pipeline_bubble"] for l in lines if l["step"] > a.warmup]
                beside = [rate(lines, a.warmup) for lines in run_side_by_side(a.dtrain, work, batch, steps)]
                rates["beside"].append(statistics.mean(beside))
                if python:
                    p = subprocess.run([python, os.path.join(HERE, "pipeline_peer.py"), "--batch", str(batch),
                                        "--micro-batches", str(MICRO), "--schedule", "1f1b",
                                        "--steps", str(steps - a.warmup), "--warmup", str(a.warmup)],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        sys.exit(f"pipeline_vs_one: the torch peer failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
                    rates["torch"].append(json.loads(p.stdout.strip().splitlines()[-1])["images_per_s"])
                print(f"batch {batch} round {r + 1}: " +
                      ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()), flush=True)
            med = {k: statistics.median(v) for k, v in rates.items()}
            bubble = statistics.median(bubbles)
            ideal = (STAGES - 1) / (MICRO + STAGES - 1)
            mem_ratio = [f / g for f, g in zip(memory["1f1b"], memory["gpipe"])] if memory.get("gpipe") else None
            res = {"steps": steps, "images_per_s": med, "rounds": rates, "bubble": bubble, "bubble_ideal": ideal,
                   "activations_mb": memory, "activation_ratio": mem_ratio,
                   "speedup": med["1f1b"] / med["one"]}
            if python:
                res["vs_torch"] = med["1f1b"] / med["torch"]
            results[str(batch)] = res
            print(f"\nbatch {batch} (micro-batches of {batch // MICRO}), medians of {a.rounds} rounds:")
            print(f"  one process {med['one']:,.0f} img/s; pipeline 1f1b {med['1f1b']:,.0f} = {res['speedup']:.2f}x "
                  f"(bar >= 1.6) {'PASS' if res['speedup'] >= 1.6 else 'FAIL'}; gpipe {med['gpipe']:,.0f}")
            print(f"  bubble measured {100 * bubble:.1f}% against (N-1)/(M+N-1) = {100 * ideal:.1f}% "
                  f"(bar: within 3 points) {'PASS' if abs(bubble - ideal) <= 0.03 else 'FAIL'}")
            beside = med["beside"] / med["one"]
            res["beside_one"] = beside
            print(f"  one process while another runs beside it: {med['beside']:,.0f} img/s each, {beside:.2f}x alone: "
                  f"2 stages on these 2 cores reach at most {2 * beside:.2f}x one process, before any bubble")
            if mem_ratio:
                print(f"  activations per stage 1f1b {memory['1f1b']} MB, gpipe {memory['gpipe']} MB: "
                      f"{', '.join(f'{x:.2f}' for x in mem_ratio)} (bar <= 0.6) "
                      f"{'PASS' if max(mem_ratio) <= 0.6 else 'FAIL'}")
            if python:
                print(f"  torch.distributed.pipelining 1f1b {med['torch']:,.0f} img/s: dtrain {res['vs_torch']:.2f}x "
                      f"(bar >= 1.5) {'PASS' if res['vs_torch'] >= 1.5 else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
