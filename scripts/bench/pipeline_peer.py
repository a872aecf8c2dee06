#!/usr/bin/env python3
"""PyTorch's torch.distributed.pipelining on the CPU with Gloo: the peer of dtrain's pipeline.

ResNet-20 (scripts/bench/model_peers.py's cifar_resnet, its stem taking Fashion-MNIST's one
channel) cut into 2 stages at the block where dtrain's automatic split cuts it (stage 0: the
stem, the first stage's 3 blocks and the second's first 2; stage 1: the rest, the pooling and
the classifier), one process per stage with 1 thread each, micro-batches and schedule as
asked, SGD momentum 0.9 lr 0.01 on each stage's parameters, random images and labels of
Fashion-MNIST's shape (no data loading: the peer is timed on its compute and messages alone).

Prints one JSON line: {"images_per_s": ..., "steps": ..., "seconds": ...}, timed over the
steps after --warmup.

Usage: pipeline_peer.py --batch 128 --micro-batches 8 --schedule 1f1b --steps 20 --warmup 3
(run with a Python whose torch has torch.distributed.pipelining: 2.4 or newer)
"""
import argparse
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_peers import cifar_resnet  # noqa: E402

try:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except ImportError as e:  # torch older than 2.4
    sys.exit(f"pipeline_peer: this torch ({torch.__version__}) has no torch.distributed.pipelining: {e}")

BLOCKS_IN_STAGE_0 = 5  # of the 9 basic blocks


class Head(nn.Module):
    def __init__(self, pool, fc):
        super().__init__()
        self.pool, self.fc = pool, fc

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(x), 1))


def stage_module(rank):
    torch.manual_seed(0)
    model = cifar_resnet(20, 10)
    model.stem[0] = nn.Conv2d(1, 16, 3, 1, 1, bias=False)
    blocks = list(model.stages)
    if rank == 0:
        return nn.Sequential(model.stem, *blocks[:BLOCKS_IN_STAGE_0])
    return nn.Sequential(*blocks[BLOCKS_IN_STAGE_0:], Head(model.pool, model.fc))


def run(rank, args, port, out):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    micro = args.batch // args.micro_batches
    module = stage_module(rank)
    if rank == 0:
        example = torch.randn(micro, 1, 28, 28)
    else:
        with torch.no_grad():
            example = stage_module(0)(torch.randn(micro, 1, 28, 28))
    stage = PipelineStage(module, rank, 2, torch.device("cpu"), input_args=(example,))
    loss_fn = nn.CrossEntropyLoss()
    kind = Schedule1F1B if args.schedule == "1f1b" else ScheduleGPipe
    schedule = kind(stage, n_microbatches=args.micro_batches, loss_fn=loss_fn)
    opt = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(args.batch, 1, 28, 28)
    labels = torch.randint(0, 10, (args.batch,))
    t0 = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        opt.zero_grad()
        if rank == 0:
            schedule.step(images)
        else:
            schedule.step(target=labels)
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        out.put({"images_per_s": args.batch * args.steps / seconds, "steps": args.steps, "seconds": seconds,
                 "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--micro-batches", type=int, default=8)
    ap.add_argument("--schedule", choices=["1f1b", "gpipe"], default="1f1b")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, args, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    result = None
    try:
        result = out.get(timeout=1800)
    finally:
        for p in procs:
            p.join(timeout=60)
    if result is None or any(p.exitcode != 0 for p in procs):
        sys.exit(f"pipeline_peer: a stage failed (exit codes {[p.exitcode for p in procs]})")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
