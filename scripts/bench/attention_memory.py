#!/usr/bin/env python3
"""Attention memory against the sequence length (issue 33's bar).

Trains one step of a byte-level GPT at contexts 512, 1024, 2048 and 4096 and
reads each run's peak RSS. dtrain's attention keeps no T x T matrix (its
backward recomputes the probabilities from each row's log-sum-exp), so its
memory should grow linearly in T: the activations of batch x T tokens. A
T x T implementation (PyTorch's math attention, say) keeps at least the
softmax probabilities of every layer for backward, batch x heads x T^2 floats a
layer, besides the linear activations; the script prints what that would need
at 4096 against this machine's memory.

Bars: context 4096 trains where the T x T probabilities alone would exceed the
machine's memory; peak RSS grows linearly with T (the increase per token from
2048 to 4096 within 25% of that from 512 to 1024).

Usage: scripts/bench/attention_memory.py [--dtrain PATH] [--batch 4] [--layers 6]
       [--heads 16] [--dim 512] [--contexts 512,1024,2048,4096] [--json FILE]
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = "/usr/share/dictd/gcide.dict.dz"


def mem_total_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def run_one(a, text, context, work):
    job = os.path.join(work, f"t{context}.toml")
    with open(job, "w") as f:
        f.write(f"""[job]
name = "attention_memory"
run_dir = "{work}/run{context}"
threads = 0
[model]
preset = "gpt"
layers = {a.layers}
heads = {a.heads}
dim = {a.dim}
context = {context}
[data]
dataset = "text"
files = "{text}"
context = {context}
validation_fraction = 0.05
[train]
steps = 1
batch_size = {a.batch}
eval_every_epoch = false
checkpoint_every_epoch = false
[optimizer]
type = "adamw"
lr = 0.0006
""")
    out = subprocess.run(["/usr/bin/time", "-f", "RSS %M", a.dtrain, "train", job, "-q"],
                         capture_output=True, text=True)
    m = re.search(r"RSS (\d+)", out.stderr)
    if out.returncode != 0 or not m:
        sys.exit(f"attention_memory: context {context} failed:\n{out.stdout}{out.stderr}")
    return int(m.group(1)) * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtrain", default=os.path.join(REPO, "build", "dtrain"))
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--contexts", default="512,1024,2048,4096")
    ap.add_argument("--json")
    a = ap.parse_args()
    contexts = [int(c) for c in a.contexts.split(",")]
    with tempfile.TemporaryDirectory(prefix="attention_memory-") as work:
        # 3 MB of the dictionary: enough windows at every context, and a
        # corpus small next to the activations.
        text = os.path.join(work, "text.txt")
        with gzip.open(CORPUS) as f, open(text, "wb") as out:
            out.write(f.read(3_000_000))
        rss = {}
        for t in contexts:
            rss[t] = run_one(a, text, t, work)
            print(f"context {t:5d}: peak RSS {rss[t] / 2**30:6.2f} GiB", flush=True)
    memory = mem_total_bytes()
    top = max(contexts)
    probabilities = a.batch * a.heads * a.layers * top * top * 4
    print(f"machine memory {memory / 2**30:.1f} GiB; a T x T implementation's probabilities alone at {top}: "
          f"{a.batch} x {a.heads} heads x {a.layers} layers x {top}^2 floats = {probabilities / 2**30:.1f} GiB")
    per_token = []
    for lo, hi in zip(contexts, contexts[1:]):
        per_token.append((rss[hi] - rss[lo]) / (a.batch * (hi - lo)))
        print(f"  {lo} -> {hi}: {per_token[-1] / 1024:.1f} KiB more per token of the batch")
    linear = len(per_token) >= 2 and abs(per_token[-1] - per_token[0]) <= 0.25 * per_token[0]
    beyond = probabilities > memory
    print(f"bar: {top} trains where T x T would not fit: {'PASS' if beyond else 'FAIL'}; "
          f"RSS linear in T (last increase per token within 25% of the first): {'PASS' if linear else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rss": rss, "memory": memory, "tt_probabilities": probabilities,
                       "per_token": per_token, "linear": linear, "beyond": beyond}, f, indent=1)


if __name__ == "__main__":
    main()
