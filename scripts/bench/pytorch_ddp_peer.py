#!/usr/bin/python3
"""PyTorch DDP peer for dtrain's distributed benchmark (Debian's python3-torch).

Starts WORLD rank processes on this host (this same script with --rank), which
meet over the gloo backend on a free loopback port, and prints one JSON line
from rank 0:

  --mode train:     DistributedDataParallel training of the mlp or cnn preset
                    (the same networks, data and optimizer as pytorch_peer.py),
                    global batch split evenly over the ranks, each rank taking
                    its strided share of a seeded per-epoch permutation (what
                    DistributedSampler does). Prints global images/s.
  --mode allreduce: dist.all_reduce of a float32 tensor of --mb MB (10^6
                    bytes): after a warm-up, each call timed on rank 0 between
                    a barrier and its return, the result checked outside the
                    timed span. Prints median/min ms.

Each rank runs torch.set_num_threads(--threads). OpenBLAS (which Debian's torch
calls for matrix products) starts its own threads unless OPENBLAS_NUM_THREADS
is set; --blas-threads sets it for the ranks (0 leaves the environment alone).
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(a):
    """Starts the ranks; returns rank 0's JSON line (exits on any rank's failure)."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(a.world))
    if a.blas_threads > 0:
        env["OPENBLAS_NUM_THREADS"] = str(a.blas_threads)
    procs = []
    for rank in range(a.world):
        procs.append(subprocess.Popen(["/usr/bin/python3", os.path.abspath(__file__), *sys.argv[1:], "--rank", str(rank)],
                                      env=dict(env, RANK=str(rank)), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    for rank, (p, (out, err)) in enumerate(zip(procs, outs)):
        if p.returncode != 0:
            sys.exit(f"pytorch_ddp_peer: rank {rank} failed ({p.returncode}):\n{err[-2000:]}")
    return outs[0][0].strip().splitlines()[-1]


def train(a, rank, world):
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from pytorch_peer import build, find, read_idx

    torch.manual_seed(0)
    x = torch.from_numpy(read_idx(find(a.data, "train-images-idx3-ubyte")).copy())
    y = torch.from_numpy(read_idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
    x = x.unsqueeze(1).float().div_(255.0)
    net = DDP(build(a.model))  # broadcasts rank 0's weights
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    local = a.batch // world
    n = x.shape[0]
    per_epoch = n // a.batch  # whole global batches, so every rank takes the same number of steps
    shards = {}

    def shard(epoch):
        if epoch not in shards:
            g = torch.Generator()
            g.manual_seed(1000 + epoch)
            shards.clear()
            shards[epoch] = torch.randperm(n, generator=g)[rank::world]
        return shards[epoch]

    def step(i):
        j = i % per_epoch
        idx = shard(i // per_epoch)[j * local:(j + 1) * local]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()  # DDP all-reduces the gradient buckets during backward
        opt.step()

    for i in range(a.warmup):
        step(i)
    dist.barrier()
    t0 = time.perf_counter()
    for i in range(a.warmup, a.warmup + a.steps):
        step(i)
    dist.barrier()
    dt = time.perf_counter() - t0
    return {"images_per_s": a.steps * local * world / dt, "steps": a.steps, "seconds": dt, "world": world}


def allreduce(a, rank, world):
    import torch
    import torch.distributed as dist
    n = int(a.mb * 1e6 / 4)
    t = torch.empty(n, dtype=torch.float32)
    expected = float(sum(r + 1 for r in range(world)))
    times = []
    for i in range(a.warmup + a.iters):
        t.fill_(float(rank + 1))  # refilled: a call that did nothing would leave it wrong
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        took = time.perf_counter() - start
        if not bool(torch.all(t == expected)):
            raise SystemExit(f"pytorch_ddp_peer: rank {rank}: all_reduce gave a wrong sum in round {i}")
        if i >= a.warmup:
            times.append(took * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "times_ms": times, "elements": n, "world": world}


def run_rank(a):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(a.threads)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    result = train(a, rank, world) if a.mode == "train" else allreduce(a, rank, world)
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(result), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["train", "allreduce"], required=True)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads per rank")
    ap.add_argument("--blas-threads", type=int, default=1, help="OPENBLAS_NUM_THREADS per rank (0: unset)")
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--batch", type=int, default=128, help="global batch")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.batch % a.world:
        sys.exit(f"pytorch_ddp_peer: --batch {a.batch} must divide evenly over --world {a.world}")
    if a.rank >= 0:
        run_rank(a)
    else:
        print(launch(a), flush=True)


if __name__ == "__main__":
    main()
