#!/usr/bin/python3
"""dtrain's GPT after 5 AdamW steps against a float64 PyTorch twin started from dtrain's own weights.

Issue 33, point 6. One `dtrain train` of a tiny byte-level GPT (2 layers, 2 heads, 32 dims,
context 16, no dropout, tied lm_head) on a generated English-like text of about 6 KB
(deterministic: the same bytes on every machine), batch 4, AdamW (lr 1e-3, betas 0.9 / 0.999,
eps 1e-8, --weight-decay 0.1, constant lr, no clipping), one thread, for --steps + 1 steps,
with a checkpoint after every step. Then, in PyTorch in float64:

  start  step 1's checkpoint: model.safetensors (every weight) and optimizer.safetensors
         (adam_m.NAME, adam_v.NAME: AdamW's moments after update 1), so the twin continues
         from step 1 exactly as dtrain did, and any difference comes from steps 2 to 6 alone
         (step 1's update, where m / sqrt(v) is +-1 for every element whatever its gradient,
         is not replayed);
  model  built from the checkpoint's names and shapes, as models/gpt_preset.cpp lays it out:
         wte (token table [vocab, C]) + wpe (positions [context, C]); per block h{b}_:
         ln1 (LayerNorm, eps 1e-5), qkv (dense: y = x W^T + b, W [3C, C], PyTorch's Linear
         layout), causal self-attention (each token's row of qkv is q [0, C), k [C, 2C),
         v [2C, 3C), head h the columns [h d, (h+1) d) of each, scores q k^T / sqrt(d),
         exact softmax over keys 0..i), attention_proj, residual add; ln2, fc1 [4C, C], GELU
         (tanh form), fc2 [C, 4C], residual add; ln_f; lm_head without bias whose weight is
         wte's table (tied: both uses add to one gradient). Loss: the mean cross-entropy over
         every token of the batch;
  data   the batches dtrain used: the corpus's bytes, the last llround(0.1 n) of them
         validation, the rest training; window i is training bytes [16 i, 16 i + 17) (input
         the first 16, labels the last 16); with [data] shuffle = false batch k (0-based)
         of an epoch is windows [4 k, 4 k + 4) (the last of an epoch may be short), so step
         s is batch s - 1;
  update AdamW by hand in float64, core/optim/update_rules.h's formula for update t (the
         1-based step number, t = 2..6 here):
           p <- p (1 - lr wd)                (decoupled decay, before the step; masked below)
           m <- beta1 m + (1 - beta1) g
           v <- beta2 v + (1 - beta2) g^2
           p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
         The decay applies by default to the matrices only: the rank-2 weights of the dense
         layers (qkv, attention_proj, fc1, fc2; an untied lm_head's too), not to biases,
         layer norms, the token embedding (also the tied lm_head) or the position embedding.
         (dtrain's default). --decay-all decays every tensor, on both sides ([optimizer]
         decay_1d = true and decay_embeddings = true in dtrain's job).

Compares the twin's weights after step --steps + 1 with dtrain's checkpoint of that step:
the largest |dtrain - twin| per tensor, overall, and relative to the largest weight, beside
how far the weights moved over those steps. The bar is 1e-5 absolute: the steps move weights
by about lr per step (5e-3 in all); dtrain computes in float32 and the twin in float64. Where
the two differ by rounding alone:
  - most tensors: within a few float32 steps of the weight (6e-8 at 1, the layer norms'
    scale), a few 1e-7 after 5 steps;
  - the key biases (qkv.bias columns [C, 2C)): their exact gradient is zero (adding b to
    every key adds q.b to every score of a query's row, which the softmax ignores), so
    dtrain's gradient there is float32 noise, ~1e-11, and Adam moves them by about
    lr g / eps = 1e-6 per step where the twin's ~1e-19 moves them by nothing: about 2e-6
    after 5 steps, printed apart.
A real difference in a formula (the decay's mask, a bias correction's step count, eps's
place) shows as 1e-4 or more: decaying the layer norms' scales or not is 5 lr wd = 5e-4.
Also prints dtrain's training loss of steps 2..6 (metrics.jsonl) beside the twin's
(informative; the weights decide).

The twin runs in the virtual environment pipeline_vs_one.py makes (~/.cache/dtrain-bench/
torch-venv: the latest torch from PyPI, made here if missing): this script starts under
/usr/bin/python3, runs dtrain, then runs itself under the venv's python for the twin.

Exit status: 0 when max |dtrain - twin| <= 1e-5, 1 when above, 2 on a usage or run error.

Usage: scripts/check/gpt_twin.py [--weight-decay 0.1] [--decay-all] [--lr 1e-3] [--steps 5]
           [--work DIR] [--venv DIR] [--dtrain PATH] [--json FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "dtrain-bench", "torch-venv")

LAYERS, HEADS, DIM, CONTEXT = 2, 2, 32, 16
BATCH = 4
BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
VALIDATION_FRACTION = 0.1
LN_EPS = 1e-5  # layer_norm's default; the gpt preset sets none
CORPUS_BYTES = 6000
SEED = 1
BAR = 1e-5


# ---------------------------------------------------------------------------- the dtrain side
# (plain python3: no numpy or torch needed)

def make_text(size):
    """About `size` bytes of English-like sentences, the same on every machine: the words are
    drawn by a 32-bit linear congruential generator of our own (not Python's random)."""
    det = ["the", "a", "this", "that", "every", "one", "some", "no"]
    adj = ["small", "old", "quiet", "green", "bright", "long", "cold", "gentle", "heavy", "early",
           "strange", "simple"]
    noun = ["river", "house", "garden", "letter", "window", "morning", "teacher", "village", "road",
            "stone", "bird", "ship", "market", "winter", "child", "story"]
    verb = ["sees", "finds", "keeps", "follows", "remembers", "carries", "opens", "watches", "leaves",
            "brings", "holds", "reaches"]
    prep = ["near", "behind", "under", "beyond", "across", "beside", "after", "before"]
    state = [12345]

    def pick(words):
        state[0] = (1664525 * state[0] + 1013904223) % 2**32
        return words[(state[0] >> 16) % len(words)]

    def phrase():
        words = [pick(det)]
        if pick([0, 1, 2]) != 0:
            words.append(pick(adj))
        return words + [pick(noun)]

    out, total = [], 0
    while total < size:
        words = phrase() + [pick(verb)] + phrase()
        if pick([0, 1]):
            words += [pick(prep)] + phrase()
        sentence = " ".join(words)
        sentence = sentence[0].upper() + sentence[1:] + pick([".", ".", ".", "!", "?"])
        out.append(sentence)
        total += len(sentence) + 1
    return " ".join(out) + "\n"


def write_job(path, run_dir, text_file, steps, lr, weight_decay, decay_all):
    with open(path, "w") as f:
        f.write(f"""[job]
name = "gpt_twin"
run_dir = {json.dumps(run_dir)}
seed = {SEED}
threads = 1
device = "cpu"
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
files = {json.dumps(text_file)}
context = {CONTEXT}
validation_fraction = {VALIDATION_FRACTION}
shuffle = false
[train]
steps = {steps}
batch_size = {BATCH}
eval_every_epoch = false
eval_every_steps = 0
checkpoint_every_epoch = false
checkpoint_every_steps = 1
keep_last = {steps + 10}
grad_clip_norm = 0.0
label_smoothing = 0.0
[optimizer]
type = "adamw"
lr = {lr!r}
beta1 = {BETA1}
beta2 = {BETA2}
eps = {EPS}
weight_decay = {weight_decay!r}
decay_1d = {"true" if decay_all else "false"}
decay_embeddings = {"true" if decay_all else "false"}
[schedule]
type = "constant"
warmup_steps = 0
""")


def run_dtrain(a, work):
    text_file = os.path.join(work, "text.txt")
    with open(text_file, "w") as f:
        f.write(make_text(CORPUS_BYTES))
    run_dir = os.path.join(work, "run")
    job = os.path.join(work, "gpt_twin.toml")
    write_job(job, run_dir, text_file, a.steps + 1, a.lr, a.weight_decay, a.decay_all)
    p = subprocess.run([a.dtrain, "train", job, "--quiet", "--overwrite"], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"gpt_twin: dtrain train {job} failed ({p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}",
              file=sys.stderr)
        sys.exit(2)
    for step in (1, a.steps + 1):
        if not os.path.isdir(checkpoint_dir(run_dir, step)):
            print(f"gpt_twin: dtrain wrote no checkpoint {checkpoint_dir(run_dir, step)}", file=sys.stderr)
            sys.exit(2)
    return text_file, run_dir


def checkpoint_dir(run_dir, step):
    return os.path.join(run_dir, "checkpoints", f"step-{step:08d}")


def check(a):
    if not os.path.exists(a.dtrain):
        print(f"gpt_twin: {a.dtrain} not found; run scripts/build.sh first (or --dtrain PATH)", file=sys.stderr)
        return 2
    sys.path.insert(0, os.path.join(ROOT, "scripts", "bench"))
    import pipeline_vs_one
    python = pipeline_vs_one.ensure_venv(a.venv)
    with tempfile.TemporaryDirectory(prefix="dtrain-gpt-twin-") as tmp:
        work = a.work or tmp
        os.makedirs(work, exist_ok=True)
        text_file, run_dir = run_dtrain(a, work)
        cmd = [python, os.path.abspath(__file__), "--twin", "--run-dir", run_dir, "--text-file", text_file,
               "--steps", str(a.steps), "--lr", repr(a.lr), "--weight-decay", repr(a.weight_decay)]
        cmd += (["--decay-all"] if a.decay_all else []) + (["--json", a.json] if a.json else [])
        return subprocess.run(cmd).returncode


# ---------------------------------------------------------------------------- the twin
# (the venv's python: torch, numpy)

def training_windows(text_file):
    """The training split's bytes and its number of windows, as datasets/token_corpus.cpp's
    splitOffEnd and datasets/token_windows.cpp cut them."""
    with open(text_file, "rb") as f:
        data = f.read()
    n = len(data)
    val = math.floor(n * VALIDATION_FRACTION + 0.5)  # std::llround of a positive double
    train = data[:n - val]
    return train, (len(train) - 1) // CONTEXT


def batch_windows(step, windows):
    """The windows of step `step` (1-based) with [data] shuffle = false: the sampler's order
    is the identity every epoch and the loader cuts it into batches of BATCH, the last of an
    epoch short (datasets/sampler.cpp, batch_loader.cpp)."""
    per_epoch = -(-windows // BATCH)
    k = (step - 1) % per_epoch
    return list(range(k * BATCH, min((k + 1) * BATCH, windows)))


def run_twin(a):
    import numpy as np
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.dirname(HERE))
    from check_safetensors import read

    torch.set_default_dtype(torch.float64)
    torch.set_num_threads(1)

    def load(path):
        _, tensors, _ = read(path)
        return {name: torch.from_numpy(t.astype(np.float64)) for name, t in tensors}

    first, last = 1, a.steps + 1
    weights = load(os.path.join(checkpoint_dir(a.run_dir, first), "model.safetensors"))
    state = load(os.path.join(checkpoint_dir(a.run_dir, first), "optimizer.safetensors"))
    final = load(os.path.join(checkpoint_dir(a.run_dir, last), "model.safetensors"))

    # The model's structure from the names: blocks h0_ .. h{L-1}_, widths from the shapes.
    blocks = sorted({int(n[1:n.index("_")]) for n in weights if n.startswith("h") and "_" in n})
    vocab, dim = weights["wte.weight"].shape
    expected = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}
    for b in blocks:
        for part in ("ln1", "qkv", "attention_proj", "ln2", "fc1", "fc2"):
            expected |= {f"h{b}_{part}.weight", f"h{b}_{part}.bias"}
    untied = "lm_head.weight" in weights
    expected |= {"lm_head.weight"} if untied else set()
    if set(weights) != expected or set(final) != expected:
        print(f"gpt_twin: the checkpoint's tensors are not the gpt preset's: unexpected "
              f"{sorted(set(weights) - expected)}, missing {sorted(expected - set(weights))}", file=sys.stderr)
        return 2
    if blocks != list(range(LAYERS)) or dim != DIM or weights["wpe.weight"].shape[0] != CONTEXT:
        print(f"gpt_twin: the checkpoint holds {len(blocks)} blocks of {dim} dims, not the job's", file=sys.stderr)
        return 2
    moments = {f"adam_{k}.{n}" for n in expected for k in "mv"}
    if set(state) != moments:
        print(f"gpt_twin: optimizer.safetensors is not AdamW's moments per tensor: unexpected "
              f"{sorted(set(state) - moments)}, missing {sorted(moments - set(state))}", file=sys.stderr)
        return 2
    names = sorted(expected)
    params = {n: weights[n].clone().requires_grad_(True) for n in names}
    m = {n: state[f"adam_m.{n}"].clone() for n in names}
    v = {n: state[f"adam_v.{n}"].clone() for n in names}

    def decays(name):
        if a.decay_all:
            return True
        return params[name].dim() == 2 and name.split(".")[0] not in ("wte", "wpe")

    heads, head_dim = HEADS, dim // HEADS

    def forward(x):  # x [B, T] int64 -> logits [B, T, vocab]
        p = params
        bsz, t = x.shape
        h = p["wte.weight"][x] + p["wpe.weight"][:t]
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        for b in blocks:
            pre = f"h{b}_"
            y = F.layer_norm(h, (dim,), p[pre + "ln1.weight"], p[pre + "ln1.bias"], LN_EPS)
            qkv = F.linear(y, p[pre + "qkv.weight"], p[pre + "qkv.bias"])  # [B, T, 3C]
            q, k, vv = (z.view(bsz, t, heads, head_dim).transpose(1, 2) for z in qkv.split(dim, dim=2))
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
            att = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
            y = (att @ vv).transpose(1, 2).reshape(bsz, t, dim)
            h = h + F.linear(y, p[pre + "attention_proj.weight"], p[pre + "attention_proj.bias"])
            y = F.layer_norm(h, (dim,), p[pre + "ln2.weight"], p[pre + "ln2.bias"], LN_EPS)
            y = F.gelu(F.linear(y, p[pre + "fc1.weight"], p[pre + "fc1.bias"]), approximate="tanh")
            h = h + F.linear(y, p[pre + "fc2.weight"], p[pre + "fc2.bias"])
        h = F.layer_norm(h, (dim,), p["ln_f.weight"], p["ln_f.bias"], LN_EPS)
        return F.linear(h, p["lm_head.weight" if untied else "wte.weight"])

    train, windows = training_windows(a.text_file)
    corpus = torch.tensor(list(train), dtype=torch.int64)
    offsets = torch.arange(CONTEXT + 1)
    losses = {}
    for step in range(first + 1, last + 1):
        idx = torch.tensor(batch_windows(step, windows))
        w = corpus[idx[:, None] * CONTEXT + offsets]
        logits = forward(w[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab), w[:, 1:].reshape(-1))  # mean over every token
        for p in params.values():
            p.grad = None
        loss.backward()
        losses[step] = loss.item()
        t = float(step)  # the update's 1-based count: bias corrections of update `step`
        step_size = a.lr / (1.0 - BETA1 ** t)
        bc2_sqrt = math.sqrt(1.0 - BETA2 ** t)
        with torch.no_grad():
            for n in names:
                p, g = params[n], params[n].grad
                if decays(n):
                    p.mul_(1.0 - a.lr * a.weight_decay)
                m[n].mul_(BETA1).add_((1.0 - BETA1) * g)
                v[n].mul_(BETA2).add_((1.0 - BETA2) * g * g)
                p.sub_(step_size * (m[n] / (v[n].sqrt() / bc2_sqrt + EPS)))

    # The comparison.
    rows, worst, worst_name = [], 0.0, None
    largest = max(float(final[n].abs().max()) for n in names)
    for n in names:
        diff = float((final[n] - params[n].detach()).abs().max())
        moved = float((final[n] - weights[n]).abs().max())
        rows.append((n, diff, moved, decays(n)))
        if diff > worst:
            worst, worst_name = diff, n
    moved_all = max(r[2] for r in rows)
    # The key biases apart: float32 noise on an exactly-zero gradient, which Adam scales by 1 / eps.
    key_bias = max(float((final[f"h{b}_qkv.bias"] - params[f"h{b}_qkv.bias"].detach())[dim:2 * dim].abs().max())
                   for b in blocks)
    rest = max([d for n, d, _, _ in rows if not n.endswith("_qkv.bias")] +
               [float(torch.cat([(final[n] - params[n].detach())[:dim], (final[n] - params[n].detach())[2 * dim:]])
                      .abs().max()) for n in names if n.endswith("_qkv.bias")])
    mask = "every tensor (--decay-all)" if a.decay_all else "the dense layers' matrices only"
    print(f"GPT {len(blocks)} layers, {HEADS} heads, {dim} dims, context {CONTEXT}, vocab {vocab}; batch {BATCH}; "
          f"AdamW lr {a.lr:g}, betas {BETA1}/{BETA2}, eps {EPS:g}, weight decay {a.weight_decay:g} on {mask}")
    print(f"twin: float64 torch {torch.__version__}, from step {first}'s weights and moments, steps "
          f"{first + 1}..{last} on windows {batch_windows(first + 1, windows)[0]}..{batch_windows(last, windows)[-1]} "
          f"of {windows}")
    print(f"{'tensor':26} {'shape':>10} {'decay':>5} {'max |dtrain - twin|':>20} {'max |moved|':>12}")
    for n, diff, moved, dec in rows:
        shape = "x".join(map(str, final[n].shape))
        print(f"{n:26} {shape:>10} {'yes' if dec else 'no':>5} {diff:20.3e} {moved:12.3e}")
    dtrain_losses = {}
    metrics = os.path.join(a.run_dir, "metrics.jsonl")
    if os.path.exists(metrics):
        with open(metrics) as f:
            for line in f:
                r = json.loads(line)
                if r.get("split") == "train" and r.get("step") in losses:
                    dtrain_losses[r["step"]] = r["loss"]
    if dtrain_losses:
        print("training loss (the step's batch, before its update): " +
              ", ".join(f"step {s} dtrain {dtrain_losses[s]:.7f} twin {losses[s]:.7f}" for s in sorted(dtrain_losses)))
        print(f"loss: max |dtrain - twin| = "
              f"{max(abs(dtrain_losses[s] - losses[s]) for s in dtrain_losses):.2e} (informative)")
    print(f"of which the key biases (exact gradient zero: float32 noise / eps) {key_bias:.2e}, all else {rest:.2e}")
    passed = worst <= BAR
    print(f"weights moved up to {moved_all:.2e} over the {a.steps} steps; largest weight {largest:.3f}; "
          f"max |dtrain - twin| / largest weight = {worst / largest:.2e} (worst: {worst_name})")
    print(f"gpt twin: {a.steps} AdamW steps, max |dtrain - float64| = {worst:.2e} (bar {BAR:g}): "
          f"{'PASS' if passed else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"max_abs_diff": worst, "worst_tensor": worst_name, "largest_weight": largest,
                       "max_moved": moved_all, "key_bias_max_abs_diff": key_bias, "rest_max_abs_diff": rest,
                       "bar": BAR, "pass": passed, "steps": a.steps, "lr": a.lr,
                       "weight_decay": a.weight_decay, "decay_all": a.decay_all, "torch": torch.__version__,
                       "tensors": {n: {"max_abs_diff": d, "max_moved": mv, "decayed": dec}
                                   for n, d, mv, dec in rows},
                       "loss": {"dtrain": dtrain_losses, "twin": losses}}, f, indent=1)
    return 0 if passed else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--weight-decay", type=float, default=0.1, help="AdamW's weight decay (default 0.1)")
    ap.add_argument("--decay-all", action="store_true",
                    help="the twin decays every tensor (dtrain's AdamW before decay was limited to matrices)")
    ap.add_argument("--lr", type=float, default=1e-3, help="constant learning rate (default 1e-3)")
    ap.add_argument("--steps", type=int, default=5, help="AdamW steps the twin replays after step 1 (default 5)")
    ap.add_argument("--work", default="", help="keep the text, the job and dtrain's run here (default: a "
                    "temporary directory, removed at the end)")
    ap.add_argument("--venv", default=DEFAULT_VENV)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", help="also write the figures to this file")
    # The twin process (started by the check in the venv's python).
    ap.add_argument("--twin", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--text-file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.steps < 1:
        ap.error("--steps must be at least 1")
    if a.twin:
        return run_twin(a)
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
