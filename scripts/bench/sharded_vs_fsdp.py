#!/usr/bin/python3
"""dtrain's sharded stage 3 against PyTorch FSDP2 (fully_shard) on the same model, in one run.

The GPT of sharded_vs_mirrored.py (16 blocks, width 512, context 128, byte vocabulary: 50.6M
parameters, the output tied to the token embedding), AdamW (lr 3e-4, betas 0.9/0.95, weight decay
0.1) fp32, gradients clipped to norm 1, global batch 8 sequences, 2 processes x 1 thread on this
host:
  dtrain   [strategy] type = "sharded", stage = 3 (shared memory);
  FSDP2    torch.distributed.fsdp.fully_shard on each block and on the whole model, over Gloo
           (the CPU's process group), the latest torch from PyPI in the benchmarks' venv.
Before timing, FSDP2's gradients are checked against one process computing the whole global
batch (pytorch #162338: FSDP2 over Gloo summed instead of averaging): relative difference of the
gradients (after the reduce-scatter, gathered whole) <= 1e-4, else reported and the run is
marked. Speed: tokens of both processes per second over the steps after --warmup, median of
--rounds interleaved rounds (dtrain reads dict-gcide's text, FSDP2 seeded random tokens of the
same shapes: a step's work does not depend on the tokens). Bar (issue 34): dtrain >= 1.5x FSDP2's tokens/s.

Usage: scripts/bench/sharded_vs_fsdp.py [--steps N] [--warmup N] [--rounds N] [--dtrain PATH]
                                        [--venv DIR] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import pipeline_vs_one  # noqa: E402  (ensure_venv)
import sharded_vs_mirrored as sharded  # noqa: E402  (the GPT job)

DIM, HEADS, LAYERS, CONTEXT, VOCAB = 512, 8, 16, 128, 256
BATCH = 8  # global, sequences
WORKERS = 2
BAR = 1.5


def dtrain_rate(dtrain, work, steps, warmup, rnd):
    run_dir = os.path.join(work, f"dtrain-{rnd}")
    job = os.path.join(work, f"dtrain-{rnd}.toml")
    with open(job, "w") as f:
        f.write(sharded.job_text("gpt", run_dir, steps,
                                 f'[strategy]\ntype = "sharded"\nworkers = {WORKERS}\nstage = 3\n'))
    p = subprocess.run([dtrain, "train", job, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"dtrain exited {p.returncode}: {p.stdout[-800:]} {p.stderr[-800:]}")
    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"split":"train"' in l]
    return sharded.train_rate(lines[warmup:], BATCH * CONTEXT)


# ---------------------------------------------------------------------------- FSDP2 side (in the venv)

def peer(a):
    import torch
    import torch.distributed as dist
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    import gpt_vs_pytorch

    torch.set_num_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    F = torch.nn.functional

    def model(seed):
        torch.manual_seed(seed)
        return gpt_vs_pytorch.build_model(torch, DIM, HEADS, LAYERS, CONTEXT, VOCAB)

    def batch(step):
        g = torch.Generator().manual_seed(1000 + step)
        ids = torch.randint(0, VOCAB, (BATCH, CONTEXT + 1), generator=g)
        return ids[:, :-1], ids[:, 1:]

    def loss_of(net, x, y):
        return F.cross_entropy(net(x).reshape(-1, VOCAB), y.reshape(-1))

    # The gradient check: FSDP2's averaged gradient of each rank's half against one
    # process's of the whole batch.
    whole = model(1)
    x, y = batch(0)
    loss_of(whole, x, y).backward()
    reference = {n: p.grad.detach().clone() for n, p in whole.named_parameters()}
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    net = model(1)
    for block in net.h:
        fully_shard(block, mesh=mesh)
    fully_shard(net, mesh=mesh)
    half = BATCH // world
    mine = slice(rank * half, (rank + 1) * half)
    loss_of(net, x[mine], y[mine]).backward()
    worst = 0.0
    for n, p in net.named_parameters():
        g = p.grad.full_tensor() if hasattr(p.grad, "full_tensor") else p.grad
        worst = max(worst, float((g - reference[n]).abs().max() / reference[n].abs().max().clamp_min(1e-12)))
    net.zero_grad(set_to_none=True)

    opt = torch.optim.AdamW(net.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    times = []
    for step in range(a.steps):
        x, y = batch(step)
        loss = loss_of(net, x[mine], y[mine])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter())
    dist.barrier()
    if rank == 0:
        span = times[-1] - times[a.warmup - 1]
        rate = (a.steps - a.warmup) * BATCH * CONTEXT / span
        print(json.dumps({"tokens_per_s": rate, "gradient_difference": worst, "torch": torch.__version__}))
    dist.destroy_process_group()


def fsdp_rate(python, steps, warmup, port):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(WORKERS),
               OMP_NUM_THREADS="1", PYTHONPATH=HERE)
    procs = [subprocess.Popen([python, os.path.abspath(__file__), "--peer", "--steps", str(steps), "--warmup",
                               str(warmup)], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for r in range(WORKERS)]
    outs = [p.communicate() for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"FSDP2 peer exited {p.returncode}: {err[-1500:]}")
    return json.loads(outs[0][0].strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--venv", default=os.path.expanduser("~/.cache/dtrain-bench/torch-venv"))
    ap.add_argument("--json")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        return peer(a)
    python = pipeline_vs_one.ensure_venv(a.venv)
    d, t = [], []
    check = None
    with tempfile.TemporaryDirectory(prefix="fsdp_bench_") as work:
        for rnd in range(a.rounds):
            for side in (["dtrain", "fsdp"] if rnd % 2 == 0 else ["fsdp", "dtrain"]):
                if side == "dtrain":
                    d.append(dtrain_rate(a.dtrain, work, a.steps, a.warmup, rnd))
                    print(f"  round {rnd + 1} dtrain stage 3: {d[-1]:,.0f} tok/s", flush=True)
                else:
                    check = fsdp_rate(python, a.steps, a.warmup, 29600 + rnd)
                    t.append(check["tokens_per_s"])
                    print(f"  round {rnd + 1} FSDP2: {t[-1]:,.0f} tok/s (gradients vs one process: "
                          f"{check['gradient_difference']:.2e})", flush=True)
    ratio = statistics.median(d) / statistics.median(t)
    grads_ok = check["gradient_difference"] <= 1e-4
    print(f"\nGPT 50.6M, AdamW fp32, {WORKERS} processes x 1 thread, medians of {a.rounds} rounds; torch "
          f"{check['torch']}")
    print(f"  FSDP2's gradients against one process's: relative difference {check['gradient_difference']:.2e} "
          f"({'averaged correctly' if grads_ok else 'WRONG: pytorch #162338'})")
    print(f"  dtrain stage 3 {statistics.median(d):,.0f} tok/s = {ratio:.2f}x FSDP2's {statistics.median(t):,.0f} "
          f"(bar >= {BAR}): {'PASS' if ratio >= BAR else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"dtrain": d, "fsdp2": t, "ratio": ratio, "fsdp2_check": check}, f, indent=2)


if __name__ == "__main__":
    main()
