#!/usr/bin/python3
"""PyTorch peer for dtrain's CPU benchmark: trains the same model on the same
data (Fashion-MNIST, pixels scaled to [0,1], SGD momentum 0.9, lr 0.05) and
prints one JSON line with the measured images/s.

Written the way a PyTorch user who cares about speed would: the dataset is a
uint8 tensor converted once to float, batches are sliced from a shuffled index,
no DataLoader worker overhead.
"""
import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np
import torch

from peer_models import build


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def find(data_dir, stem):
    for name in (stem, stem + ".gz"):
        p = os.path.join(data_dir, name)
        if os.path.exists(p):
            return p
    sys.exit(f"pytorch_peer: {stem}[.gz] not found in {data_dir}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["mlp", "cnn"], required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--bf16", action="store_true", help="forward and loss under CPU bf16 autocast")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    x = torch.from_numpy(read_idx(find(a.data, "train-images-idx3-ubyte")).copy())
    y = torch.from_numpy(read_idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
    x = x.unsqueeze(1).float().div_(255.0)
    net = build(a.model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    n = x.shape[0]
    perm = torch.randperm(n)
    per_epoch = (n + a.batch - 1) // a.batch

    def step(i):
        j = i % per_epoch
        idx = perm[j * a.batch:(j + 1) * a.batch]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(net(x[idx]), y[idx])
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    samples = 0
    for i in range(a.warmup, a.warmup + a.steps):
        step(i)
        samples += min(a.batch, n - (i % per_epoch) * a.batch)
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_s": samples / dt, "steps": a.steps, "seconds": dt}))


if __name__ == "__main__":
    main()
