#!/usr/bin/env python3
"""Where a training step's time goes, for the GPU benchmark's models: runs
`dtrain bench step JOB --steps N --json` (per layer forward and backward time, the chosen
convolution algorithms, the step's data copy, optimizer, communication and host-idle time)
on the jobs scripts/bench/gpu_vs_pytorch.py trains (device cuda, fp32, dtrain's defaults
otherwise) and keeps what it prints.

Writes RESULTS/bench-step-NAME.json (the subcommand's JSON object, as printed),
RESULTS/bench-step-NAME.log (its whole output) and RESULTS/bench-step.json (per model: the
command, exit status, seconds, and the error when it failed). A model whose run fails or
prints no JSON is recorded and the next one runs: the exit status is 0 unless the
arguments are wrong.

Usage: scripts/gpu/bench_step.py --dtrain PATH --results DIR [--data DIR|synthetic] [--work DIR]
                                 [--steps 50] [--budget S] [--only NAME ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "bench"))
import gpu_vs_pytorch as bench  # noqa: E402  (the jobs)

MODELS = ["mlp4096", "cnn1024", "resnet20", "mobilenet_v2"]
RUN_TIMEOUT_S = 90


def parse_json(text):
    """The JSON object in the subcommand's stdout: all of it, else the last line that is one,
    else from the first '{' to the last '}'."""
    text = text.strip()
    candidates = [text] + [l for l in reversed(text.splitlines()) if l.startswith("{")]
    if "{" in text and "}" in text:
        candidates.append(text[text.index("{"):text.rindex("}") + 1])
    for c in candidates:
        try:
            obj = json.loads(c)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


PREFERRED = ("step", "total", "forward", "backward", "copy", "data", "optim", "comm", "idle", "host")


def step_digest(obj, top=3):
    """`dtrain bench step --json`'s object in a line: the step, its phases (ms per step) and
    the layers taking the most time, with their algorithms."""
    ph = obj["phases"]
    parts = [f"step {obj['step_ms']:.3f} ms ({obj['images_per_s']:.0f} img/s)"]
    parts.append(" ".join(f"{k[:-3].replace('_', ' ')} {ph[k]:.3f}" for k in
                          ("data_wait_ms", "copy_ms", "forward_ms", "loss_ms", "backward_ms", "optimizer_ms",
                           "communication_ms", "host_idle_ms") if k in ph))
    layers = sorted(obj.get("layers", []), key=lambda l: -(l["forward_ms"] + l["backward_ms"]))[:top]
    if layers:
        parts.append("top: " + ", ".join(
            f"{l['name']} {l['forward_ms']:.3f}+{l['backward_ms']:.3f}" + (f" [{l['algorithm']}]" if l["algorithm"] else "")
            for l in layers))
    return "; ".join(parts)


def digest(obj, limit=8):
    """A line of the figures an unknown JSON object holds: its numbers (one level of nesting
    flattened), those whose names say step, forward, backward, copy, optimizer, communication
    or idle first, and the length of its lists."""
    nums, lists = [], []
    for k, v in obj.items():
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            nums.append((k, v))
        elif isinstance(v, dict):
            nums += [(f"{k}.{k2}", v2) for k2, v2 in v.items() if isinstance(v2, (int, float)) and
                     not isinstance(v2, bool)]
        elif isinstance(v, list):
            lists.append(f"{k}: {len(v)}")
    nums.sort(key=lambda kv: 0 if any(p in kv[0].lower() for p in PREFERRED) else 1)
    shown = [f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in nums[:limit]]
    return ", ".join(shown + lists) or "no figures"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", required=True)
    ap.add_argument("--results", required=True, help="folder for the JSON files and logs")
    ap.add_argument("--data", default="", help="Fashion-MNIST folder or 'synthetic' (the mlp and cnn jobs)")
    ap.add_argument("--work", default="", help="folder for the jobs (default RESULTS/bench-step-jobs)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--budget", type=float, default=0, help="seconds for all runs (default: no limit)")
    ap.add_argument("--only", nargs="+", choices=MODELS, default=MODELS)
    a = ap.parse_args()
    dtrain = os.path.abspath(a.dtrain)
    if not a.data:
        a.data = next((d for d in bench.DATA_DIRS if bench.has_fashion_mnist(d)), "synthetic")
    data = a.data if a.data == "synthetic" else os.path.abspath(a.data)
    work = os.path.abspath(a.work or os.path.join(a.results, "bench-step-jobs"))
    os.makedirs(work, exist_ok=True)
    os.makedirs(a.results, exist_ok=True)
    deadline = time.monotonic() + a.budget if a.budget > 0 else float("inf")
    runs = []
    for name in a.only:
        job, _ = bench.write_job(work, name, data, a.steps)
        cmd = [dtrain, "bench", "step", job, "--steps", str(a.steps), "--json"]
        run = {"name": name, "label": bench.describe(name), "command": " ".join(cmd), "exit": None,
               "seconds": 0.0, "json": None, "error": None}
        runs.append(run)
        timeout = min(RUN_TIMEOUT_S, deadline - time.monotonic())
        if timeout < 10:
            run["error"] = "not run: the time budget (--budget) is spent"
            print(f"bench step {name}: {run['error']}", flush=True)
            continue
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            run["exit"], out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            run["exit"] = "timeout"
            out = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = (e.stderr or b"").decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            run["error"] = f"still running after {timeout:.0f} s; ended"
        except OSError as e:
            out, err = "", str(e)
            run["error"] = str(e)
        run["seconds"] = round(time.monotonic() - t0, 1)
        with open(os.path.join(a.results, f"bench-step-{name}.log"), "w") as f:
            f.write(" ".join(cmd) + "\n--- stdout\n" + out + "\n--- stderr\n" + err)
        obj = parse_json(out) if run["exit"] == 0 else None
        if obj is not None:
            run["json"] = f"bench-step-{name}.json"
            with open(os.path.join(a.results, run["json"]), "w") as f:
                json.dump(obj, f, indent=1)
            try:
                run["digest"] = step_digest(obj)
            except (KeyError, TypeError, ValueError):
                run["digest"] = digest(obj)
            print(f"bench step {name} ({run['seconds']} s): {run['digest']}", flush=True)
        else:
            if not run["error"]:
                tail = " | ".join([l for l in (out + "\n" + err).splitlines() if l.strip()][-2:])
                run["error"] = (f"exit {run['exit']}: {tail}" if run["exit"] != 0 else
                                f"printed no JSON object: {tail[:200]}")
            print(f"bench step {name}: {run['error']}", flush=True)
    with open(os.path.join(a.results, "bench-step.json"), "w") as f:
        json.dump({"steps": a.steps, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
