#!/usr/bin/python3
"""dtrain's CPU training of a byte-level GPT against PyTorch (the latest from PyPI), in one run.

The model (issue 33): nanoGPT's layout, 6 layers, 6 heads, 384 dims, context 256, vocabulary
256 (bytes): token and learned position embeddings, pre-norm blocks (LayerNorm eps 1e-5,
dense qkv with bias, causal attention, dense projection, residual; LayerNorm, dense 4C, GELU
tanh, dense C, residual), a final LayerNorm and an lm_head without bias, tied to the
token embedding (its weight is the embedding's table, as nanoGPT's and GPT-2's). Init N(0, 0.02), the two residual projections N(0, 0.02 / sqrt(2 * layers)),
biases 0. 10,844,160 parameters. Batch 16, AdamW lr 6e-4 with dtrain's defaults (beta1 0.9,
beta2 0.999, eps 1e-8, weight_decay 0, applied alike to every parameter), constant lr, no
clipping, no dropout.

The data: Debian's dict-gcide (/usr/share/dictd/gcide.dict.dz, gzip text read as bytes,
about 40 MB). The last 5% of the bytes are validation (dtrain's validation_fraction split,
llround), the rest training. Window i is bytes [256 i, 256 i + 257): the first 256 the input,
the last 256 the labels. Both sides read the same two files this script writes: the training
bytes, and the first --val-windows windows of the validation bytes (dtrain evaluates every
window of its validation split, all 7,803 of them would take minutes on each side; the job's
data.validation_files names the subset so both evaluate exactly the same windows).

Parts, interleaved for --repeats rounds (medians reported):
  speed  dtrain: `dtrain bench step JOB --warmup W --steps N --json` (its step time; tokens/s
         = 16 * 256 / step). PyTorch: a process of this script (--peer) in the venv's
         python, batches of 16 random windows (a seeded permutation per epoch, as dtrain's
         sampler), W untimed steps then N timed, at each setting of --torch-settings:
         torch.set_num_threads 1 or 2, eager or torch.compile (default mode; its compile
         happens in the warm-up and is reported; a setting that fails or runs past
         --compile-timeout + 30 s a step is reported and left out), fp32 or bf16 autocast
         (AdamW fused=True where the torch has it). The best
         is the peer. Bar: dtrain tokens/s >= 1.5x it.
  loss   once, after the speed rounds, both sides from the same start on the same batches, so
         that what differs is arithmetic alone (not the seed: two seeds' validation losses
         after 100 steps differ by 0.16-0.31 nats, ten times the bar). dtrain trains the
         job with [data] shuffle = false (batch k of an epoch is training windows
         [16 k, 16 k + 16), datasets/sampler.cpp, batch_loader.cpp; an epoch is 9,267 steps,
         so 100 steps stay in the first), twice from --seed: once for 1 step into one run
         directory (its end checkpoint, step-00000001, holds the weights and the AdamW
         moments after update 1; it also evaluates, as every run's last step does), once
         for --loss-steps N into another (the run the bar judges: uninterrupted; dtrain
         repeats itself bit for bit at a thread count, so its step 1 is the short run's:
         their step-1 training losses are compared, and the PyTorch side's step-2 loss on
         the loaded weights must equal dtrain's to float32 rounding). Two runs rather than
         checkpoint_every_steps = 1 (N checkpoints of 130 MB)
         or a resume from step 1 (the bar is about an uninterrupted run). The PyTorch peer
         (--loss-setting, fp32 eager with 2 threads by default; the model code above) loads
         step 1's model.safetensors into its modules (dtrain's names h{b}_qkv,
         h{b}_attention_proj, ... -> h.{b}.qkv, h.{b}.proj, ...; dense weights [out, in] as
         nn.Linear's; no lm_head.weight, tied to wte) and optimizer.safetensors' adam_m.NAME
         and adam_v.NAME as torch.optim.AdamW's exp_avg and exp_avg_sq with step 1, then
         trains steps 2..N on dtrain's batches. Its AdamW is the single-tensor one (not
         fused, not foreach), core/optim/update_rules.h's formula: m <- beta1 m + (1-beta1) g,
         v <- beta2 v + (1-beta2) g^2, p <- p - lr / (1 - beta1^t) * m / (sqrt(v) /
         sqrt(1 - beta2^t) + eps), t the update's 1-based count (torch's lerp for m differs
         by rounding only); weight_decay is 0, so the decay's mask (dtrain decays the
         matrices only) does not matter. scripts/check/gpt_twin.py holds the same layout to
         1e-5 in float64 over 5 steps of a tiny GPT. Both evaluate the mean nats per token
         over the same validation windows. Bar: |dtrain - PyTorch| <= 0.02. Also printed
         (informative): PyTorch's evaluation of dtrain's final weights (evaluation alone)
         and the largest per-step training-loss difference.
         --loss-from-seeds: the former comparison instead, each side from its own seed and
         its own shuffled order (dtrain's sampler, torch.randperm): seed spread, not
         arithmetic.
  --repeats 0 skips the speed part (and its bar).

The PyTorch side needs torch >= 2.0 (F.scaled_dot_product_attention, torch.compile): Debian's
python3-torch (1.13) has neither, so the peer always runs in the virtual environment
pipeline_vs_one.py makes (~/.cache/dtrain-bench/torch-venv: the latest torch from PyPI),
made here if missing; --pypi is accepted for the other scripts' sake and changes nothing.

Exit status: 0 when the bars judged pass, 1 when one fails.

Usage: scripts/bench/gpt_vs_pytorch.py [--repeats 1] [--warmup 2] [--steps 8] [--loss-steps 100]
           [--loss-from-seeds] [--val-windows 256] [--torch-settings 2t,1t,2t+bf16,2t+compile,...] [--loss-setting 2t]
           [--compile-timeout 300] [--seed 1] [--wait-for-idle S] [--pypi]
           [--json FILE] [--dtrain PATH] [--work DIR]
"""
import argparse
import gzip
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.dirname(os.path.dirname(HERE))
import distributed_vs_pytorch as load  # noqa: E402  (wait_for_idle, LoadWatch)
sys.path.insert(0, os.path.join(ROOT, "scripts", "check"))
import gpt_twin as twin  # noqa: E402  (checkpoint_dir; its docstring: the checkpoint's layout)

CORPUS = "/usr/share/dictd/gcide.dict.dz"
LAYERS, HEADS, DIM, CONTEXT, VOCAB = 6, 6, 384, 256, 256
BATCH, EVAL_BATCH = 16, 64
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 6e-4, 0.9, 0.999, 1e-8, 0.0  # dtrain's adamw defaults
VALIDATION_FRACTION = 0.05
SPEED_BAR, LOSS_BAR = 1.5, 0.02
TOKENS_PER_STEP = BATCH * CONTEXT

# PyTorch's settings: name -> (threads, torch.compile, bf16 autocast).
TORCH_SETTINGS = {
    "1t": (1, False, False), "2t": (2, False, False),
    "1t+bf16": (1, False, True), "2t+bf16": (2, False, True),
    "1t+compile": (1, True, False), "2t+compile": (2, True, False),
    "1t+compile+bf16": (1, True, True), "2t+compile+bf16": (2, True, True),
}
DEFAULT_SETTINGS = ["1t", "2t", "2t+bf16", "2t+compile", "2t+compile+bf16"]


# ---------------------------------------------------------------------------- data

def write_data(work, val_windows):
    """Writes work/train.bin (the training bytes) and work/val.bin (the first val_windows
    windows of the validation bytes, all when 0); returns (train path, val path, facts)."""
    with gzip.open(CORPUS) as f:
        data = f.read()
    n = len(data)
    val = math.floor(n * VALIDATION_FRACTION + 0.5)  # std::llround of a positive number
    train = n - val
    all_val_windows = (val - 1) // CONTEXT
    use = all_val_windows if val_windows <= 0 else min(val_windows, all_val_windows)
    paths = os.path.join(work, "train.bin"), os.path.join(work, "val.bin")
    with open(paths[0], "wb") as f:
        f.write(data[:train])
    with open(paths[1], "wb") as f:
        f.write(data[train:train + use * CONTEXT + 1])
    facts = {"corpus_bytes": n, "train_bytes": train, "train_windows": (train - 1) // CONTEXT,
             "validation_bytes": val, "validation_windows": all_val_windows, "evaluated_windows": use}
    return paths[0], paths[1], facts


# ---------------------------------------------------------------------------- dtrain side

def write_job(path, run_dir, train_file, val_file, steps, seed, shuffle=True):
    """The issue's job; shuffle = False for the loss comparison's batches in file order. The
    keys whose defaults the comparison relies on (no dropout, a tied lm_head, no clipping, no
    label smoothing, a constant lr) are written out."""
    with open(path, "w") as f:
        f.write(f"""[job]
name = "gpt_vs_pytorch"
run_dir = {json.dumps(run_dir)}
seed = {seed}
[model]
preset = "gpt"
layers = {LAYERS}
heads = {HEADS}
dim = {DIM}
context = {CONTEXT}
dropout = 0.0
tie_embeddings = true
[data]
dataset = "text"
files = {json.dumps(train_file)}
validation_files = {json.dumps(val_file)}
context = {CONTEXT}
shuffle = {"true" if shuffle else "false"}
[train]
steps = {steps}
batch_size = {BATCH}
eval_batch_size = {EVAL_BATCH}
eval_every_epoch = false
eval_every_steps = 0
checkpoint_every_epoch = false
checkpoint_every_steps = 0
grad_clip_norm = 0.0
label_smoothing = 0.0
[schedule]
type = "constant"
warmup_steps = 0
[optimizer]
type = "adamw"
lr = {LR}
beta1 = {BETA1}
beta2 = {BETA2}
eps = {EPS}
weight_decay = {WEIGHT_DECAY}
""")
    return path


def run_proc(cmd, timeout=None, env=None):
    """(returncode, or None when it ran past timeout; output; peak RSS MB; seconds). The child
    gets a session of its own, so that a timeout ends it and what it started (inductor's
    compile workers) by its process group id."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    timed_out = threading.Event()

    def expire():
        timed_out.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, expire) if timeout else None
    if timer:
        timer.start()
    out = proc.stdout.read()  # to its end; then wait4 reaps the child with its own rusage
    _, status, usage = os.wait4(proc.pid, 0)
    if timer:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    rc = None if timed_out.is_set() else proc.returncode
    return rc, out, usage.ru_maxrss / 1024.0, time.perf_counter() - t


def dtrain_speed(dtrain, job, warmup, steps):
    load.wait_for_idle()
    rc, out, rss, _ = run_proc([dtrain, "bench", "step", job, "--warmup", str(warmup), "--steps", str(steps),
                                "--json"])
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        sys.exit(f"bench: dtrain bench step {job} failed ({rc}):\n{out[-2000:]}")
    r = json.loads(lines[-1])
    ms = step_ms(r)
    if ms is None:
        sys.exit(f"bench: no step time in dtrain bench step's JSON: {lines[-1][:500]}")
    return {"tokens_per_s": TOKENS_PER_STEP * 1000.0 / ms, "step_ms": ms, "peak_rss_mb": rss,
            "phases": r.get("phases")}


def step_ms(r):
    for k in ("step_ms", "ms_per_step", "step"):
        if isinstance(r.get(k), (int, float)):
            return float(r[k])
    return None


def dtrain_loss(dtrain, job, run_dir):
    """Trains the job; its figures from metrics.jsonl and the path of its end checkpoint."""
    load.wait_for_idle()
    rc, out, _, secs = run_proc([dtrain, "train", job, "--quiet", "--overwrite"])
    if rc != 0:
        sys.exit(f"bench: dtrain train {job} failed ({rc}):\n{out[-2000:]}")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        recs = list(map(json.loads, f))
    train = [r for r in recs if r.get("split") == "train"]
    test = [r for r in recs if r.get("split") == "test"]
    if not test:
        sys.exit(f"bench: {run_dir}/metrics.jsonl has no test record")
    # A language model's records count "tokens" with "tokens_per_s", the step's own rate. A train
    # record's "time" is when it was written, one step late (trainer.cpp settles a step's figures
    # after the next), the last two alike: the durations come from the rates instead.
    tokens = sum(r["tokens"] for r in train[1:])
    seconds = sum(r["tokens"] / r["tokens_per_s"] for r in train[1:] if r["tokens_per_s"] > 0)
    last = train[-1]["step"]
    return {"val_loss": test[-1]["loss"], "steps": last, "first_loss": train[0]["loss"],
            "last_loss": train[-1]["loss"], "seconds": secs,
            "train_losses": {r["step"]: r["loss"] for r in train},
            "checkpoint": twin.checkpoint_dir(run_dir, last),
            "tokens_per_s": tokens / seconds if seconds > 0 else None}


# ---------------------------------------------------------------------------- PyTorch side

def build_model(torch, DIM=None, HEADS=None, LAYERS=None, CONTEXT=None, VOCAB=None):
    """The GPT twin of dtrain's gpt preset; by default this benchmark's sizes."""
    g = globals()
    DIM, HEADS, LAYERS = DIM or g["DIM"], HEADS or g["HEADS"], LAYERS or g["LAYERS"]
    CONTEXT, VOCAB = CONTEXT or g["CONTEXT"], VOCAB or g["VOCAB"]
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(DIM, eps=1e-5)
            self.qkv = nn.Linear(DIM, 3 * DIM)
            self.proj = nn.Linear(DIM, DIM)
            self.ln2 = nn.LayerNorm(DIM, eps=1e-5)
            self.fc1 = nn.Linear(DIM, 4 * DIM)
            self.fc2 = nn.Linear(4 * DIM, DIM)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=2)
            q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, DIM)
            self.wpe = nn.Embedding(CONTEXT, DIM)
            self.h = nn.ModuleList(Block() for _ in range(LAYERS))
            self.ln_f = nn.LayerNorm(DIM, eps=1e-5)
            self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)
            for b in self.h:
                nn.init.normal_(b.proj.weight, 0.0, 0.02 / math.sqrt(2 * LAYERS))
                nn.init.normal_(b.fc2.weight, 0.0, 0.02 / math.sqrt(2 * LAYERS))
            self.lm_head.weight = self.wte.weight  # tied, as nanoGPT and dtrain's gpt preset

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for b in self.h:
                x = b(x)
            return self.lm_head(self.ln_f(x))

    return GPT()


def dtrain_name(name):
    """This script's parameter name -> dtrain's gpt preset's (models/gpt_preset.cpp):
    h.3.qkv.weight -> h3_qkv.weight, h.3.proj.bias -> h3_attention_proj.bias."""
    parts = name.split(".")
    if parts[0] != "h":
        return name
    layer = "attention_proj" if parts[2] == "proj" else parts[2]
    return f"h{parts[1]}_{layer}.{parts[3]}"


def load_checkpoint(torch, net, opt, directory):
    """Copies dtrain's checkpoint `directory` into net's parameters and, when opt is given,
    its AdamW moments into opt's state (step = the checkpoint's step). Exits on any name or
    shape that is not the other's."""
    import numpy as np
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from check_safetensors import read
    meta, tensors, _ = read(os.path.join(directory, "model.safetensors"))
    weights = dict(tensors)
    params = {dtrain_name(n): p for n, p in net.named_parameters()}  # lm_head.weight is wte's
    moments = dict(read(os.path.join(directory, "optimizer.safetensors"))[1]) if opt else {}
    wanted = set(params) | ({f"adam_{k}.{n}" for n in params for k in "mv"} if opt else set())
    have = set(weights) | set(moments)
    shapes = [n for n, p in params.items() if n in weights and tuple(p.shape) != weights[n].shape]
    if have != wanted or shapes:
        sys.exit(f"peer: {directory} is not this model's: missing {sorted(wanted - have)[:5]}, unexpected "
                 f"{sorted(have - wanted)[:5]}, shapes differ {shapes[:5]}")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(torch.from_numpy(np.array(weights[n], dtype=np.float32)))
    step = int(meta.get("step", 0))
    for n, p in params.items() if opt else ():
        opt.state[p] = {"step": torch.tensor(float(step)),
                        "exp_avg": torch.from_numpy(np.array(moments[f"adam_m.{n}"], dtype=np.float32)),
                        "exp_avg_sq": torch.from_numpy(np.array(moments[f"adam_v.{n}"], dtype=np.float32))}
    return step


def batch_windows(step, windows):
    """dtrain's windows of step `step` (1-based) with [data] shuffle = false: the identity order
    every epoch, cut into batches of BATCH, the last of an epoch short (gpt_twin.py's, at this
    batch size)."""
    per_epoch = -(-windows // BATCH)
    k = (step - 1) % per_epoch
    return list(range(k * BATCH, min((k + 1) * BATCH, windows)))


def run_peer(a):
    """The PyTorch process: prints one JSON line. With --start DIR it continues from dtrain's
    checkpoint DIR (weights, AdamW moments) on dtrain's unshuffled batches, with --final DIR it
    also evaluates dtrain's weights of DIR; else it trains from its own seed."""
    import numpy as np
    import resource
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train = torch.from_numpy(np.fromfile(a.train_file, np.uint8).astype(np.int64))
    windows = (len(train) - 1) // CONTEXT
    net = build_model(torch)
    params = sum(p.numel() for p in net.parameters())
    adamw = dict(lr=LR, betas=(BETA1, BETA2), eps=EPS, weight_decay=WEIGHT_DECAY)
    if a.start:  # update_rules.h's formula: the single-tensor AdamW
        opt, fused = torch.optim.AdamW(net.parameters(), foreach=False, fused=False, **adamw), False
        step_no = load_checkpoint(torch, net, opt, a.start) + 1
    else:
        step_no = 1
        try:
            opt, fused = torch.optim.AdamW(net.parameters(), fused=True, **adamw), True
        except (RuntimeError, TypeError, ValueError):
            opt, fused = torch.optim.AdamW(net.parameters(), **adamw), False
    first_step = step_no
    model = torch.compile(net) if a.compile else net
    offsets = torch.arange(CONTEXT + 1)
    gen = torch.Generator().manual_seed(a.seed)
    perm, pos, losses = torch.randperm(windows, generator=gen), 0, {}

    def next_batch():
        nonlocal perm, pos
        if a.start:
            return torch.tensor(batch_windows(step_no, windows))
        if pos + BATCH > windows:
            perm, pos = torch.randperm(windows, generator=gen), 0
        pos += BATCH
        return perm[pos - BATCH:pos]

    def step():
        nonlocal step_no
        w = train[next_batch()[:, None] * CONTEXT + offsets]
        x, y = w[:, :-1], w[:, 1:]
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            logits = model(x)
        loss = F.cross_entropy(logits.float().view(-1, VOCAB), y.reshape(-1))
        loss.backward()
        opt.step()
        losses[step_no] = loss.item()
        step_no += 1

    net.train()
    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    warm_s = time.perf_counter() - t0
    t1, times = time.perf_counter(), []
    for _ in range(a.steps):
        step()
        times.append(time.perf_counter())
    dt = time.perf_counter() - t1
    times = [round((b - a_) * 1000.0) for a_, b in zip([t1] + times, times)]
    out = {"tokens_per_s": a.steps * TOKENS_PER_STEP / dt if a.steps else None,
           "step_ms": dt * 1000.0 / a.steps if a.steps else None, "warmup_s": warm_s,
           "steps": a.warmup + a.steps, "first_step": first_step, "step_times_ms": times[:50],
           "first_loss": losses[first_step], "last_loss": losses[step_no - 1],
           "params": params, "torch": torch.__version__, "fused_adamw": fused}
    if a.start:
        out["train_losses"] = losses
    if a.val_file:
        val = torch.from_numpy(np.fromfile(a.val_file, np.uint8).astype(np.int64))
        vw = (len(val) - 1) // CONTEXT

        def evaluate():
            net.eval()
            total = 0.0
            with torch.no_grad():
                for s in range(0, vw, EVAL_BATCH):
                    w = val[torch.arange(s, min(s + EVAL_BATCH, vw))[:, None] * CONTEXT + offsets]
                    logits = net(w[:, :-1])
                    total += F.cross_entropy(logits.view(-1, VOCAB), w[:, 1:].reshape(-1), reduction="sum").item()
            return total / (vw * CONTEXT)

        t = time.perf_counter()
        out.update({"val_loss": evaluate(), "val_windows": vw, "eval_s": time.perf_counter() - t})
        if a.final:  # dtrain's own final weights, evaluated here: the evaluation's arithmetic alone
            load_checkpoint(torch, net, None, a.final)
            out["dtrain_weights_val_loss"] = evaluate()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps(out), flush=True)


def torch_run(python, setting, train_file, warmup, steps, seed, timeout, val_file=None, start=None, final=None):
    """The peer's JSON, or {"error": why} when it failed or ran past timeout. start, final:
    dtrain's checkpoints to continue from and to evaluate (run_peer)."""
    load.wait_for_idle()
    threads, compile_, bf16 = TORCH_SETTINGS[setting]
    cmd = [python, os.path.abspath(__file__), "--peer", "--threads", str(threads), "--train-file", train_file,
           "--warmup", str(warmup), "--steps", str(steps), "--seed", str(seed)]
    cmd += (["--compile"] if compile_ else []) + (["--bf16"] if bf16 else [])
    cmd += ["--val-file", val_file] if val_file else []
    cmd += (["--start", start] if start else []) + (["--final", final] if final else [])
    # Two threads of OpenMP for the step; inductor's compile workers need not be more.
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TORCHINDUCTOR_COMPILE_THREADS="2")
    rc, out, rss, secs = run_proc(cmd, timeout=timeout, env=env)
    if rc is None:
        return {"error": f"ran past {timeout:.0f} s (killed)", "seconds": secs}
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if rc != 0 or not lines:
        last = [l for l in out.strip().splitlines() if l.strip()][-1:] or ["no output"]
        return {"error": f"failed ({rc}): {last[0][:200]}", "seconds": secs, "output": out[-3000:]}
    r = json.loads(lines[-1])
    r.update({"seconds": secs, "peak_rss_mb": rss})
    if "train_losses" in r:  # JSON's keys are strings
        r["train_losses"] = {int(k): v for k, v in r["train_losses"].items()}
    return r


# ---------------------------------------------------------------------------- benchmark

def bench(a):
    load.WAIT_FOR_IDLE_S = a.wait_for_idle
    if not os.path.exists(a.dtrain):
        sys.exit(f"bench: {a.dtrain} not found; run scripts/build.sh first (or --dtrain PATH)")
    import pipeline_vs_one
    python = pipeline_vs_one.ensure_venv(a.venv)
    version = subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True).stdout.strip()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dtrain-gpt-bench-") as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        train_file, val_file, facts = write_data(work, a.val_windows)
        print(f"data: {CORPUS}: {facts['corpus_bytes']:,} bytes, {facts['train_windows']:,} training windows, "
              f"{facts['evaluated_windows']:,} of {facts['validation_windows']:,} validation windows evaluated",
              flush=True)
        speed_run = os.path.join(work, "speed_run")
        speed_job = write_job(os.path.join(work, "speed.toml"), speed_run, train_file, val_file,
                              a.warmup + a.steps, a.seed)
        d_runs, t_runs = [], {s: [] for s in a.torch_settings}
        failed = {}
        watch = load.LoadWatch()
        watch.part = "speed"
        for r in range(a.repeats):
            d = dtrain_speed(a.dtrain, speed_job, a.warmup, a.steps)
            d_runs.append(d)
            print(f"round {r + 1}: dtrain {d['tokens_per_s']:.0f} tokens/s ({d['step_ms']:.0f} ms/step)", flush=True)
            for s in a.torch_settings:
                if s in failed:
                    continue
                # compile's own time-box, plus what the steps may take on a slow machine
                timeout = (a.compile_timeout if TORCH_SETTINGS[s][1] else 120) + 30 * (a.warmup + a.steps)
                o = torch_run(python, s, train_file, a.warmup, a.steps, a.seed, timeout)
                if "error" in o:
                    failed[s] = o
                    print(f"round {r + 1}: PyTorch {s}: {o['error']} (left out)", flush=True)
                    continue
                t_runs[s].append(o)
                print(f"round {r + 1}: PyTorch {s} {o['tokens_per_s']:.0f} tokens/s ({o['step_ms']:.0f} ms/step, "
                      f"warm-up {o['warmup_s']:.0f} s, loss {o['first_loss']:.2f} -> {o['last_loss']:.2f})",
                      flush=True)
        loss = None
        if a.loss_steps > 0:
            watch.part = "loss"
            loss = (loss_from_seeds if a.loss_from_seeds else loss_shared_start)(a, python, work, train_file, val_file)
        watch.stop()
        load_summary = watch.summary()

    t = {s: statistics.median(o["tokens_per_s"] for o in runs) for s, runs in t_runs.items() if runs}
    summary = {"dtrain_tokens_per_s": statistics.median(d["tokens_per_s"] for d in d_runs) if d_runs else None,
               "dtrain_step_ms": statistics.median(d["step_ms"] for d in d_runs) if d_runs else None,
               "dtrain_peak_rss_mb": max(d["peak_rss_mb"] for d in d_runs) if d_runs else None,
               "torch_peak_rss_mb": {s: max(o["peak_rss_mb"] for o in runs) for s, runs in t_runs.items() if runs},
               "torch_tokens_per_s": t, "torch_failed": {s: o["error"] for s, o in failed.items()},
               "torch_warmup_s": {s: statistics.median(o["warmup_s"] for o in runs) for s, runs in t_runs.items()
                                  if runs},
               "torch": version, "data": facts, "loss": loss, "repeats": a.repeats, "warmup": a.warmup,
               "steps": a.steps, "load": load_summary, "seconds": time.perf_counter() - started}
    if t:
        best = max(t, key=t.get)
        summary.update({"torch_best": best, "ratio": summary["dtrain_tokens_per_s"] / t[best]})
        summary["pass"] = summary["ratio"] >= SPEED_BAR
    print_table(a, summary)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=2)
    bars = ([summary.get("pass", False)] if a.repeats else []) + ([loss.get("pass", False)] if loss else [])
    return 0 if all(bars) else 1


def loss_timeout(a):
    return (a.compile_timeout if TORCH_SETTINGS[a.loss_setting][1] else 120) + 30 * a.loss_steps


def loss_verdict(dl, tl, loss):
    if "error" in tl:
        print(f"loss: PyTorch {loss['setting']}: {tl['error']}", flush=True)
    if "val_loss" in tl:
        loss["difference"] = dl["val_loss"] - tl["val_loss"]
        loss["pass"] = abs(loss["difference"]) <= LOSS_BAR
    return loss


def loss_shared_start(a, python, work, train_file, val_file):
    """dtrain's step 1 (a run of 1 step) and its N steps (a run of N), both unshuffled from
    --seed; PyTorch from step 1's checkpoint for steps 2..N on the same batches."""
    runs = {k: os.path.join(work, f"loss_{k}") for k in ("start", "run")}
    jobs = {k: write_job(os.path.join(work, f"loss_{k}.toml"), runs[k], train_file, val_file,
                         1 if k == "start" else a.loss_steps, a.seed, shuffle=False) for k in runs}
    ds = dtrain_loss(a.dtrain, jobs["start"], runs["start"])
    dl = dtrain_loss(a.dtrain, jobs["run"], runs["run"])
    for d, n in ((ds, 1), (dl, a.loss_steps)):
        if d["steps"] != n or not os.path.isdir(d["checkpoint"]):
            sys.exit(f"bench: dtrain's run of {n} steps ended at step {d['steps']} without {d['checkpoint']}")
    same_start = ds["train_losses"][1] == dl["train_losses"][1]
    print(f"loss: dtrain {dl['steps']} steps unshuffled, validation loss {dl['val_loss']:.4f} ({dl['seconds']:.0f} s; "
          f"its step 1 {'equals' if same_start else 'DIFFERS FROM'} the 1-step run's: training loss "
          f"{dl['train_losses'][1]!r} vs {ds['train_losses'][1]!r})", flush=True)
    # step 2 untimed, so that its tokens/s is over about dtrain's steps (2..N)
    tl = torch_run(python, a.loss_setting, train_file, 1, a.loss_steps - 2, a.seed, loss_timeout(a),
                   val_file=val_file, start=ds["checkpoint"], final=dl["checkpoint"])
    loss = {"dtrain": dl, "torch": tl, "setting": a.loss_setting, "steps": a.loss_steps, "mode": "shared_start",
            "same_step1": same_start}
    if "val_loss" in tl:
        steps = sorted(set(tl["train_losses"]) & set(dl["train_losses"]))
        diffs = {s: dl["train_losses"][s] - tl["train_losses"][s] for s in steps}
        worst = max(steps, key=lambda s: abs(diffs[s]))
        loss.update({"train_loss_step2_difference": diffs.get(2), "train_loss_max_abs_difference": abs(diffs[worst]),
                     "train_loss_worst_step": worst,
                     "dtrain_weights_torch_val_loss": tl.get("dtrain_weights_val_loss")})
        print(f"loss: PyTorch {a.loss_setting} from dtrain's step 1 (weights, AdamW moments), steps 2..{a.loss_steps} "
              f"on dtrain's batches, validation loss {tl['val_loss']:.4f} ({tl['seconds']:.0f} s)", flush=True)
    return loss_verdict(dl, tl, loss)


def loss_from_seeds(a, python, work, train_file, val_file):
    """The former comparison: each side from its own seed and shuffled order."""
    run = os.path.join(work, "loss_run")
    dl = dtrain_loss(a.dtrain, write_job(os.path.join(work, "loss.toml"), run, train_file, val_file, a.loss_steps,
                                         a.seed), run)
    print(f"loss: dtrain {dl['steps']} steps, validation loss {dl['val_loss']:.4f} ({dl['seconds']:.0f} s)",
          flush=True)
    # one untimed step first, so that its tokens/s is over the same steps as dtrain's
    tl = torch_run(python, a.loss_setting, train_file, 1, a.loss_steps - 1, a.seed, loss_timeout(a),
                   val_file=val_file)
    if "val_loss" in tl:
        print(f"loss: PyTorch {a.loss_setting} {tl['steps']} steps, validation loss {tl['val_loss']:.4f} "
              f"({tl['seconds']:.0f} s)", flush=True)
    return loss_verdict(dl, tl, {"dtrain": dl, "torch": tl, "setting": a.loss_setting, "steps": a.loss_steps,
                                 "mode": "own_seeds"})


def print_table(a, s):
    print(f"\nmachine: {os.cpu_count()} cores; GPT {LAYERS} layers, {HEADS} heads, {DIM} dims, context {CONTEXT}, "
          f"vocab {VOCAB}, batch {BATCH}; AdamW lr {LR:g}; medians of {a.repeats} interleaved rounds of "
          f"{a.warmup} warm-up + {a.steps} timed steps; whole run {s['seconds'] / 60:.1f} min")
    print(f"share of load samples (twice a second) with another process running: {s['load'] or 'none taken'}")
    print(f"PyTorch {s['torch']} (venv {a.venv}); settings: threads, +compile = torch.compile, +bf16 = bf16 autocast")
    if a.repeats:
        print_speed(s)
    else:
        print("speed: not measured (--repeats 0)")
    if s["loss"]:
        print_loss(s["loss"], s["data"])


def print_speed(s):
    print(f"{'side':22} {'tokens/s':>9} {'ms/step':>8} {'dtrain / it':>11} {'RSS MB':>7}  note")
    print(f"{'dtrain':22} {s['dtrain_tokens_per_s']:9.0f} {s['dtrain_step_ms']:8.0f} {'':>11} "
          f"{s['dtrain_peak_rss_mb']:7.0f}  fp32, dtrain bench step")
    for name, tps in s["torch_tokens_per_s"].items():
        note = "best" if name == s.get("torch_best") else ""
        if TORCH_SETTINGS[name][1]:
            note += f"{', ' if note else ''}warm-up incl. compile {s['torch_warmup_s'][name]:.0f} s"
        print(f"{'PyTorch ' + name:22} {tps:9.0f} {TOKENS_PER_STEP * 1000.0 / tps:8.0f} "
              f"{s['dtrain_tokens_per_s'] / tps:11.2f} {s['torch_peak_rss_mb'][name]:7.0f}  {note}")
    for name, why in s["torch_failed"].items():
        print(f"{'PyTorch ' + name:22} {'-':>9} {'-':>8} {'-':>11} {'-':>7}  {why}")
    if "ratio" in s:
        print(f"speed: dtrain / best PyTorch ({s['torch_best']}) = {s['ratio']:.2f} (bar >= {SPEED_BAR:g}) "
              f"{'PASS' if s['pass'] else 'FAIL'}")
    else:
        print("speed: no PyTorch setting ran: FAIL")


def print_loss(loss, d):
    dl, tl, shared = loss["dtrain"], loss["torch"], loss["mode"] == "shared_start"
    how = "from dtrain's step 1, on dtrain's unshuffled batches" if shared else "own seeds"
    first = tl.get("first_step", 1)
    print(f"loss after {loss['steps']} steps (batch {BATCH}, {how}), mean nats per token over the first "
          f"{d['evaluated_windows']:,} of {d['validation_windows']:,} validation windows: dtrain "
          f"{dl['val_loss']:.4f} (train step 1 {dl['first_loss']:.3f} -> {dl['last_loss']:.3f}), PyTorch "
          f"{loss['setting']} " + (f"{tl['val_loss']:.4f} (train step {first} {tl['first_loss']:.3f} -> "
                                   f"{tl['last_loss']:.3f})" if "val_loss" in tl else tl["error"]))
    if shared and "val_loss" in tl:
        print(f"informative: dtrain's final weights evaluated by PyTorch {tl['dtrain_weights_val_loss']:.6f} "
              f"(dtrain's own evaluation {dl['val_loss']:.6f}); training loss dtrain - PyTorch at step 2 (the same "
              f"weights) {loss['train_loss_step2_difference']:+.2e}, largest "
              f"{loss['train_loss_max_abs_difference']:.2e} (step {loss['train_loss_worst_step']}); dtrain's step 1 "
              f"{'equals' if loss['same_step1'] else 'DIFFERS FROM'} its 1-step run's")
    if dl.get("tokens_per_s") and tl.get("tokens_per_s"):
        print(f"loss runs' own speed: dtrain {dl['tokens_per_s']:.0f} tokens/s (steps 2 to {loss['steps']}), "
              f"PyTorch {loss['setting']} {tl['tokens_per_s']:.0f} (steps {first + 1} to {loss['steps']}) = "
              f"{dl['tokens_per_s'] / tl['tokens_per_s']:.2f}")
    if "difference" in loss:
        print(f"loss: |dtrain - PyTorch| = {abs(loss['difference']):.4f} ({loss['difference']:+.2e}; "
              f"bar <= {LOSS_BAR:g}) {'PASS' if loss['pass'] else 'FAIL'}")


def settings_list(text):
    names = [s for s in text.split(",") if s]
    unknown = [s for s in names if s not in TORCH_SETTINGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown setting {','.join(unknown) or text!r}; known: "
                                         f"{', '.join(TORCH_SETTINGS)}")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=1, help="interleaved speed rounds (default 1; 0 = no speed "
                    "part)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps before the timed ones (default 2)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per speed run (default 8)")
    ap.add_argument("--loss-steps", type=int, default=100, help="training steps of the loss comparison "
                    "(default 100; 0 = no loss comparison)")
    ap.add_argument("--loss-from-seeds", action="store_true", help="the loss comparison from each side's own seed "
                    "and shuffled order (the former one: seed spread) instead of PyTorch from dtrain's step 1")
    ap.add_argument("--val-windows", type=int, default=256,
                    help="validation windows evaluated, the first of the split (default 256; 0 = all)")
    ap.add_argument("--torch-settings", type=settings_list, default=DEFAULT_SETTINGS,
                    help=f"comma-separated, of {','.join(TORCH_SETTINGS)} (default {','.join(DEFAULT_SETTINGS)})")
    ap.add_argument("--loss-setting", choices=list(TORCH_SETTINGS), default="2t",
                    help="PyTorch's setting for the loss comparison (default 2t: fp32 eager)")
    ap.add_argument("--compile-timeout", type=float, default=300,
                    help="seconds a torch.compile run may take for its compile (on top of 30 s a step) "
                         "before it is killed and left out (default 300)")
    ap.add_argument("--seed", type=int, default=1, help="both sides' seed (default 1)")
    ap.add_argument("--wait-for-idle", type=float, default=0, metavar="S",
                    help="before each run wait up to S seconds for no other process to run for 2 s")
    ap.add_argument("--pypi", action="store_true", help="accepted for the other scripts' sake: the peer is "
                    "always the PyPI torch of --venv (Debian's 1.13 lacks scaled_dot_product_attention)")
    ap.add_argument("--venv", default=os.path.join(os.path.expanduser("~"), ".cache", "dtrain-bench", "torch-venv"))
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--work", default="", help="keep the data, jobs and dtrain's runs here (default: a temporary "
                    "directory, removed at the end)")
    # The PyTorch peer process (started by the benchmark).
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--compile", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--train-file", help=argparse.SUPPRESS)
    ap.add_argument("--val-file", help=argparse.SUPPRESS)
    ap.add_argument("--start", help=argparse.SUPPRESS)
    ap.add_argument("--final", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        return run_peer(a)
    if a.warmup < 1 or a.steps < 1 or a.repeats < 0 or a.loss_steps < 0 or a.loss_steps == 1:
        sys.exit("bench: --warmup and --steps must be at least 1, --repeats at least 0, --loss-steps 0 or at least 2")
    return bench(a)


if __name__ == "__main__":
    sys.exit(main())
