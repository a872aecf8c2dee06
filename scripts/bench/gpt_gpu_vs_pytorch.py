#!/usr/bin/env python3
"""dtrain's GPT-2 small on one GPU against PyTorch 2.x on the same GPU, in one run (issue 33's GPU bar).

Bars (H100 / H200, GPT-2 small, context 1024, bf16):
  eager    dtrain bf16 tokens/s >= 1.25 x PyTorch eager bf16 (autocast, SDPA flash attention,
           fused AdamW)
  compile  dtrain bf16 tokens/s >= 1.0 x the same PyTorch step under torch.compile
  MFU      dtrain bf16 model FLOPs utilisation >= 45% of the card's dense bf16 peak
Figures without a bar: dtrain tf32 against PyTorch fp32 with TF32 on, and dtrain fp32 against
PyTorch fp32 with TF32 off. dtrain's [job] precision "fp32" is exact fp32 on a GPU (TF32 off,
core/config/job_config.h); "tf32" is the value that puts its matrix products on tensor cores.

The model, on both sides: GPT-2 small in nanoGPT's layout (dtrain's [model] preset = "gpt";
PyTorch: scripts/bench/gpt_vs_pytorch.py's build_model, its size constants set to these):
12 layers, 12 heads, 768 dims, context 1024, vocabulary 50,304 (GPT-2's 50,257 padded to a
multiple of 64; every id of the data is below 50,257), the output layer tied to the token
embedding, dropout 0: 124,475,904 parameters. Batch --batch B sequences of 1,024 tokens
(default 8). AdamW lr 6e-4, betas 0.9 / 0.95, eps 1e-8, weight decay 0.1 on every 2-D tensor
(the dense weights and both embedding tables: nanoGPT's groups; dtrain's decay_embeddings =
true), constant lr, no gradient clipping.

  dtrain   `dtrain bench step JOB --warmup W --steps N --json`, one process per run, on a job
           this script writes (device cuda, precision bf16 / tf32 / fp32, dtrain's defaults for
           every key it does not name) reading token files it writes: 4,194,304 ids drawn
           uniformly below 50,257 (seeded) in llm.c's format (a 1,024-byte header of 256 int32:
           magic 20240520, version 1, the token count; then the ids as uint16), and 65,537 more
           as the job's validation_files (bench step does not evaluate). tokens/s = B x 1,024 /
           the step time it prints (step_ms: the wall time of the N steps after the W warm-up
           ones, the device drained at both ends, / N; bench step times each layer with CUDA
           events read once at the end, and runs without CUDA graphs, which a GPT's
           per-position loss does not record anyway). A run that exits non-zero (a refusal is
           exit 2 and one line) leaves that precision's rows UNMEASURED with its last error
           line as the reason, and that precision is not run again.
  PyTorch  one process of this script (--peer, under --python: default this python) for the
           whole benchmark, asked for each run in turn. Each setting's model and optimizer are
           built once (torch.manual_seed(0), on the device) and keep training from one run to
           the next. A step: forward and the mean cross-entropy over the B x 1,024 positions
           (over all 50,304 logits, as nanoGPT), backward, torch.optim.AdamW(fused=True).step(),
           zero_grad(set_to_none=True), on random token batches of the run's shape (4 made on
           the device at the start, taken in turn). Settings:
             eager_bf16    torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss;
                           F.scaled_dot_product_attention(is_causal=True) with the flash backend
                           alone enabled (every backend if flash refuses, said so); TF32 on, as
                           nanoGPT's train.py (every product runs in bf16 here anyway)
             compile_bf16  the same with forward and loss under torch.compile (default mode, as
                           nanoGPT); its first step compiles: that time is reported, never timed
             eager_tf32    fp32, torch.backends.cuda.matmul.allow_tf32 = True, SDPA's own choice
             eager_fp32    fp32, TF32 off, SDPA's own choice
           A run: W warm-up steps the first time a setting runs (3 afterwards), then N steps
           between two torch.cuda.synchronize() calls: tokens/s = N x B x 1,024 / that time.
           Also its peak device memory (max_memory_allocated) and the last step's loss.

Rounds: a bf16 round is dtrain bf16, PyTorch eager_bf16 and compile_bf16 (--steps timed steps;
dtrain first in the first, third, ... round, last in the others); an fp32 round is dtrain tf32,
PyTorch eager_tf32, dtrain fp32, PyTorch eager_fp32 (--fp32-steps). They run in this order:
bf16 rounds 1 and 2, fp32 round 1, the other bf16 rounds (--rounds, default 3 in all), the
other fp32 rounds (--fp32-rounds, default 1). Each figure is the median over its runs; a bar
is judged on the medians of the runs measured, and says how many.

MFU: FLOPs per token = 6 N + 6 L C T, llm.c's gpt2_estimate_mfu (train_gpt2.cu: "size_t
flops_per_token = 6 * N + (size_t)6 * L * C * T"): N every parameter (the tied token table
once, its padded rows, the position table, biases and layer norms included: 124,475,904), L
layers, C width, T context: 746,855,424 + 56,623,104 = 803,478,528 for GPT-2 small.
(nanoGPT's estimate_mfu counts the attention as 12 L C T, not halved for the causal mask:
860,101,632; dtrain check's 3 x forward FLOPs: 799,739,136; both in the JSON.) MFU = tokens/s
x FLOPs per token / peak. The peak is the card's dense bf16 tensor rate, found from
torch.cuda.get_device_name: H100 SXM ("H100 80GB HBM3", "H100 SXM") and H200 989.4 TFLOP/s,
H100 PCIe 756. Another card (NVL ones included) has one only with --peak-tflops (which also
overrides the table); without one MFU is left out and its bar is UNMEASURED.

Time budget: --seconds-budget S (default 150) for the whole run. Before each round its runs
are costed (a run's cost from the last run of its kind: start-up + steps x step time; guesses
before one ran); when the round does not fit in what is left its timed steps shrink (to 10
bf16 and 3 fp32 steps at least), and when even that does not fit it is given up (never the
first bf16 round), so a short budget loses the last rounds of the order above first. A run
that cannot fit in what is left is not started; torch.compile's first run may take what is
left (at most --compile-timeout) and is ended past it. What was cut is printed and listed in
the JSON ("cuts") and in a "time budget" row.

--dry-run (no GPU needed): the configuration, parameter count, FLOPs per token, peaks, bars and
plan; writes the token files and jobs into --work and prints them; runs `dtrain check` on each
job when the binary is there (again with --set job.device=cpu when it refuses cuda for want of
a GPU, and says so).

--device cpu --tiny (not in --help): the whole run on a toy GPT (2 layers, 64 dims, context 64)
on the CPU, dtrain and the peer both, to try this script where there is no GPU.

Prints a table and writes every figure as JSON (--json; its "rows" are what
scripts/gpu/summary.py lists). Exit status: 0 when every bar measured passed (UNMEASURED is
not a failure), 1 when one failed, 2 on a usage error or a missing dtrain binary.

Usage: scripts/bench/gpt_gpu_vs_pytorch.py [--dtrain PATH] [--batch 8] [--warmup 10] [--steps 30]
           [--rounds 3] [--fp32-steps 10] [--fp32-rounds 1] [--seconds-budget 150]
           [--compile-timeout 240] [--peak-tflops T] [--python PATH] [--work DIR] [--json FILE]
       scripts/bench/gpt_gpu_vs_pytorch.py --dry-run [--work DIR] [--dtrain PATH]
"""
import argparse
import array
import json
import os
import queue
import random
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "gpu"))
import bench_step  # noqa: E402  (parse_json, step_digest: `dtrain bench step --json`'s object)
import gpu_vs_pytorch as gpu_bench  # noqa: E402  (Peer, toml_str, last_lines)

# GPT-2 small; --tiny (a debugging aid: the whole benchmark on a CPU in seconds) a toy of it.
GPT2_SMALL = {"layers": 12, "heads": 12, "dim": 768, "context": 1024, "vocab": 50304, "data_vocab": 50257}
TINY = {"layers": 2, "heads": 2, "dim": 64, "context": 64, "vocab": 512, "data_vocab": 500}
TRAIN_TOKENS, VAL_TOKENS, SEED = 4 * 2 ** 20, 64 * 1024 + 1, 1
LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 6e-4, 0.9, 0.95, 1e-8, 0.1
EAGER_BAR, COMPILE_BAR, MFU_BAR = 1.25, 1.0, 0.45
# Dense bf16 tensor-core peaks (FLOP/s) by the device name: (card, peak, the name holds all the
# words of one of these, the name holds none of these).
PEAKS = [("H100 PCIe", 756e12, [("H100", "PCIE")], ()),
         ("H100 SXM", 989.4e12, [("H100", "HBM3"), ("H100", "SXM")], ("NVL", "PCIE")),
         ("H200", 989.4e12, [("H200",)], ("NVL",))]
# PyTorch's settings: name -> (torch.compile, bf16 autocast, TF32, the precision dtrain runs against it).
TORCH_SETTINGS = {"eager_bf16": (False, True, True, "bf16"), "compile_bf16": (True, True, True, "bf16"),
                  "eager_tf32": (False, False, True, "tf32"), "eager_fp32": (False, False, False, "fp32")}
ROUND_ITEMS = {"bf16": [("dtrain", "bf16"), ("torch", "eager_bf16"), ("torch", "compile_bf16")],
               "fp32": [("dtrain", "tf32"), ("torch", "eager_tf32"), ("dtrain", "fp32"), ("torch", "eager_fp32")]}
MIN_STEPS = {"bf16": 10, "fp32": 3}
TORCH_REWARM = 3  # warm-up steps of a setting's later runs (its model is warm)
BATCH_POOL = 4
# First guesses of a run's cost, before one of its kind has run: seconds a step per precision
# (an H100), dtrain's start-up (CUDA, the model, the data), the peer's model build, a compile.
GUESS_STEP_S = {"bf16": 0.04, "tf32": 0.08, "fp32": 0.3}
GUESS_DTRAIN_START_S, GUESS_TORCH_BUILD_S, GUESS_COMPILE_S, TORCH_REQUEST_S = 10.0, 5.0, 60.0, 1.0
GRACE_S = 10  # a run's time-out past the budget's end


def model_cfg(a):
    return TINY if a.tiny else GPT2_SMALL


def param_count(m):
    """nanoGPT's layout, tied: V C + T C + L (12 C^2 + 13 C) + 2 C (per block: two layer norms
    4 C, qkv 3 C^2 + 3 C, projection C^2 + C, fc1 4 C^2 + 4 C, fc2 4 C^2 + C; then ln_f)."""
    c = m["dim"]
    return m["vocab"] * c + m["context"] * c + m["layers"] * (12 * c * c + 13 * c) + 2 * c


def flops_per_token(m):
    """{"llmc": 6 N + 6 L C T (the one used), "nanogpt": 6 N + 12 L C T, "six_n": 6 N}."""
    n, lct = param_count(m), m["layers"] * m["dim"] * m["context"]
    return {"llmc": 6 * n + 6 * lct, "nanogpt": 6 * n + 12 * lct, "six_n": 6 * n}


def peak_of(gpu, tflops):
    """(peak FLOP/s or None, what it is)."""
    if tflops:
        return tflops * 1e12, f"--peak-tflops {tflops:g}"
    name = (gpu or "").upper()
    for label, peak, alternatives, nots in PEAKS:
        if any(all(w in name for w in words) for words in alternatives) and not any(w in name for w in nots):
            return peak, f"{label} dense bf16 {peak / 1e12:g} TFLOP/s"
    return None, f"no dense bf16 peak known for {gpu or 'this device'}; give --peak-tflops"


# ---------------------------------------------------------------------------- files

def write_tokens(path, n, vocab, seed):
    """n ids below vocab in llm.c's format (uint16 after a 256-int32 header: magic, version,
    count); a file already there under this name (the count, vocabulary and seed are in it) is
    kept."""
    header = struct.pack(f"<{LLMC_HEADER_INTS}i", LLMC_MAGIC, LLMC_VERSION, n, *[0] * (LLMC_HEADER_INTS - 3))
    if os.path.exists(path) and os.path.getsize(path) == len(header) + 2 * n:
        return path
    raw = array.array("H", random.Random(seed).randbytes(2 * n))
    ids = array.array("H", [(v * vocab) >> 16 for v in raw])  # uniform 16 bits scaled below vocab
    if sys.byteorder == "big":
        ids.byteswap()
    with open(path + ".tmp", "wb") as f:
        f.write(header)
        f.write(ids.tobytes())
    os.replace(path + ".tmp", path)
    return path


def write_data(work, m):
    v = m["data_vocab"]
    return (write_tokens(os.path.join(work, f"tokens_train_{TRAIN_TOKENS}_v{v}_s{SEED}.bin"), TRAIN_TOKENS, v, SEED),
            write_tokens(os.path.join(work, f"tokens_val_{VAL_TOKENS}_v{v}_s{SEED + 1}.bin"), VAL_TOKENS, v,
                         SEED + 1))


def write_job(a, precision, train_file, val_file):
    m, q = model_cfg(a), gpu_bench.toml_str
    path = os.path.join(a.work, f"gpt_{precision}.toml")
    what = "toy (--tiny)" if a.tiny else "small"
    with open(path, "w") as f:
        f.write(f"""# scripts/bench/gpt_gpu_vs_pytorch.py: GPT-2 {what}, batch {a.batch}, {precision}
[job]
name = "gpt_gpu_{precision}"
run_dir = {q(os.path.join(a.work, "run_" + precision))}
seed = {SEED}
device = "{a.device}"
precision = "{precision}"
[model]
preset = "gpt"
layers = {m["layers"]}
heads = {m["heads"]}
dim = {m["dim"]}
context = {m["context"]}
vocab = {m["vocab"]}
tie_embeddings = true
dropout = 0.0
[data]
dataset = "tokens"
files = {q(train_file)}
validation_files = {q(val_file)}
context = {m["context"]}
vocab = {m["data_vocab"]}
[train]
steps = {a.warmup + a.steps}
batch_size = {a.batch}
eval_batch_size = {a.batch}
eval_every_epoch = false
checkpoint_every_epoch = false
grad_clip_norm = 0.0
[schedule]
type = "constant"
[optimizer]
type = "adamw"
lr = {LR!r}
beta1 = {BETA1!r}
beta2 = {BETA2!r}
eps = 1e-8
weight_decay = {WEIGHT_DECAY!r}
decay_embeddings = true
""")
    return path


def write_jobs(a):
    train_file, val_file = write_data(a.work, model_cfg(a))
    return {p: write_job(a, p, train_file, val_file) for p in ("bf16", "tf32", "fp32")}, (train_file, val_file)


# ---------------------------------------------------------------------------- PyTorch side

def peer_server(a):
    """Answers one JSON line per request line on stdin: {"what": "info"}, {"what": "train",
    "setting": S, "warmup": W, "first_warmup": W1, "steps": N}, {"what": "quit"}."""
    import torch
    import torch.nn.functional as F
    import gpt_vs_pytorch as cpu_gpt  # the nanoGPT-layout model, sized by its module constants
    m = model_cfg(a)
    cpu_gpt.LAYERS, cpu_gpt.HEADS, cpu_gpt.DIM = m["layers"], m["heads"], m["dim"]
    cpu_gpt.CONTEXT, cpu_gpt.VOCAB = m["context"], m["vocab"]
    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    g = torch.Generator(device=dev).manual_seed(SEED)
    pool = torch.randint(0, m["data_vocab"], (BATCH_POOL, a.batch, m["context"] + 1), device=dev, generator=g)
    batches = [(b[:, :-1].contiguous(), b[:, 1:].contiguous()) for b in pool]
    states = {}

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def build(setting):
        compiled = TORCH_SETTINGS[setting][0]
        torch.manual_seed(0)
        with dev:
            net = cpu_gpt.build_model(torch).train()
        params = list(net.parameters())  # the tied table once
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": WEIGHT_DECAY},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        kw = dict(lr=LR, betas=(BETA1, BETA2), eps=EPS)
        try:
            opt, fused = torch.optim.AdamW(groups, fused=True, **kw), True
        except (RuntimeError, TypeError, ValueError):  # a torch without a fused AdamW for this device
            opt, fused = torch.optim.AdamW(groups, **kw), False

        def forward_loss(x, y):
            return F.cross_entropy(net(x).view(-1, m["vocab"]), y.view(-1))

        return {"net": net, "opt": opt, "fused": fused, "i": 0, "sdpa": "flash only" if cuda else "the CPU's",
                "fn": torch.compile(forward_loss) if compiled else forward_loss,
                "params": sum(p.numel() for p in params)}

    def set_flags(setting, st):
        _, bf16, tf32, _ = TORCH_SETTINGS[setting]
        if not cuda:
            return
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        flash_only = bf16 and st["sdpa"] == "flash only"
        b = torch.backends.cuda
        b.enable_flash_sdp(True)
        for name in ("enable_mem_efficient_sdp", "enable_math_sdp", "enable_cudnn_sdp"):
            if hasattr(b, name):
                getattr(b, name)(not flash_only)

    def step(setting, st):
        x, y = batches[st["i"] % len(batches)]
        st["i"] += 1
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=TORCH_SETTINGS[setting][1]):
            loss = st["fn"](x, y)
        loss.backward()
        st["opt"].step()
        st["opt"].zero_grad(set_to_none=True)
        return loss

    def train(req):
        setting, n = req["setting"], req["steps"]
        out = {"setting": setting, "built": setting not in states}
        t = time.perf_counter()
        if out["built"]:
            states[setting] = build(setting)
        st = states[setting]
        set_flags(setting, st)
        warm = req["first_warmup"] if out["built"] else req["warmup"]
        if out["built"]:  # the first step alone: a compile happens here
            try:
                step(setting, st)
                sync()
            except Exception as e:  # noqa: BLE001  flash refused: every backend, said so
                if not (cuda and TORCH_SETTINGS[setting][1]):
                    raise
                st["sdpa"] = f"any backend (flash alone refused: {type(e).__name__}: {str(e).splitlines()[0][:160]})"
                st["opt"].zero_grad(set_to_none=True)
                set_flags(setting, st)
                step(setting, st)
                sync()
            out["first_step_s"] = time.perf_counter() - t
            warm -= 1
        for _ in range(max(0, warm)):
            step(setting, st)
        sync()
        out["warmup_s"] = time.perf_counter() - t
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        for _ in range(n):
            loss = step(setting, st)
        sync()
        dt = time.perf_counter() - t0
        tokens = n * a.batch * m["context"]
        out.update({"tokens_per_s": tokens / dt, "step_ms": dt * 1e3 / n, "steps": n, "seconds": dt,
                    "loss": loss.item(), "params": st["params"], "fused_adamw": st["fused"],
                    "sdpa": st["sdpa"] if TORCH_SETTINGS[setting][1] else "PyTorch's choice",
                    "peak_memory_bytes": torch.cuda.max_memory_allocated() if cuda else None})
        if out["built"] and TORCH_SETTINGS[setting][0]:
            out["compile_s"] = max(0.0, out["first_step_s"] - dt / n)
        if cuda:
            torch.cuda.empty_cache()
        return out

    while True:
        line = sys.stdin.readline()
        if not line:
            return
        req = json.loads(line)
        try:
            if req["what"] == "quit":
                return
            if req["what"] == "info" and not (hasattr(F, "scaled_dot_product_attention") and hasattr(torch, "compile")):
                out = {"error": f"torch {torch.__version__} has no scaled_dot_product_attention or torch.compile: "
                                f"the peer needs torch >= 2.0 (--python)"}
            elif req["what"] == "info":
                out = {"gpu": torch.cuda.get_device_name(dev) if cuda else "cpu", "torch": torch.__version__,
                       "cuda": torch.version.cuda, "device": str(dev), "pid": os.getpid(),
                       "flash_available": bool(cuda and getattr(torch.backends.cuda, "is_flash_attention_available",
                                                                lambda: True)())}
            else:
                out = train(req)
        except Exception as e:  # noqa: BLE001  reported to the benchmark, which goes on
            out = {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"}
        print(json.dumps(out), flush=True)


class Peer(gpu_bench.Peer):
    """gpu_vs_pytorch.py's peer process handling, started as this script's --peer in its own
    process group and ended with the group (torch.compile's workers too)."""

    def _start(self):
        log = open(self.log, "a")
        cmd = [self.a.python, os.path.abspath(__file__), "--peer", "--batch", str(self.a.batch),
               "--device", self.a.device] + (["--tiny"] if self.a.tiny else [])
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                  bufsize=1, start_new_session=True)
        log.close()
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True).start()

    def _end(self):
        if self.p:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()
            self.p = None


# ---------------------------------------------------------------------------- dtrain side

def dtrain_run(a, job, steps, timeout, log):
    """({"tokens_per_s", "step_ms", "wall_s", "digest", "phases"}, None) or (None, why)."""
    cmd = [a.dtrain, "bench", "step", job, "--warmup", str(a.warmup), "--steps", str(steps), "--json"]
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"still running after {timeout:.0f} s; ended"
    wall = time.monotonic() - t
    with open(log, "w") as f:
        f.write(" ".join(cmd) + f"\n--- exit {p.returncode}, {wall:.1f} s\n--- stdout\n{p.stdout}\n"
                f"--- stderr\n{p.stderr}")
    if p.returncode != 0:
        errors = [line for line in p.stderr.splitlines() if line.startswith("dtrain: error:")]
        why = errors[-1][len("dtrain: error:"):].strip() if errors else gpu_bench.last_lines(p.stderr + p.stdout, 1)
        return None, f"exit {p.returncode}: {why or 'no output'}"
    obj = bench_step.parse_json(p.stdout)
    ms = obj.get("step_ms") if obj else None
    if not isinstance(ms, (int, float)) or ms <= 0:
        return None, f"no step_ms in its output: {gpu_bench.last_lines(p.stdout, 1)[:200]}"
    try:
        digest = bench_step.step_digest(obj)
    except (KeyError, TypeError, ValueError):
        digest = bench_step.digest(obj)
    tokens = a.batch * model_cfg(a)["context"]
    return {"tokens_per_s": tokens * 1e3 / ms, "step_ms": ms, "wall_s": wall, "steps": steps,
            "digest": digest, "phases": obj.get("phases")}, None


# ---------------------------------------------------------------------------- the runs

def precision_of(item):
    side, what = item
    return what if side == "dtrain" else TORCH_SETTINGS[what][3]


def guess(a, item, n, first):
    """A run's seconds before one of its kind has run."""
    side, what = item
    step = GUESS_STEP_S[precision_of(item)]
    if side == "dtrain":
        return GUESS_DTRAIN_START_S + (a.warmup + n) * step
    if first:
        return GUESS_TORCH_BUILD_S + (GUESS_COMPILE_S if TORCH_SETTINGS[what][0] else 0) + (a.warmup + n) * step
    return TORCH_REQUEST_S + (TORCH_REWARM + n) * step


def label_of(item):
    side, what = item
    if side == "dtrain":
        return f"dtrain {what}"
    return f"PyTorch {what.replace('_', ' ')}"


class Bench:
    def __init__(self, a, jobs):
        self.a, self.jobs = a, jobs
        self.started = time.monotonic()
        self.deadline = self.started + a.seconds_budget
        self.steps = {"bf16": a.steps, "fp32": a.fp32_steps}
        self.fig = {item: {"runs": [], "error": None, "skipped": []}
                    for kind in ROUND_ITEMS for item in ROUND_ITEMS[kind]}
        self.cost = {}  # item -> {"overhead": s, "step_s": s} from its last run
        self.cuts = []
        self.peer = Peer(a)

    def elapsed(self):
        return time.monotonic() - self.started

    def left(self):
        return self.deadline - time.monotonic()

    def say(self, text):
        print(f"  {text} [{self.elapsed():.0f} s]", flush=True)

    def cut(self, text):
        self.cuts.append(text)
        self.say("cut: " + text)

    def estimate(self, item, n):
        c = self.cost.get(item)
        if c:
            return c["overhead"] + ((self.a.warmup if item[0] == "dtrain" else TORCH_REWARM) + n) * c["step_s"]
        g = guess(self.a, item, n, first=not self.fig[item]["runs"])
        started = [v["overhead"] for k, v in self.cost.items() if k[0] == "dtrain"]
        if item[0] == "dtrain" and started:  # another precision's start-up in place of the guess
            g += started[-1] - GUESS_DTRAIN_START_S
        return g

    def round_cost(self, kind, steps):
        """What a round's runs are expected to take, less failed ones and torch.compile's first run
        (it takes what is left, run_item) or a first run the budget left out before."""
        def counts(item):
            f = self.fig[item]
            first_compile = item[0] == "torch" and TORCH_SETTINGS[item[1]][0] and not f["runs"]
            return not f["error"] and not first_compile and (f["runs"] or not f["skipped"])

        return sum(self.estimate(item, steps) for item in ROUND_ITEMS[kind] if counts(item))

    def fit(self, kind, rnd):
        """The timed steps round rnd of kind runs with to fit in what is left, or None: it is given
        up. The first bf16 round always runs (its runs that cannot fit are not started)."""
        left, full = self.left(), self.steps[kind]
        for f in (1.0, 0.75, 0.5, 0.35, 0.25, 0.0):
            steps = min(full, max(MIN_STEPS[kind], int(full * f)))
            if self.round_cost(kind, steps) <= left:
                break
        else:
            if kind != "bf16" or rnd:
                self.cut(f"{kind} round {rnd + 1} given up: about {self.round_cost(kind, steps):.0f} s needed, "
                         f"{max(0.0, left):.0f} s left")
                for item in ROUND_ITEMS[kind]:
                    self.fig[item]["skipped"].append(f"{kind} round {rnd + 1}")
                return None
        if steps < full:
            self.cut(f"{kind} round {rnd + 1}: {steps} timed steps instead of {full}")
        return steps

    def run_item(self, item, n):
        side, what = item
        fig = self.fig[item]
        if fig["error"]:
            return
        est, left = self.estimate(item, n), self.left()
        first_compile = side == "torch" and TORCH_SETTINGS[what][0] and not fig["runs"]
        if (left < min(est, 30) if first_compile else left < est) or left < 5:
            fig["skipped"].append(f"{label_of(item)} run {len(fig['runs']) + len(fig['skipped']) + 1}")
            self.cut(f"{fig['skipped'][-1]} not started: about {est:.0f} s needed, {max(0.0, left):.0f} s left")
            return
        t = time.monotonic()
        if side == "dtrain":
            k = len(fig["runs"]) + 1
            got, err = dtrain_run(self.a, self.jobs[what], n, max(30.0, min(3 * est + 30, left + GRACE_S)),
                                  os.path.join(self.a.work, f"dtrain_{what}_{k}.log"))
        else:
            timeout = (min(self.a.compile_timeout, left + GRACE_S) if first_compile
                       else max(30.0, min(3 * est + 60, left + GRACE_S)))
            got, err = self.peer.ask({"what": "train", "setting": what, "warmup": TORCH_REWARM,
                                      "first_warmup": self.a.warmup, "steps": n}, timeout)
        wall = time.monotonic() - t
        if err and first_compile and "no answer" in err:
            err = f"torch.compile's first run did not end within {timeout:.0f} s (--compile-timeout, the budget); ended"
        if err:
            fig["error"] = err
            self.say(f"{label_of(item)}: {'UNMEASURED: ' if side == 'dtrain' else ''}{err}")
            return
        got["wall_s"] = wall
        fig["runs"].append(got)
        step_s = got["step_ms"] / 1e3
        if side == "dtrain":
            self.cost[item] = {"overhead": max(0.0, wall - (self.a.warmup + n) * step_s), "step_s": step_s}
        elif got.get("built"):
            self.cost[item] = {"overhead": TORCH_REQUEST_S, "step_s": step_s}
        else:
            self.cost[item] = {"overhead": max(0.0, wall - (TORCH_REWARM + n) * step_s), "step_s": step_s}
        extra = ""
        if got.get("compile_s") is not None:
            extra = f"; compile {got['compile_s']:.0f} s (excluded)"
        elif side == "dtrain" and len(fig["runs"]) == 1:
            extra = f"; {got['digest']}"
        self.say(f"{label_of(item)}: {got['tokens_per_s']:,.0f} tokens/s ({got['step_ms']:.1f} ms/step, "
                 f"{n} steps, {wall:.1f} s){extra}")

    def plan(self):
        """The rounds in the order they run: bf16 rounds 1 and 2, the first fp32 round, the other
        bf16 rounds, the other fp32 rounds (what comes later is what a short budget gives up)."""
        a = self.a
        bf, fp = [("bf16", r) for r in range(a.rounds)], [("fp32", r) for r in range(a.fp32_rounds)]
        return bf[:2] + fp[:1] + bf[2:] + fp[1:]

    def run(self):
        plan = self.plan()
        info, err = self.peer.ask({"what": "info"}, timeout=max(30.0, min(180.0, self.left())))
        if err:
            info = {"gpu": nvidia_smi_name(), "error": err}
            self.say(f"{err}: no PyTorch runs")
            for item, fig in self.fig.items():
                if item[0] == "torch":
                    fig["error"] = err
        else:
            self.say(f"PyTorch {info['torch']} (CUDA {info['cuda']}) on {info['gpu']}; flash attention "
                     f"{'available' if info['flash_available'] else 'NOT available'}")
        for kind, rnd in plan:
            steps = self.fit(kind, rnd)
            if steps is None:
                continue
            items = ROUND_ITEMS[kind]
            for item in (items if rnd % 2 == 0 else sorted(items, key=lambda it: it[0] == "dtrain")):
                self.run_item(item, steps)
        self.peer.close()
        return info


def nvidia_smi_name():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                           capture_output=True, text=True, timeout=20)
        return p.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


# ---------------------------------------------------------------------------- figures and bars

def summarize(a, b, info):
    m = model_cfg(a)
    fpt = flops_per_token(m)["llmc"]
    peak, peak_what = peak_of(info.get("gpu"), a.peak_tflops)
    figures = {}
    for item, f in b.fig.items():
        runs = f["runs"]
        tps = statistics.median(r["tokens_per_s"] for r in runs) if runs else None
        why = f["error"] or (None if runs else "cut by the time budget" if f["skipped"] else "not run")
        figures[label_of(item)] = {
            "side": item[0], "what": item[1], "precision": precision_of(item), "runs": runs, "rounds": len(runs),
            "tokens_per_s": tps, "step_ms": statistics.median(r["step_ms"] for r in runs) if runs else None,
            "tflops": tps * fpt / 1e12 if tps else None, "mfu": tps * fpt / peak if tps and peak else None,
            "compile_s": next((r["compile_s"] for r in runs if r.get("compile_s") is not None), None),
            "peak_memory_bytes": max((r.get("peak_memory_bytes") or 0 for r in runs), default=None) or None,
            "unmeasured": why, "error": f["error"], "skipped": f["skipped"]}
    counts = {"dtrain": a.check_flops.get("params"),
              "PyTorch": next((r["params"] for f in b.fig.values() for r in f["runs"] if r.get("params")), None)}
    for side, count in counts.items():
        if count is not None and count != param_count(m):
            print(f"warning: {side}'s model has {count:,} parameters, not {param_count(m):,}", flush=True)
    rows = [ratio_row(figures, "bf16 / eager", "dtrain bf16", "PyTorch eager bf16", EAGER_BAR),
            ratio_row(figures, "bf16 / compile", "dtrain bf16", "PyTorch compile bf16", COMPILE_BAR),
            mfu_row(figures, peak, peak_what),
            ratio_row(figures, "tf32", "dtrain tf32", "PyTorch eager tf32", None, "PyTorch: fp32, TF32 on"),
            ratio_row(figures, "fp32", "dtrain fp32", "PyTorch eager fp32", None, "exact fp32, TF32 off on both")]
    if b.cuts:
        rows.append({"item": "time budget", "bar": None, "pass": None, "result": "-",
                     "text": f"{a.seconds_budget:.0f} s, {b.elapsed():.0f} s used; cut: " + "; ".join(b.cuts)})
    return {"gpu": info.get("gpu"), "torch": info.get("torch"), "cuda": info.get("cuda"),
            "peer_error": info.get("error"), "flash_available": info.get("flash_available"),
            "model": {**m, "params": param_count(m), "params_dtrain": counts["dtrain"],
                      "params_pytorch": counts["PyTorch"], "tied": True, "dropout": 0.0},
            "batch": a.batch, "tokens_per_step": a.batch * m["context"],
            "flops_per_token": fpt, "flops_per_token_variants": {
                **flops_per_token(m), "dtrain_check_3x_forward": a.check_flops.get("per_token")},
            "flops_formula": "6 N + 6 L C T (llm.c train_gpt2.cu gpt2_estimate_mfu), N all parameters",
            "peak_flops": peak, "peak": peak_what, "device": a.device,
            "warmup": a.warmup, "steps": {"bf16": a.steps, "fp32": a.fp32_steps},
            "rounds": a.rounds, "fp32_rounds": a.fp32_rounds, "seconds_budget": a.seconds_budget,
            "seconds": b.elapsed(), "cuts": b.cuts, "figures": figures, "rows": rows,
            "optimizer": {"type": "adamw", "lr": LR, "betas": [BETA1, BETA2], "eps": EPS,
                          "weight_decay": WEIGHT_DECAY, "decayed": "every 2-D tensor (embeddings too)"},
            "method": "dtrain: `dtrain bench step --json` step_ms, one process per run; PyTorch: one persistent "
                      "process, N steps between torch.cuda.synchronize(); medians over the runs; tokens/s = "
                      "B x context / step time; MFU = tokens/s x flops_per_token / peak_flops"}


def side_text(f, name):
    if f["tokens_per_s"] is None:
        return f"{name} UNMEASURED ({f['unmeasured']})"
    return f"{name} {f['tokens_per_s']:,.0f} tokens/s"


def ratio_row(figures, item, dname, tname, bar, note=""):
    d, t = figures[dname], figures[tname]
    rounds = min(d["rounds"], t["rounds"])
    ratio = d["tokens_per_s"] / t["tokens_per_s"] if d["tokens_per_s"] and t["tokens_per_s"] else None
    of = (f"{note + '; ' if note else ''}median of {d['rounds']} / {t['rounds']} run(s)"
          + (f"; bar >= {bar:g}x" if bar else "; no bar"))
    if t.get("compile_s") is not None:
        of += f"; compile {t['compile_s']:.0f} s excluded"
    text = f"{side_text(d, dname)}, {side_text(t, tname)}" + (f": {ratio:.2f}x" if ratio else "") + f" ({of})"
    if bar is None:
        ok, result = None, "-"
    elif ratio is None:
        ok, result = None, "UNMEASURED"
    else:
        ok = ratio >= bar
        result = "PASS" if ok else "FAIL"
    return {"item": item, "bar": bar, "ratio": ratio, "rounds": rounds, "pass": ok, "result": result, "text": text}


def mfu_row(figures, peak, peak_what):
    d = figures["dtrain bf16"]
    others = ", ".join(f"{n.replace('PyTorch ', '')} {figures[n]['mfu']:.1%}" for n in
                       ("PyTorch eager bf16", "PyTorch compile bf16") if figures[n]["mfu"] is not None)
    if d["mfu"] is not None:
        ok = d["mfu"] >= MFU_BAR
        text = (f"dtrain bf16 {d['mfu']:.1%} ({d['tflops']:.1f} TFLOP/s of {peak_what}; bar >= {MFU_BAR:.0%})"
                + (f"; PyTorch {others}" if others else ""))
        return {"item": "bf16 MFU", "bar": MFU_BAR, "mfu": d["mfu"], "pass": ok, "result": "PASS" if ok else "FAIL",
                "text": text}
    why = d["unmeasured"] if d["tokens_per_s"] is None else peak_what
    return {"item": "bf16 MFU", "bar": MFU_BAR, "mfu": None, "pass": None, "result": "UNMEASURED",
            "text": f"dtrain bf16 MFU UNMEASURED ({why}; bar >= {MFU_BAR:.0%})"
                    + (f"; achieved {d['tflops']:.1f} TFLOP/s" if d["tflops"] else "")}


def print_table(out):
    m = out["model"]
    print(f"\n{out['gpu']}; PyTorch {out['torch']}; GPT {m['layers']} layers, {m['heads']} heads, {m['dim']} dims, "
          f"context {m['context']}, vocab {m['vocab']}, batch {out['batch']} ({out['tokens_per_step']:,} tokens a "
          f"step); {out['warmup']} warm-up + {out['steps']['bf16']} timed steps (fp32 rows "
          f"{out['steps']['fp32']}; fewer where the budget cut them); FLOPs per token {out['flops_per_token']:,} "
          f"(6N + 6LCT); peak: {out['peak']}")
    print(f"{'run':22} {'tokens/s':>10} {'ms/step':>8} {'TFLOP/s':>8} {'MFU':>6} {'runs':>4}  note")
    for name, f in out["figures"].items():
        if f["tokens_per_s"] is None:
            print(f"{name:22} {'-':>10} {'-':>8} {'-':>8} {'-':>6} {0:>4}  UNMEASURED: {f['unmeasured']}")
            continue
        note = []
        if f["compile_s"] is not None:
            note.append(f"compile {f['compile_s']:.0f} s excluded")
        if f["peak_memory_bytes"]:
            note.append(f"peak memory {f['peak_memory_bytes'] / 2 ** 30:.1f} GiB")
        sdpa = next((r.get("sdpa") for r in f["runs"] if r.get("sdpa")), None)
        if sdpa and f["side"] == "torch" and f["precision"] == "bf16":
            note.append(f"SDPA {sdpa}")
        mfu = f"{f['mfu']:.1%}" if f["mfu"] is not None else "-"
        print(f"{name:22} {f['tokens_per_s']:>10,.0f} {f['step_ms']:>8.1f} {f['tflops']:>8.1f} {mfu:>6} "
              f"{f['rounds']:>4}  {', '.join(note)}")
    for r in out["rows"]:
        print(f"{r['item']}: {r['text']}" + (f" {r['result']}" if r["result"] != "-" else ""))


# ---------------------------------------------------------------------------- dry run

def dtrain_check(a, job):
    """`dtrain check JOB` (again with --set job.device=cpu when cuda is refused): (text, params,
    forward FLOPs per sequence)."""
    if not os.path.exists(a.dtrain):
        return f"{a.dtrain} not found: not checked", None, None
    note = ""
    p = subprocess.run([a.dtrain, "check", job], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and a.device == "cuda":
        why = gpu_bench.last_lines(p.stderr, 1).replace("dtrain: error: ", "")
        note = f"refused as written (exit {p.returncode}: {why}); with --set job.device=cpu: "
        p = subprocess.run([a.dtrain, "check", job, "--set", "job.device=cpu"], capture_output=True, text=True,
                           timeout=120)
    total = [line.split() for line in p.stdout.splitlines() if line.startswith("total ")]
    if p.returncode != 0 or not total:
        return note + f"no: exit {p.returncode}: {gpu_bench.last_lines(p.stderr + p.stdout, 1)}", None, None
    params, flops = (int(v.replace(",", "")) for v in total[-1][-2:])
    return note + "valid", params, flops


def dry_run(a, jobs, files):
    m = model_cfg(a)
    n, fpt = param_count(m), flops_per_token(m)
    tokens = a.batch * m["context"]
    c, lct = m["dim"], m["layers"] * m["dim"] * m["context"]
    print(f"GPT: {m['layers']} layers, {m['heads']} heads, {c} dims, context {m['context']}, vocab {m['vocab']} "
          f"(data ids below {m['data_vocab']}), tied embeddings, dropout 0; batch {a.batch} x {m['context']} = "
          f"{tokens:,} tokens a step; AdamW lr {LR:g}, betas {BETA1:g}/{BETA2:g}, eps {EPS:g}, weight decay "
          f"{WEIGHT_DECAY:g} on every 2-D tensor, constant lr, no clipping")
    print(f"parameters: {n:,} = V C + T C + L (12 C^2 + 13 C) + 2 C")
    print(f"FLOPs per token: 6 N + 6 L C T = {6 * n:,} + {6 * lct:,} = {fpt['llmc']:,} (llm.c train_gpt2.cu "
          f"gpt2_estimate_mfu); nanoGPT's 6 N + 12 L C T = {fpt['nanogpt']:,}; a step "
          f"{fpt['llmc'] * tokens / 1e12:.2f} TFLOP")
    for label, peak, alternatives, nots in PEAKS:
        at = MFU_BAR * peak / fpt["llmc"]
        names = " or ".join("+".join(words) for words in alternatives)
        print(f"  peak {label:9} (the device name has {names}{', not ' + ' or '.join(nots) if nots else ''}): "
              f"{peak / 1e12:g} TFLOP/s dense bf16; the MFU bar {MFU_BAR:.0%} = {at:,.0f} tokens/s = "
              f"{tokens / at * 1e3:.1f} ms a step")
    if a.peak_tflops:
        print(f"  --peak-tflops {a.peak_tflops:g} overrides the table")
    print(f"bars: dtrain bf16 tokens/s >= {EAGER_BAR:g} x PyTorch eager bf16 (autocast bf16, SDPA flash alone, "
          f"fused AdamW); >= {COMPILE_BAR:g} x PyTorch torch.compile bf16 (compile time excluded); dtrain bf16 "
          f"MFU >= {MFU_BAR:.0%}. No bar: dtrain tf32 vs PyTorch fp32 TF32 on, dtrain fp32 (exact, TF32 off) "
          f"vs PyTorch fp32 TF32 off")
    b = Bench(a, jobs)

    def cost(kind, first):
        return sum(guess(a, item, b.steps[kind], first) for item in ROUND_ITEMS[kind])

    print(f"plan, in this order: {' '.join(f'{k}#{r + 1}' for k, r in b.plan())}; a bf16 round: "
          f"{', '.join(label_of(i) for i in ROUND_ITEMS['bf16'])} ({a.warmup} warm-up + {a.steps} timed steps; "
          f"PyTorch's later runs {TORCH_REWARM} warm-up); an fp32 round: "
          f"{', '.join(label_of(i) for i in ROUND_ITEMS['fp32'])} ({a.fp32_steps} timed steps)")
    print(f"first guesses (an H100; measured runs replace them): the first bf16 round {cost('bf16', True):.0f} s "
          f"(torch.compile {GUESS_COMPILE_S:g} s of it), later ones {cost('bf16', False):.0f} s, the first fp32 "
          f"round {cost('fp32', True):.0f} s; the budget {a.seconds_budget:.0f} s")
    for f in files:
        print(f"token file {f}: {os.path.getsize(f):,} bytes (llm.c header: magic {LLMC_MAGIC}, version "
              f"{LLMC_VERSION}; uint16 ids)")
    for precision, job in jobs.items():
        text, params, flops = dtrain_check(a, job)
        extra = ""
        if params is not None:
            per_token = 3 * flops / m["context"]
            extra = (f"; its parameters {params:,} ({'the same' if params == n else 'DIFFERENT from ' + f'{n:,}'}), "
                     f"forward {flops:,} FLOPs a sequence: 3 x forward = {per_token:,.0f} a token")
        print(f"job {job} (precision {precision}): dtrain check: {text}{extra}")
    print(f"--- {jobs['bf16']}")
    with open(jobs["bf16"]) as f:
        print(f.read().rstrip())


# ---------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build-gpu", "dtrain"), help="the dtrain binary")
    ap.add_argument("--batch", type=int, default=8, help="sequences of 1,024 tokens a step (default 8)")
    ap.add_argument("--warmup", type=int, default=10, help="warm-up steps of each dtrain run and of each PyTorch "
                                                           "setting's first run (default 10)")
    ap.add_argument("--steps", type=int, default=30, help="timed steps of the bf16 runs (default 30)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the bf16 runs (default 3)")
    ap.add_argument("--fp32-steps", type=int, default=10, help="timed steps of the fp32 and tf32 runs (default 10)")
    ap.add_argument("--fp32-rounds", type=int, default=1, help="rounds of the fp32 and tf32 runs (default 1; 0 = none)")
    ap.add_argument("--seconds-budget", type=float, default=150, help="seconds for the whole run (default 150): "
                    "steps and rounds shrink to fit")
    ap.add_argument("--compile-timeout", type=float, default=240, help="the most seconds torch.compile's first run "
                    "may take (default 240; never past the budget)")
    ap.add_argument("--peak-tflops", type=float, default=0, help="the card's dense bf16 peak in TFLOP/s for MFU "
                    "(default: from the device name, H100 / H200)")
    ap.add_argument("--python", default=sys.executable, help="the python whose torch is the peer (default: this one)")
    ap.add_argument("--work", default="", help="folder for the token files, jobs and logs (default: a temporary one)")
    ap.add_argument("--json", default="", help="write the figures here")
    ap.add_argument("--dry-run", action="store_true", help="print the configuration, FLOPs and jobs; no GPU")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help=argparse.SUPPRESS)  # cpu: a debug aid
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # a toy GPT (debugging on a CPU)
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.peer:
        return peer_server(a)
    if min(a.batch, a.warmup, a.steps, a.rounds, a.fp32_steps) < 1 or a.fp32_rounds < 0 or a.seconds_budget <= 0:
        print("gpt_gpu_vs_pytorch: --batch, --warmup, --steps, --rounds and --fp32-steps must be at least 1, "
              "--fp32-rounds at least 0, --seconds-budget positive", file=sys.stderr)
        return 2
    a.dtrain = os.path.abspath(a.dtrain)
    if not shutil.which(a.python):
        print(f"gpt_gpu_vs_pytorch: --python {a.python} is not an executable", file=sys.stderr)
        return 2
    if not a.dry_run and not os.path.exists(a.dtrain):
        print(f"gpt_gpu_vs_pytorch: {a.dtrain} not found; build it (scripts/gpu/check.sh build) or pass --dtrain",
              file=sys.stderr)
        return 2
    a.check_flops = {}
    with tempfile.TemporaryDirectory(prefix="dtrain-gpt-gpu-") as tmp:
        a.work = os.path.abspath(a.work) if a.work else tmp
        os.makedirs(a.work, exist_ok=True)
        jobs, files = write_jobs(a)
        if a.dry_run:
            dry_run(a, jobs, files)
            return 0
        _, params, flops = dtrain_check(a, jobs["bf16"])
        if flops:
            a.check_flops = {"params": params, "per_token": 3 * flops // model_cfg(a)["context"]}
        print(f"GPT-2 {'toy' if a.tiny else 'small'} on {a.device}, batch {a.batch}: dtrain {a.dtrain}, PyTorch "
              f"{a.python}; budget {a.seconds_budget:.0f} s; work {a.work}", flush=True)
        b = Bench(a, jobs)
        try:
            info = b.run()
        finally:
            b.peer.close()
        out = summarize(a, b, info)
    print_table(out)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
        print(f"figures written to {a.json}")
    return 1 if any(r["pass"] is False for r in out["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
