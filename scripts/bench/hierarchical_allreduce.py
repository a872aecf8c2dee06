#!/usr/bin/python3
"""The hierarchical all-reduce against flat Gloo, on 2 hosts x 2 workers.

Two hosts are network namespaces of this machine (scripts/netns-cluster.sh: own addresses, a
bridge between them), each running 2 ranks of configs/fashion_cnn_2hosts.toml's [cluster]. Each
configuration runs `dtrain bench allreduce --job ... --collective C` on both hosts:
  hierarchical       shared memory inside each host, Gloo between one leader per host (what
                     collective = "auto" now takes for this layout);
  ring               Gloo's ring over all 4 ranks (the flat ring);
  ring_chunked       Gloo's chunked ring over all 4 ranks (what "auto" took across hosts before
                     the hierarchy, from 4 MiB);
  halving_doubling   Gloo's halving-doubling over all 4 ranks (what it took below 4 MiB).
Rounds interleave the configurations, so drift in the machine's speed hits all alike; each
figure is the median over the rounds of each run's median call.

Bar (issue 20): the hierarchical all-reduce of 100 MB on 2 hosts x 2 workers is faster than the
flat Gloo ring.

Needs root and iproute2 (network namespaces); says so and exits 77 where they cannot be made.
Usage: sudo scripts/bench/hierarchical_allreduce.py [--mb 100] [--iters 10] [--rounds 3]
                                                   [--dtrain PATH] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import ROOT, two_hosts  # noqa: E402

JOB = os.path.join(ROOT, "configs", "fashion_cnn_2hosts.toml")
CONFIGS = ["hierarchical", "ring", "ring_chunked", "halving_doubling"]


def run_config(hosts_ns, dtrain, work, collective, a):
    """Both hosts' bench; host 0's JSON."""
    cmd = [dtrain, "bench", "allreduce", "--job", JOB, "--mb", str(a.mb), "--iters", str(a.iters),
           "--warmup", "2", "--json"]
    cmd += ["--collective", collective]
    hosts = []
    for node in (1, 0):
        log = open(os.path.join(work, f"{collective}_{node}.log"), "w+")
        p = subprocess.Popen(hosts_ns.exec_command(node, *cmd, "--node", str(node)), cwd=work, stdout=log,
                             stderr=subprocess.STDOUT)
        hosts.append((node, p, log))
    out = {}
    for node, p, log in hosts:
        try:
            p.wait(timeout=600)
        except subprocess.TimeoutExpired:
            p.kill()
            sys.exit(f"hierarchical_allreduce: {collective} on host {node} did not end in 600 s")
        log.seek(0)
        text = log.read()
        if p.returncode != 0:
            sys.exit(f"hierarchical_allreduce: {collective} on host {node} failed:\n{text[-3000:]}")
        if node == 0:
            line = [l for l in text.splitlines() if l.startswith("{")]
            if not line:
                sys.exit(f"hierarchical_allreduce: host 0 printed no result:\n{text[-3000:]}")
            out = json.loads(line[-1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    with two_hosts("dtrain-hbench", "hierarchical-bench") as (hosts_ns, work):
        ms = {name: [] for name in CONFIGS}
        algorithm = {}
        for r in range(a.rounds):
            for name in CONFIGS:
                res = run_config(hosts_ns, a.dtrain, work, name, a)
                ms[name].append(res["median_ms"])
                algorithm[name] = res["algorithm"]
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} ms" for k, v in ms.items()), flush=True)
    med = {k: statistics.median(v) for k, v in ms.items()}
    ratio = med["ring"] / med["hierarchical"]
    print(f"\nall-reduce of {a.mb:g} MB, 2 hosts x 2 workers, medians of {a.rounds} rounds "
          f"({a.iters} calls each after 2 warm-up):")
    for name in CONFIGS:
        print(f"  {name:17s} {med[name]:8.1f} ms  ({algorithm[name]})")
    print(f"  flat ring / hierarchical = {ratio:.2f}x (bar: > 1, the hierarchy faster) "
          f"{'PASS' if ratio > 1 else 'FAIL'}")
    for flat in ("ring_chunked", "halving_doubling"):
        print(f"  flat {flat} / hierarchical = {med[flat] / med['hierarchical']:.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"mb": a.mb, "median_ms": med, "rounds_ms": ms, "ring_over_hierarchical": ratio,
                       "algorithm": algorithm}, f, indent=1)


if __name__ == "__main__":
    main()
