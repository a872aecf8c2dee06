#!/usr/bin/python3
"""The PyTorch side of scripts/bench/elastic_recovery.py: DDP training under torchrun,
restarted by torchrun's elastic agent after a worker dies (--max_restarts).

Each rank joins the gloo process group torchrun set up (its environment), trains the
mlp preset on Fashion-MNIST (pixels scaled to [0, 1]) with SGD momentum 0.9, lr 0.05,
a global batch of --batch split evenly over the ranks (each rank its contiguous slice of
a seeded per-epoch permutation), as elastic_recovery.py's dtrain job does.

Recovery is the way torchrun documents it: every worker is restarted and user code
reloads its state from disk. Rank 0 saves model, optimizer and step to --ckpt every
--ckpt-every steps (a temporary file, then rename); every rank starts from it when it
exists. Rank 0 appends one JSON line per step to --log: {"step", "time", "restart"},
restart being TORCHELASTIC_RESTART_COUNT (0 before any restart).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_models import build  # noqa: E402
from pytorch_peer import find, read_idx  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--ckpt-every", type=int, default=50)
    ap.add_argument("--log", required=True)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))

    images = torch.from_numpy(read_idx(find(a.data, "train-images-idx3-ubyte")).copy()).float().div_(255)
    labels = torch.from_numpy(read_idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
    images = images.reshape(-1, 1, 28, 28)
    torch.manual_seed(1)
    model = DDP(build("mlp"))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    step = 0
    if os.path.exists(a.ckpt):
        state = torch.load(a.ckpt)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
    per_rank = a.batch // world
    batches = len(images) // a.batch
    log = open(a.log, "a") if rank == 0 else None
    loss_fn = torch.nn.CrossEntropyLoss()
    while step < a.steps:
        epoch, at = divmod(step, batches)
        order = torch.from_numpy(np.random.RandomState(epoch).permutation(len(images)))
        first = at * a.batch + rank * per_rank
        idx = order[first:first + per_rank]
        opt.zero_grad()
        loss = loss_fn(model(images[idx]), labels[idx])
        loss.backward()
        opt.step()
        step += 1
        if log:
            log.write(json.dumps({"step": step, "time": time.time(), "restart": restart}) + "\n")
            log.flush()
        if rank == 0 and step % a.ckpt_every == 0:
            torch.save({"model": model.module.state_dict(), "optimizer": opt.state_dict(), "step": step},
                       a.ckpt + ".tmp")
            os.replace(a.ckpt + ".tmp", a.ckpt)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
