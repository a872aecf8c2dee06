#!/usr/bin/env python3
"""dtrain on CUDA against PyTorch eager on the same GPU, in one run.

Configurations (bar on dtrain images/s / PyTorch images/s):
  mlp128 >= 6     mlp preset, batch 128      } Fashion-MNIST when found, else synthetic
  cnn128 >= 3     cnn preset, batch 128      } 1x28x28 with 10 classes
  cnn1024 >= 1.3  cnn preset, batch 1024     }
  mlp4096 >= 1.3  mlp preset, batch 4096     }
  resnet20 >= 1.5      ResNet-20 (CIFAR, 6n+2), synthetic 3x32x32, 10 classes, batch 128
  mobilenet_v2 >= 1.5  MobileNetV2 width 1.0, synthetic 3x96x96, 10 classes, batch 64
Mixed precision, both programs in bf16 (synthetic data; 224 px: 3x224x224, 1000 classes):
  resnet50_bf16 >= 1.3          ResNet-50 (torchvision's, v1.5), 224 px, batch 64
  mobilenet_v2_224_bf16 >= 1.3  MobileNetV2 width 1.0, 224 px, batch 64
  resnet20_bf16 >= 1.5          ResNet-20 as resnet20, batch 128
  resnet50_fp32, resnet50_tf32  no bar: dtrain alone in fp32 and in tf32, against the
                                PyTorch bf16 figure of resnet50_bf16 (the gap to close)
  resnet20_fp16                 no bar, not run unless --only names it: dtrain alone in fp16
                                (dynamic loss scaling), against resnet20_bf16's PyTorch figure
Memory bar: dtrain's peak device memory in resnet50_bf16 <= 0.6 x its own in resnet50_fp32,
both from the same benchmark (PyTorch's bf16 and fp32 peaks beside it, no bar).
Both programs train the same network (scripts/bench/peer_models.py and model_peers.py mirror
dtrain's presets) with SGD momentum 0.9, lr 0.05, softmax cross-entropy; fp32 with TF32 off
unless the configuration names another precision. dtrain runs with its defaults for
everything the job does not name (convolution algorithms, deterministic, gpu_workspace_mb).
The 224 px configurations warm up for at most 10 steps and calibrate on 20, to keep their
runs within the time box.

  dtrain   `dtrain train` of a generated job (device cuda; [job] precision as the configuration
           names it, the key that `--set job.precision=bf16` sets; the jobs are complete
           files: --write-jobs DIR writes them alone). images/s = the samples of
           the steps after the warm-up / the wall time between the end of the warm-up's
           last step and the end of the last step (metrics.jsonl "time"). A first short
           run per configuration (not counted) finds how many steps fill --seconds.
  PyTorch  one process of this script (--peer-server) for the whole benchmark, asked for
           each run in turn: the model on cuda, cudnn.benchmark on, batches sliced from a
           pinned host copy of the data (its order drawn once) and copied with
           non_blocking=True each step; after the warm-up steps, a loop of --seconds
           between two torch.cuda.synchronize() calls; images/s = images / that time.
           Each configuration's model and optimizer are built once and keep training
           from one round to the next; the caching allocator is emptied after each run.
           bf16: torch.autocast("cuda", dtype=torch.bfloat16) around forward and loss, the
           model and the batches in torch.channels_last (fp32 weights, gradients and SGD).
dtrain runs bf16 and fp16 on the GPU. An older one that refuses the precision there (exit
status 2 and a one-line error naming the precision) leaves its side UNMEASURED with that
line as the reason: PyTorch's side is still measured, and the bar's result is UNMEASURED,
not FAIL.
Runs alternate within each configuration (dtrain first in even rounds, PyTorch first in odd
ones), configurations one after another; each figure is the median over the rounds, and a
bar needs at least --min-rounds of them. When a round would end past --budget, the timed
seconds of the rounds left shrink to fit (not below 0.5 s); a round that cannot fit even
then is not started.

Also measured:
  ceiling     the GPU's fp32 matrix-product rate: torch.matmul 8192^3, TF32 off, median of
              10 timed with CUDA events; also of bf16 and of tf32 (TF32 on) 8192^3 products
              timed the same way when a configuration runs in that precision (and of fp16
              for resnet20_fp16).
  TFLOP/s     per configuration and program: 3 x forward FLOPs per image x images/s
              (backward counted as twice the forward; forward FLOPs from `dtrain check`,
              else the products alone from scripts/bench/model_flops.py), and its share
              of the ceiling of the precision that program ran in.
  memory      per configuration, each program's peak device memory during the timed steps,
              the largest over the rounds. dtrain: the largest `device_peak_bytes` of the
              metrics.jsonl lines after the warm-up (each line's is the most its caching
              allocator held at once, blocks handed out or kept for a recorded step, since
              the line before: the first steps' algorithm searches stay out, whatever else
              dtrain keeps on the device stays in). PyTorch: torch.cuda.max_memory_allocated,
              less what the other configurations' models hold. The memory bar's PyTorch fp32
              figure comes from one more PyTorch run of resnet50_fp32 after the rounds, when
              the budget leaves room. A dtrain whose metrics have no device_peak_bytes (older)
              leaves the memory bar UNMEASURED.
  GPU busy    `nvidia-smi dmon -s u` (SM %, one sample a second) during one more dtrain run
              of mlp4096 lasting --busy-seconds; the samples whose whole second lies
              between the end of the warm-up and the last step count; bar: median >= 90%.
  variants    (--variants; dtrain alone, alternated, if the budget allows) ResNet-20 with
              job.deterministic true against false, and mlp batch 128 and ResNet-20 with
              job.cuda_graphs true against false: images/s of each and the ratio of the
              first to the second. A dtrain that does not know the key is reported as such.

Prints a table and writes the figures as JSON (--json). Exit status 0 when the run
completed (bars are reported, not enforced: scripts/gpu/summary.py does that).

Usage: scripts/bench/gpu_vs_pytorch.py [--dtrain PATH] [--data DIR|synthetic] [--seconds S]
           [--rounds N] [--budget S] [--only NAME ...] [--variants] [--json FILE] [--work DIR]
       scripts/bench/gpu_vs_pytorch.py --write-jobs DIR [--data DIR|synthetic] [--steps N]
       scripts/bench/gpu_vs_pytorch.py --dry-run   (the configurations, FLOPs and jobs; no GPU)
"""
import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_flops  # noqa: E402
from model_flops import conv_flops, conv_out  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
DATA_DIRS = [os.path.join(ROOT, ".gpu-deps", "root", "usr", "share", "datasets", "fashion-mnist"),
             "/usr/share/datasets/fashion-mnist"]
TRAIN_SAMPLES = 60000  # Fashion-MNIST's training set; the synthetic 1x28x28 set is made as large
CALIBRATION_STEPS = 100
MIN_SECONDS = 0.5
LR, MOMENTUM = 0.05, 0.9

# name -> what it trains. "fashion": Fashion-MNIST (or its synthetic stand-in); else a
# synthetic set of `samples` images of `shape` (128 batches of ResNet-20, 64 of MobileNetV2,
# 16 at 224 px per epoch). "model_toml" is the dtrain job's [model] table. "precision": the
# job's [job] precision, and the PyTorch peer's (fp32 or bf16). "bar" None: figures only.
# "against": dtrain alone, its ratio to that configuration's PyTorch figure. "warmup" and
# "calibration_steps" cap the steps of the slow 224 px models.
CONFIGS = {
    "mlp128": {"model": "mlp", "batch": 128, "bar": 6.0, "fashion": True, "model_toml": 'preset = "mlp"\n'},
    "cnn128": {"model": "cnn", "batch": 128, "bar": 3.0, "fashion": True, "model_toml": 'preset = "cnn"\n'},
    "cnn1024": {"model": "cnn", "batch": 1024, "bar": 1.3, "fashion": True, "model_toml": 'preset = "cnn"\n'},
    "mlp4096": {"model": "mlp", "batch": 4096, "bar": 1.3, "fashion": True, "model_toml": 'preset = "mlp"\n'},
    "resnet20": {"model": "resnet20", "batch": 128, "bar": 1.5, "fashion": False, "shape": [3, 32, 32],
                 "classes": 10, "samples": 16384, "model_toml": 'preset = "resnet"\ndepth = 20\n'},
    # torchvision's MobileNetV2 (the PyTorch twin) has dropout 0.2 before its last layer.
    "mobilenet_v2": {"model": "mobilenet_v2", "batch": 64, "bar": 1.5, "fashion": False, "shape": [3, 96, 96],
                     "classes": 10, "samples": 4096, "width": 1.0,
                     "model_toml": 'preset = "mobilenet_v2"\nwidth = 1.0\ndropout = 0.2\n'},
}
IMAGENET_224 = {"fashion": False, "shape": [3, 224, 224], "classes": 1000, "samples": 1024, "test_samples": 64,
                "warmup": 10, "calibration_steps": 20}
RESNET50 = {"model": "resnet50", "batch": 64, **IMAGENET_224, "model_toml": 'preset = "resnet"\ndepth = 50\n'}
CONFIGS.update({
    "resnet50_bf16": {**RESNET50, "bar": 1.3, "precision": "bf16", "label": "ResNet-50 224px batch 64 bf16"},
    "resnet50_fp32": {**RESNET50, "bar": None, "precision": "fp32", "against": "resnet50_bf16",
                      "label": "ResNet-50 224px batch 64 dtrain fp32"},
    "resnet50_tf32": {**RESNET50, "bar": None, "precision": "tf32", "against": "resnet50_bf16",
                      "label": "ResNet-50 224px batch 64 dtrain tf32"},
    "mobilenet_v2_224_bf16": {"model": "mobilenet_v2", "batch": 64, "bar": 1.3, "precision": "bf16", **IMAGENET_224,
                              "width": 1.0, "label": "MobileNetV2 224px batch 64 bf16",
                              "model_toml": 'preset = "mobilenet_v2"\nwidth = 1.0\ndropout = 0.2\n'},
    "resnet20_bf16": {**CONFIGS["resnet20"], "precision": "bf16", "label": "ResNet-20 batch 128 bf16"},
    "resnet20_fp16": {**CONFIGS["resnet20"], "bar": None, "precision": "fp16", "against": "resnet20_bf16",
                      "label": "ResNet-20 batch 128 dtrain fp16"},
})
for _c in CONFIGS.values():
    _c.setdefault("precision", "fp32")
# The configurations run when --only names none: resnet20_fp16's figures are not worth the
# rounds' time they take from the bars.
DEFAULT_CONFIGS = [n for n in CONFIGS if n != "resnet20_fp16"]
PEER_PRECISIONS = ("fp32", "bf16")  # what the PyTorch peer trains in
# dtrain's peak device memory in `config` against its own in `baseline`: at most `bar` times.
MEMORY_BAR = {"config": "resnet50_bf16", "baseline": "resnet50_fp32", "bar": 0.6,
              "label": "ResNet-50 224px batch 64 bf16 / fp32"}
MEMORY_PEER_SECONDS = 25  # held back from the rounds for the PyTorch fp32 run of MEMORY_BAR's baseline
DTRAIN_EXIT_BAD_CONFIG = 2  # cli/commands.h kExitBadConfig: the job or command line is refused
BUSY_CONFIG, BUSY_BAR = "mlp4096", 90.0
# (label, configuration, job key, the setting whose cost is reported, the baseline)
VARIANTS = [("deterministic", "resnet20", "job.deterministic", "true", "false"),
            ("cuda_graphs", "mlp128", "job.cuda_graphs", "true", "false"),
            ("cuda_graphs", "resnet20", "job.cuda_graphs", "true", "false")]


def describe(name):
    c = CONFIGS[name]
    if "label" in c:
        return c["label"]
    what = {"mlp": "mlp", "cnn": "cnn", "resnet20": "ResNet-20", "mobilenet_v2": "MobileNetV2"}[c["model"]]
    return f"{what} batch {c['batch']}"


def peer_of(name):
    """The configuration whose PyTorch runs `name` is compared with."""
    return CONFIGS[name].get("against", name)


def warmup_steps(a, name):
    return min(a.warmup, CONFIGS[name].get("warmup", a.warmup))


def calibration_steps(name):
    return CONFIGS[name].get("calibration_steps", CALIBRATION_STEPS)


def has_fashion_mnist(d):
    return any(os.path.exists(os.path.join(d, "train-images-idx3-ubyte" + ext)) for ext in ("", ".gz"))


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


# ---------------------------------------------------------------------------- jobs

def data_toml(name, data):
    c = CONFIGS[name]
    if c["fashion"] and data != "synthetic":
        return f'dataset = "fashion_mnist"\ndir = {toml_str(data)}\n'
    shape, classes = c.get("shape", [1, 28, 28]), c.get("classes", 10)
    samples = c.get("samples", TRAIN_SAMPLES)
    return (f'dataset = "synthetic"\nshape = {shape}\nclasses = {classes}\ntrain_samples = {samples}\n'
            f"test_samples = {c.get('test_samples', 256)}\n")


def write_job(work, name, data, steps):
    """A complete dtrain job for configuration `name` (no --set needed); (path, run_dir)."""
    c = CONFIGS[name]
    run_dir = os.path.join(work, f"run_{name}")
    path = os.path.join(work, f"gpu_{name}.toml")
    with open(path, "w") as f:
        f.write(f"""# scripts/bench/gpu_vs_pytorch.py: {describe(name)}
[job]
name = "gpu_{name}"
run_dir = {toml_str(run_dir)}
device = "cuda"
precision = "{c["precision"]}"
[model]
{c["model_toml"]}[data]
{data_toml(name, data)}[train]
steps = {steps}
batch_size = {c["batch"]}
eval_every_epoch = false
checkpoint_every_epoch = false
[optimizer]
type = "sgd"
lr = {LR}
momentum = {MOMENTUM}
""")
    return path, run_dir


def fallback_flops(name):
    c = CONFIGS[name]
    shape, classes = c.get("shape", [1, 28, 28]), c.get("classes", 10)
    if c["model"] == "resnet50":  # model_flops.py knows only the CIFAR ResNets, and 50 is 6n+2 too
        return resnet50_flops(shape[1], shape[0], classes)
    return model_flops.forward_flops(c["model"], shape, classes, c.get("width", 1.0))


def resnet50_flops(side=224, channels=3, classes=1000):
    """Forward FLOPs of the products alone, as model_flops.py counts them, for torchvision's
    ResNet-50 (model_peers.imagenet_resnet(50)): conv7x7/2(64), max pool 3x3/2, stages of 3,
    4, 6, 3 bottlenecks 64, 128, 256, 512 wide (stride on the 3x3, 1x1 projections), dense."""
    side = conv_out(side, 7, 2)
    flops = conv_flops(channels, 64, 7, side)
    side = conv_out(side, 3, 2)  # the max pool: no products
    inp = 64
    for s, (width, blocks) in enumerate(zip((64, 128, 256, 512), (3, 4, 6, 3))):
        for b in range(blocks):
            stride = 2 if (b == 0 and s > 0) else 1
            out_side = conv_out(side, 3, stride)
            flops += (conv_flops(inp, width, 1, side) + conv_flops(width, width, 3, out_side)
                      + conv_flops(width, 4 * width, 1, out_side))
            if stride != 1 or inp != 4 * width:
                flops += conv_flops(inp, 4 * width, 1, out_side)
            side, inp = out_side, 4 * width
    return flops + 2 * inp * classes


# ---------------------------------------------------------------------------- PyTorch side

def torch_setup():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return torch


def peer_data(torch, name, data, cache):
    """(images N x C x H x W float, labels N int64) on the host, pinned; channels_last for a
    bf16 configuration, so that its batches reach the GPU in the layout the model takes."""
    c = CONFIGS[name]
    channels_last = c["precision"] == "bf16"
    # The configurations of one shape share their set (ResNet-50 and MobileNetV2 at 224 px).
    key = ("fashion" if c["fashion"] else (tuple(c["shape"]), c["classes"], c["samples"]), channels_last)
    if key in cache:
        return cache[key]
    g = torch.Generator().manual_seed(0)
    if c["fashion"] and data != "synthetic":
        from pytorch_peer import read_idx

        def path(stem):
            return next(p for p in (os.path.join(data, stem), os.path.join(data, stem + ".gz")) if os.path.exists(p))

        x = torch.from_numpy(read_idx(path("train-images-idx3-ubyte")).copy()).unsqueeze(1).float().div_(255.0)
        y = torch.from_numpy(read_idx(path("train-labels-idx1-ubyte")).astype("int64"))
    else:
        shape, classes = c.get("shape", [1, 28, 28]), c.get("classes", 10)
        n = c.get("samples", TRAIN_SAMPLES)
        x, y = torch.rand(n, *shape, generator=g), torch.randint(0, classes, (n,), generator=g)
    perm = torch.randperm(x.shape[0], generator=g)
    x = x[perm]
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)  # a slice of whole images stays channels_last
    cache[key] = (x.pin_memory(), y[perm].pin_memory())
    return cache[key]


def peer_net(torch, name):
    c = CONFIGS[name]
    if c["model"] in ("mlp", "cnn"):
        from peer_models import build
        return build(c["model"])
    from model_peers import build
    return build(c["model"], c["classes"], c.get("width", 1.0))


def device_bytes(torch, s):
    """What a configuration's model keeps on the device between runs: parameters, buffers,
    gradients and the optimizer's state."""
    net, opt = s["net"], s["opt"]
    tensors = list(net.parameters()) + list(net.buffers())
    tensors += [p.grad for p in net.parameters() if p.grad is not None]
    tensors += [v for st in opt.state.values() for v in st.values() if torch.is_tensor(v) and v.is_cuda]
    return sum(t.numel() * t.element_size() for t in tensors)


def peer_train(torch, state, data_cache, name, seconds, warmup, data):
    dev = torch.device("cuda")
    c = CONFIGS[name]
    batch, bf16 = c["batch"], c["precision"] == "bf16"
    if c["precision"] not in PEER_PRECISIONS:
        raise ValueError(f"{name}: the PyTorch peer trains in {' or '.join(PEER_PRECISIONS)}, not {c['precision']}")
    x, y = peer_data(torch, name, data, data_cache)
    if name not in state:
        torch.manual_seed(0)
        net = peer_net(torch, name).to(dev).train()
        if bf16:
            net = net.to(memory_format=torch.channels_last)
        state[name] = {"net": net, "opt": torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM), "i": 0}
    s = state[name]
    net, opt = s["net"], s["opt"]
    loss_fn = torch.nn.CrossEntropyLoss()
    per_epoch = x.shape[0] // batch  # full batches only

    def step():
        j = (s["i"] % per_epoch) * batch
        s["i"] += 1
        xb = x[j:j + batch].to(dev, non_blocking=True)
        yb = y[j:j + batch].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        if bf16:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(net(xb), yb)
        else:
            loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    # The peak of the timed steps alone (cudnn.benchmark's trials in the first warm-up
    # would inflate it), less what the other configurations' models hold.
    others = torch.cuda.memory_allocated() - device_bytes(torch, s)
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    steps = 0
    while time.perf_counter() - t0 < seconds:
        step()
        steps += 1
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() - others
    torch.cuda.empty_cache()
    return {"images_per_s": steps * batch / dt, "steps": steps, "seconds": dt, "peak_memory_bytes": peak}


def peer_ceiling(torch, precision="fp32", n=8192, reps=10):
    """Matrix product n x n x n in fp32 with TF32 off, in tf32 (fp32 with TF32 on), in bf16 or
    in fp16: TFLOP/s, median of reps."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        for _ in range(3):
            torch.matmul(a, b, out=c)
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            torch.matmul(a, b, out=c)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 peers run with TF32 off
    del a, b, c
    torch.cuda.empty_cache()
    tflops = [2 * n ** 3 / t / 1e12 for t in times]
    props = torch.cuda.get_device_properties(0)
    return {"tflops": statistics.median(tflops), "runs": tflops, "n": n, "precision": precision, "gpu": props.name,
            "gpu_memory_gib": props.total_memory / 2 ** 30, "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version()}


def peer_server(a):
    """Answers one JSON line per request line on stdin: {"what": "ceiling", "precision": P},
    {"what": "train", "config": NAME, "seconds": S, "warmup": N}, {"what": "quit"}."""
    torch = torch_setup()
    state, data_cache = {}, {}
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        req = json.loads(line)
        try:
            if req["what"] == "quit":
                return
            if req["what"] == "ceiling":
                out = peer_ceiling(torch, req.get("precision", "fp32"))
            else:
                out = peer_train(torch, state, data_cache, req["config"], req["seconds"],
                                 req.get("warmup", a.warmup), a.data)
        except Exception as e:  # reported to the benchmark, which goes on
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


class Peer:
    """The PyTorch process, started on first use and again after it died or hung."""

    def __init__(self, a):
        self.a, self.p, self.log = a, None, os.path.join(a.work, "pytorch_peer.log")

    def _start(self):
        log = open(self.log, "a")
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--peer-server", "--data", self.a.data,
                                   "--warmup", str(self.a.warmup)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, bufsize=1)
        log.close()
        self.lines = queue.Queue()
        threading.Thread(target=self._read, args=(self.p.stdout, self.lines), daemon=True).start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.put(line)
        lines.put(None)

    def _log_tail(self):
        try:
            with open(self.log) as f:
                return " | ".join([l.strip() for l in f if l.strip()][-3:])
        except OSError:
            return ""

    def _end(self):
        if self.p:
            self.p.kill()
            self.p.wait()
            self.p = None

    def ask(self, req, timeout):
        """(the answer, None) or (None, why)."""
        if self.p is None or self.p.poll() is not None:
            self._start()
        try:
            self.p.stdin.write(json.dumps(req) + "\n")
            self.p.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the exit shows below
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                self._end()
                return None, f"PyTorch peer gave no answer to {req} within {timeout:.0f} s; ended"
            if line is None:
                rc = self.p.wait()
                self.p = None
                return None, f"PyTorch peer exited ({rc}): {self._log_tail()}"
            if line.startswith("{"):
                out = json.loads(line)
                return (None, f"PyTorch peer: {out['error']}") if "error" in out else (out, None)

    def close(self):
        if self.p and self.p.poll() is None:
            try:
                self.p.stdin.write('{"what": "quit"}\n')
                self.p.stdin.flush()
                self.p.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._end()


# ---------------------------------------------------------------------------- GPU busy

class Dmon:
    """`nvidia-smi dmon -s u` in the background: (wall time of arrival, SM %) per sample."""

    def __init__(self):
        self.samples, self.error, self.p = [], None, None
        try:
            self.p = subprocess.Popen(["nvidia-smi", "dmon", "-s", "u", "-d", "1", "-i", "0"], stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, bufsize=1)
        except OSError as e:
            self.error = f"nvidia-smi dmon: {e}"
            return
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        column = None
        for line in self.p.stdout:
            parts = line.split()
            if line.startswith("#"):
                if "sm" in parts[1:]:
                    column = parts[1:].index("sm")
                continue
            if column is not None and len(parts) > column and parts[column].isdigit():
                self.samples.append((time.time(), int(parts[column])))
            elif column is None and parts and not self.error:
                self.error = "nvidia-smi dmon: " + line.strip()

    def stop(self):
        if self.p:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
            self.thread.join(timeout=5)


def busy_samples(samples, t_begin, t_end, period=1.0):
    """The SM % of the samples whose whole period lies within [t_begin, t_end]."""
    return [v for t, v in samples if t - period >= t_begin and t <= t_end]


# ---------------------------------------------------------------------------- dtrain side

def dtrain_forward_flops(a, name):
    """(forward FLOPs per sample, where the figure came from)."""
    job, _ = write_job(a.work, name, a.data, 1)
    why = "no dtrain"
    if os.path.exists(a.dtrain):
        # The FLOPs do not depend on the precision, and `dtrain check` refuses one it cannot
        # run on the GPU as `dtrain train` does.
        p = subprocess.run([a.dtrain, "check", job, "--set", "job.precision=fp32"], capture_output=True, text=True,
                           timeout=120)
        total = [l for l in p.stdout.splitlines() if l.startswith("total ")]
        if p.returncode == 0 and total:
            return int(total[-1].split()[-1].replace(",", "")), "dtrain check"
        why = "dtrain check failed: " + " | ".join(((p.stderr or p.stdout).strip().splitlines() or ["?"])[-1:])
    return fallback_flops(name), f"scripts/bench/model_flops.py ({why})"


def last_lines(text, n=3):
    return " | ".join([l for l in text.splitlines() if l.strip()][-n:])


class Refusal(str):
    """dtrain's one-line error for a precision it does not run on this device: the reason its
    side is UNMEASURED, not a failure."""


def precision_refusal(name, returncode, stderr):
    """The Refusal in a failed `dtrain train` of configuration `name`, else None: exit status 2
    (a job it will not run) and an error line about the precision, for a precision other
    than fp32."""
    precision = CONFIGS[name]["precision"]
    if returncode != DTRAIN_EXIT_BAD_CONFIG or precision == "fp32":
        return None
    for line in stderr.splitlines():
        if line.startswith("dtrain: error:") and "precision" in line:
            return Refusal(line[len("dtrain: error:"):].strip())
    return None


def dtrain_run(a, name, steps, sets=()):
    """One `dtrain train`: ({"rate": images/s after the warm-up, "step_median": median of the
    per-step figures, "t_begin", "t_end": wall times of the timed span, "peak_bytes": the most
    device memory dtrain held after the warm-up, None when its metrics have no figure}, None)
    or (None, why); why is a Refusal when dtrain refuses the configuration's precision."""
    warmup = warmup_steps(a, name)
    job, run_dir = write_job(a.work, name, a.data, warmup + steps)
    limit = 3 * a.seconds + 120  # a hang must not stall the benchmark
    cmd = [a.dtrain, "train", job, "--quiet", "--overwrite"]
    for s in sets:
        cmd += ["--set", s]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return None, f"dtrain ({name}, {warmup + steps} steps) still running after {limit:.0f} s; ended"
    if p.returncode != 0:
        refusal = precision_refusal(name, p.returncode, p.stderr)
        return None, refusal or f"dtrain exit {p.returncode}: " + last_lines(p.stdout + p.stderr)
    return rate_of(os.path.join(run_dir, "metrics.jsonl"), warmup)


def rate_of(metrics, warmup):
    with open(metrics) as f:
        rows = [json.loads(l) for l in f if l.endswith("}\n")]
    train = [r for r in rows if r.get("split") == "train"]
    start = [r["time"] for r in train if r["step"] == warmup]
    after = [r for r in train if r["step"] > warmup]
    if not start or not after:
        return None, f"{metrics} has no train record of step {warmup} followed by more"
    rate = sum(r["samples"] for r in after) / (after[-1]["time"] - start[0])
    # Each line's figure covers the steps since the line before: after the warm-up's last
    # line, the algorithm searches of the first steps are behind.
    peaks = [r["device_peak_bytes"] for r in after if r.get("device_peak_bytes") is not None]
    return {"rate": rate, "step_median": statistics.median(r["images_per_s"] for r in after),
            "t_begin": start[0], "t_end": after[-1]["time"], "peak_bytes": max(peaks) if peaks else None}, None


def steps_for(rate, batch, seconds, least=CALIBRATION_STEPS):
    return max(least, min(500000, int(rate * seconds / batch)))


# ---------------------------------------------------------------------------- main

def sides_of(name, r):
    """The programs a round runs for configuration `name`: dtrain unless its calibration did
    not run, PyTorch unless the configuration borrows another's PyTorch figure."""
    return (["dtrain"] if r["calibration_images_per_s"] else []) + ([] if "against" in CONFIGS[name] else ["torch"])


def measure(a):
    started = time.monotonic()

    def elapsed():
        return time.monotonic() - started

    def last(runs):
        return f"{runs[-1]:,.0f}" if runs else "-"

    peer = Peer(a)
    try:
        ceiling, err = peer.ask({"what": "ceiling"}, timeout=180)
        if err:
            sys.exit(f"gpu_vs_pytorch: the matrix-product ceiling could not be measured: {err}")
        print(f"GPU {ceiling['gpu']}; PyTorch {ceiling['torch']} (CUDA {ceiling['cuda']}, cuDNN {ceiling['cudnn']}); "
              f"fp32 matmul ceiling {ceiling['tflops']:.1f} TFLOP/s [{elapsed():.0f} s]", flush=True)
        ceilings = {"fp32": ceiling}
        used = {CONFIGS[n]["precision"] for n in a.only} | {CONFIGS[peer_of(n)]["precision"] for n in a.only}
        for precision in sorted(used - {"fp32"}):
            got, err = peer.ask({"what": "ceiling", "precision": precision}, timeout=180)
            ceilings[precision] = got or {"precision": precision, "tflops": None, "error": err}
            print(f"  {precision} matmul ceiling " + (f"{got['tflops']:.1f} TFLOP/s" if got else f"not measured: {err}")
                  + f" [{elapsed():.0f} s]", flush=True)
        res = {}
        for name in a.only:
            c = CONFIGS[name]
            r = {"model": c["model"], "batch": c["batch"], "bar": c["bar"], "label": describe(name),
                 "precision": c["precision"], "peer_precision": CONFIGS[peer_of(name)]["precision"],
                 "against": c.get("against"),
                 "data": "fashion_mnist" if c["fashion"] and a.data != "synthetic" else "synthetic",
                 "dtrain_runs": [], "dtrain_step_medians": [], "torch_runs": [], "torch_peak_memory_runs": [],
                 "dtrain_peak_memory_runs": [], "dtrain_unmeasured": None, "errors": []}
            r["forward_flops"], r["flops_source"] = dtrain_forward_flops(a, name)
            got, err = dtrain_run(a, name, calibration_steps(name))  # also the GPU's and the binary's warm-up
            r["calibration_images_per_s"] = got["rate"] if got else None
            if got and got["peak_bytes"] is not None:  # the same steps as a round's: its peak counts too
                r["dtrain_peak_memory_runs"].append(got["peak_bytes"])
            if isinstance(err, Refusal):
                r["dtrain_unmeasured"] = str(err)
            elif err:
                r["errors"].append(err)
            print(f"  {name}: forward {r['forward_flops']:,} FLOPs/sample ({r['flops_source']}); "
                  + (f"{got['rate']:,.0f} img/s in calibration" if got else
                     f"dtrain UNMEASURED: {err}" if isinstance(err, Refusal) else err)
                  + f" [{elapsed():.0f} s]", flush=True)
            res[name] = r
        seconds, rounds_done = a.seconds, 0
        reserve = a.busy_seconds + 15  # the GPU-busy run after the rounds
        if memory_peer_wanted(res):
            reserve += MEMORY_PEER_SECONDS
        runs_per_round = max(1, sum(len(sides_of(n, r)) for n, r in res.items()))
        for rnd in range(a.rounds):
            if rnd:
                left, rounds_left = a.budget - elapsed() - reserve, a.rounds - rnd
                timed = runs_per_round * seconds  # about
                overhead = max(0.0, round_s - timed)
                if round_s * rounds_left > left:
                    fit = (left / rounds_left - overhead) / runs_per_round
                    if fit < MIN_SECONDS and left < overhead + runs_per_round * MIN_SECONDS:
                        print(f"  time budget of {a.budget:.0f} s: {rnd} of {a.rounds} rounds measured", flush=True)
                        break
                    if max(MIN_SECONDS, fit) < seconds:
                        seconds = max(MIN_SECONDS, fit)
                        print(f"  time budget of {a.budget:.0f} s: timed runs shortened to {seconds:.2f} s", flush=True)
            round_t0 = time.monotonic()
            for name, r in res.items():
                sides = sides_of(name, r)
                for side in (sides if rnd % 2 == 0 else sides[::-1]):
                    if side == "dtrain":
                        got, err = dtrain_run(a, name, steps_for(r["calibration_images_per_s"], r["batch"], seconds,
                                                                 calibration_steps(name)))
                        if got:
                            r["dtrain_runs"].append(got["rate"])
                            r["dtrain_step_medians"].append(got["step_median"])
                            if got["peak_bytes"] is not None:
                                r["dtrain_peak_memory_runs"].append(got["peak_bytes"])
                    else:
                        got, err = peer.ask({"what": "train", "config": name, "seconds": seconds,
                                             "warmup": warmup_steps(a, name)}, timeout=seconds + 180)
                        if got:
                            r["torch_runs"].append(got["images_per_s"])
                            r["torch_peak_memory_runs"].append(got["peak_memory_bytes"])
                    if err and err not in r["errors"]:
                        r["errors"].append(err)
            round_s = time.monotonic() - round_t0
            rounds_done += 1
            print(f"  round {rnd + 1} ({round_s:.0f} s): " + ", ".join(
                f"{k} {last(v['dtrain_runs'])} / {last(v['torch_runs'])}" for k, v in res.items())
                + f" img/s (dtrain / PyTorch) [{elapsed():.0f} s]", flush=True)
        torch_baseline = memory_peer_run(a, peer, res, elapsed) if memory_peer_wanted(res) else None
    finally:
        peer.close()
    for name, r in res.items():
        reference = res.get(peer_of(name))
        torch_runs = reference["torch_runs"] if reference else []
        if not reference:
            r["errors"].append(f"{peer_of(name)} (its PyTorch figure) was not among the configurations run")
        d = statistics.median(r["dtrain_runs"]) if r["dtrain_runs"] else None
        t = statistics.median(torch_runs) if torch_runs else None
        r["dtrain_images_per_s"], r["torch_images_per_s"] = d, t
        r["rounds"] = min(len(r["dtrain_runs"]), len(torch_runs))
        r["ratio"] = d / t if d and t else None
        if r["bar"] is None:
            r["pass"], r["result"] = None, "-"  # figures only
        elif r["dtrain_unmeasured"]:
            r["pass"], r["result"] = None, "UNMEASURED"
        else:
            r["pass"] = bool(r["ratio"] and r["ratio"] >= r["bar"] and r["rounds"] >= a.min_rounds)
            r["result"] = "PASS" if r["pass"] else "FAIL"
        r["torch_peak_memory_bytes"] = max(r["torch_peak_memory_runs"]) if r["torch_peak_memory_runs"] else None
        r["dtrain_peak_memory_bytes"] = max(r["dtrain_peak_memory_runs"]) if r["dtrain_peak_memory_runs"] else None
        r["dtrain_peak_memory_unmeasured"] = None
        if r["dtrain_peak_memory_bytes"] is None:
            r["dtrain_peak_memory_unmeasured"] = (
                r["dtrain_unmeasured"] or (NO_PEAK_FIGURE if r["calibration_images_per_s"] else
                                           "dtrain did not run: " + "; ".join(r["errors"])))
        flops = 3 * r["forward_flops"]
        for side, v, precision in (("dtrain", d, r["precision"]), ("torch", t, r["peer_precision"])):
            top = ceilings.get(precision, {}).get("tflops")
            r[f"{side}_tflops"] = flops * v / 1e12 if v else None
            r[f"{side}_ceiling_share"] = flops * v / (top * 1e12) if v and top else None
    memory = memory_bar(res, torch_baseline)
    busy = measure_busy(a, res) if BUSY_CONFIG in res else None
    variants = measure_variants(a, res, started) if a.variants else []
    return {"ceiling": ceiling, "ceilings": ceilings, "configs": res, "memory": memory, "gpu_busy": busy,
            "variants": variants,
            "seconds": a.seconds, "seconds_last_round": seconds, "warmup_steps": a.warmup, "rounds": rounds_done,
            "min_rounds": a.min_rounds, "data": a.data, "wall_s": elapsed(),
            "method": "dtrain: post-warm-up samples / wall time from metrics.jsonl; PyTorch: images / "
                      "synchronized wall time, one persistent process; medians over alternated rounds; "
                      "fp32 configurations TF32 off on both, bf16 ones PyTorch autocast + channels_last; "
                      "TFLOP/s = 3 x forward FLOPs x images/s, shares of the ceiling of each side's precision; "
                      "peak device memory after the warm-up: dtrain's device_peak_bytes from metrics.jsonl, "
                      "PyTorch's max_memory_allocated; dtrain UNMEASURED where an older one refuses the "
                      "precision on the GPU"}


NO_PEAK_FIGURE = "this dtrain's metrics.jsonl has no device_peak_bytes (a build from before that figure)"


def memory_peer_wanted(res):
    """Whether MEMORY_BAR's PyTorch baseline is to be run: both its configurations are measured, and
    the baseline borrows another configuration's PyTorch figure (so the rounds do not run it)."""
    base = MEMORY_BAR["baseline"]
    return (MEMORY_BAR["config"] in res and base in res and "against" in CONFIGS[base]
            and CONFIGS[base]["precision"] in PEER_PRECISIONS)


def memory_peer_run(a, peer, res, elapsed):
    """PyTorch's peak device memory in MEMORY_BAR's baseline (fp32): one short run after the rounds,
    when the budget leaves room. {"peak_memory_bytes", "images_per_s", ...} or {"error": why}."""
    name = MEMORY_BAR["baseline"]
    left = a.budget - elapsed() - (a.busy_seconds + 15 if BUSY_CONFIG in res else 0)
    if left < MEMORY_PEER_SECONDS:
        return {"error": f"time budget of {a.budget:.0f} s: {max(0.0, left):.0f} s left for it"}
    got, err = peer.ask({"what": "train", "config": name, "seconds": MIN_SECONDS, "warmup": warmup_steps(a, name)},
                        timeout=MEMORY_PEER_SECONDS + 120)
    if err:
        print(f"  PyTorch {name} (its peak device memory): {err}", flush=True)
        return {"error": err}
    print(f"  PyTorch {name}: peak device memory {gib(got['peak_memory_bytes'])} "
          f"({got['images_per_s']:,.0f} img/s) [{elapsed():.0f} s]", flush=True)
    return got


def memory_bar(res, torch_baseline):
    """MEMORY_BAR's result: dtrain's peak in the configuration against its peak in the baseline;
    PyTorch's two beside it. None when either configuration was not among those run. UNMEASURED
    when a dtrain that ran gave no figure (it refused the precision, or its metrics have none);
    FAIL when a configuration did not run or the ratio is above the bar."""
    m = dict(MEMORY_BAR)
    mine, base = res.get(m["config"]), res.get(m["baseline"])
    if not mine or not base:
        return None
    tb = torch_baseline or {"error": f"{m['baseline']}'s PyTorch run is not part of this benchmark"}

    def ratio(x, y):
        return x / y if x and y else None

    m["dtrain_bytes"], m["dtrain_baseline_bytes"] = mine["dtrain_peak_memory_bytes"], base["dtrain_peak_memory_bytes"]
    m["torch_bytes"], m["torch_baseline_bytes"] = mine["torch_peak_memory_bytes"], tb.get("peak_memory_bytes")
    m["torch_baseline_error"] = tb.get("error")
    m["ratio"] = ratio(m["dtrain_bytes"], m["dtrain_baseline_bytes"])
    m["torch_ratio"] = ratio(m["torch_bytes"], m["torch_baseline_bytes"])
    m["unmeasured"], m["errors"] = None, []
    if m["ratio"] is not None:
        m["pass"] = m["ratio"] <= m["bar"]
        m["result"] = "PASS" if m["pass"] else "FAIL"
        return m
    why = [f"{n}: {r['dtrain_peak_memory_unmeasured']}" for n, r in ((m["config"], mine), (m["baseline"], base))
           if r["dtrain_peak_memory_bytes"] is None]
    if all(r["dtrain_unmeasured"] or r["calibration_images_per_s"] for r in (mine, base)):
        m["pass"], m["result"], m["unmeasured"] = None, "UNMEASURED", "; ".join(why)
    else:
        m["pass"], m["result"], m["errors"] = False, "FAIL", why
    return m


def measure_busy(a, res):
    """SM % from nvidia-smi dmon during one dtrain run of BUSY_CONFIG."""
    r = res[BUSY_CONFIG]
    out = {"config": BUSY_CONFIG, "bar": BUSY_BAR, "seconds": a.busy_seconds, "samples": [], "median": None,
           "pass": False, "error": None}
    if not r["calibration_images_per_s"]:
        out["error"] = f"{BUSY_CONFIG} did not run: " + "; ".join(r["errors"])
        return out
    dmon = Dmon()
    time.sleep(1.0)  # dmon prints its first sample after a second
    try:
        got, err = dtrain_run(a, BUSY_CONFIG, steps_for(r["calibration_images_per_s"], r["batch"], a.busy_seconds))
        time.sleep(0.3)
    finally:
        dmon.stop()
    out["all_samples"] = [v for _, v in dmon.samples]
    if err or dmon.error and not dmon.samples:
        out["error"] = err or dmon.error
        return out
    out["images_per_s"] = got["rate"]
    out["samples"] = busy_samples(dmon.samples, got["t_begin"], got["t_end"])
    if not out["samples"]:
        out["error"] = (f"no dmon sample within the {got['t_end'] - got['t_begin']:.1f} s of timed steps "
                        f"({len(dmon.samples)} in all)")
        return out
    out["median"] = statistics.median(out["samples"])
    out["pass"] = out["median"] >= BUSY_BAR
    print(f"  GPU busy during {BUSY_CONFIG}: SM % {out['samples']} (median {out['median']:.0f}, bar {BUSY_BAR:.0f}); "
          f"{got['rate']:,.0f} img/s", flush=True)
    return out


def measure_variants(a, res, started):
    """dtrain alone, one job key's two settings alternated, while the budget allows."""
    out = []
    for label, name, key, value, base in VARIANTS:
        v = {"label": label, "config": name, "key": key, "value": value, "baseline": base,
             "runs": {value: [], base: []}, "error": None}
        out.append(v)
        r = res.get(name)
        if not r or not r["calibration_images_per_s"]:
            v["error"] = f"{name} was not measured"
            continue
        steps = steps_for(r["calibration_images_per_s"], r["batch"], a.variant_seconds)
        per_run = a.variant_seconds + 5
        for rnd in range(a.variant_rounds):
            if time.monotonic() - started + 2 * per_run > a.budget:
                v["error"] = f"time budget: {rnd} of {a.variant_rounds} rounds"
                break
            for setting in ((value, base) if rnd % 2 == 0 else (base, value)):
                got, err = dtrain_run(a, name, steps, [f"{key}={setting}"])
                if err:
                    v["error"] = err
                    break
                v["runs"][setting].append(got["rate"])
            if v["error"]:
                break
        m = {s: statistics.median(runs) if runs else None for s, runs in v["runs"].items()}
        v["images_per_s"] = m
        v["ratio"] = m[value] / m[base] if m[value] and m[base] else None
        if v["ratio"]:
            print(f"  {name} {key}={value}: {m[value]:,.0f} img/s against {m[base]:,.0f} with {base} "
                  f"({v['ratio']:.3f}x)", flush=True)
        else:
            print(f"  {name} {key}={value}: not measured: {v['error']}", flush=True)
    return out


def gib(v):
    return f"{v / 2 ** 30:.2f} GiB"


def memory_line(m):
    def of(v):
        return gib(v) if v is not None else "-"
    torch = (f"; PyTorch {of(m['torch_bytes'])} / {of(m['torch_baseline_bytes'])}"
             + (f" = {m['torch_ratio']:.2f}x" if m["torch_ratio"] is not None else
                f" ({m['torch_baseline_error']})" if m.get("torch_baseline_error") else ""))
    if m["ratio"] is not None:
        figure = f"{of(m['dtrain_bytes'])} / {of(m['dtrain_baseline_bytes'])} = {m['ratio']:.2f}x {m['result']}"
    else:
        figure = f"{m['result']} ({m['unmeasured'] or '; '.join(m['errors'])})"
    return (f"peak device memory {m['label']} (dtrain {m['config']} / {m['baseline']}, bar <= {m['bar']:g}x): "
            f"dtrain {figure}{torch}")


def print_table(out):
    c = out["ceiling"]
    more = "".join(f"; {p} {v['tflops']:.1f}" for p, v in out.get("ceilings", {}).items()
                   if p != "fp32" and v.get("tflops"))
    print(f"\n{c['gpu']}; PyTorch {c['torch']}; fp32, TF32 off (bf16: PyTorch autocast, channels_last); "
          f"medians of {out['rounds']} alternated rounds; "
          f"fp32 matmul ceiling {c['tflops']:.1f} TFLOP/s ({c['n']}^3, median of {len(c['runs'])}){more}")
    configs = out["configs"]
    width = max([13] + [len(n) for n in configs])
    result_width = max([6] + [len(r.get("result", "")) for r in configs.values()])
    print(f"{'config':{width}} {'dtrain img/s':>13} {'PyTorch img/s':>14} {'ratio':>6}  {'bar':7} "
          f"{'result':{result_width}} {'dtrain TFLOP/s':>14} {'%ceil':>6} {'PyTorch TFLOP/s':>15} {'%ceil':>6}")

    def num(v, fmt, scale=1.0):
        return format(v * scale, fmt) if v is not None else "-"

    for name, r in configs.items():
        result = r.get("result") or ("PASS" if r["pass"] else "FAIL")
        dtrain = "UNMEASURED" if r.get("dtrain_unmeasured") else num(r['dtrain_images_per_s'], ',.0f')
        bar = f">= {r['bar']:<4g}" if r["bar"] is not None else "-"
        print(f"{name:{width}} {dtrain:>13} {num(r['torch_images_per_s'], ',.0f'):>14} "
              f"{num(r['ratio'], '.2f'):>6}  {bar:7} {result:{result_width}} {num(r['dtrain_tflops'], '.2f'):>14} "
              f"{num(r['dtrain_ceiling_share'], '.1f', 100):>6} {num(r['torch_tflops'], '.2f'):>15} "
              f"{num(r['torch_ceiling_share'], '.1f', 100):>6}")
    for name, r in configs.items():
        short = (f" (only {r['rounds']} rounds; the bar needs {out['min_rounds']})"
                 if r["rounds"] < out["min_rounds"] and r["bar"] is not None and not r.get("dtrain_unmeasured") else "")
        precisions = f" ({r['precision']} / {r['peer_precision']})" if r.get("precision", "fp32") != "fp32" or \
            r.get("peer_precision", "fp32") != "fp32" else ""
        torch_runs = (f"PyTorch: {r['against']}'s" if r.get("against") else
                      f"PyTorch {[round(v) for v in r['torch_runs']]}")
        line = f"  {name}{precisions}: dtrain {[round(v) for v in r['dtrain_runs']]}, {torch_runs}" + short
        if r.get("dtrain_unmeasured"):
            line += f"\n    dtrain UNMEASURED: {r['dtrain_unmeasured']}"
        mem, torch_mem = r.get("dtrain_peak_memory_bytes"), r.get("torch_peak_memory_bytes")
        if mem is not None:
            dtrain_mem = gib(mem)
        else:
            dtrain_mem = "UNMEASURED (" + ("its run refused, above" if r.get("dtrain_unmeasured")
                                            else r["dtrain_peak_memory_unmeasured"]) + ")"
        line += (f"\n    peak device memory after the warm-up: dtrain {dtrain_mem}"
                 + ("" if r.get("against") else
                    f", PyTorch {gib(torch_mem) if torch_mem is not None else '-'} (max_memory_allocated)"))
        print(line + "".join(f"\n    error: {e}" for e in r["errors"]))
    m = out.get("memory")
    if m:
        print(memory_line(m))
    b = out["gpu_busy"]
    if b:
        print(f"GPU busy (SM %, nvidia-smi dmon) during dtrain {b['config']}: "
              + (f"median {b['median']:.0f} of {b['samples']} (bar >= {b['bar']:.0f}) {'PASS' if b['pass'] else 'FAIL'}"
                 if b["median"] is not None else f"not measured: {b['error']} FAIL"))
    for v in out["variants"]:
        m = v.get("images_per_s", {})
        print(f"dtrain {v['config']} {v['key']}={v['value']} against {v['baseline']}: "
              + (f"{m[v['value']]:,.0f} / {m[v['baseline']]:,.0f} img/s = {v['ratio']:.3f}"
                 if v.get("ratio") else f"not measured: {v['error']}"))


def dry_run(a):
    """What would run, without a GPU: each configuration's FLOPs, job and bar."""
    print(f"data: {a.data}; work: {a.work}; {a.rounds} rounds of {a.seconds} s per run and program; "
          f"budget {a.budget:.0f} s")
    width = max([13] + [len(n) for n in a.only])
    label_width = max([24] + [len(describe(n)) for n in a.only])
    for name in a.only:
        c = CONFIGS[name]
        flops, source = dtrain_forward_flops(a, name)
        job, _ = write_job(a.work, name, a.data, warmup_steps(a, name) + calibration_steps(name))
        bar = f"bar >= {c['bar']:<4g}" if c["bar"] is not None else "no bar    "
        if "against" in c:
            sides = f"dtrain {c['precision']} alone, against {c['against']}'s PyTorch {CONFIGS[c['against']]['precision']}"
        else:
            sides = f"dtrain {c['precision']}, PyTorch {c['precision']}" + (
                " (autocast, channels_last)" if c["precision"] == "bf16" else "")
        print(f"  {name:{width}} {describe(name):{label_width}} {bar} forward "
              + f"{flops:,} FLOPs/sample ({source}); at 10,000 img/s {3 * flops * 1e4 / 1e12:.2f} TFLOP/s; job {job}")
        if c["precision"] != "fp32" or "warmup" in c:
            print(f"  {'':{width}} {sides}; warm-up {warmup_steps(a, name)} steps, calibration "
                  f"{calibration_steps(name)}")
    if MEMORY_BAR["config"] in a.only and MEMORY_BAR["baseline"] in a.only:
        print(f"memory bar: dtrain's peak device memory (metrics.jsonl device_peak_bytes after the warm-up) in "
              f"{MEMORY_BAR['config']} <= {MEMORY_BAR['bar']:g} x its own in {MEMORY_BAR['baseline']}; PyTorch's "
              f"beside it" + (f" (its {MEMORY_BAR['baseline']} run once after the rounds)"
                             if memory_peer_wanted({n: None for n in a.only}) else ""))
    print("an older dtrain that refuses a precision on the GPU (exit 2, one line naming it) leaves its side "
          "UNMEASURED with that line as the reason; the PyTorch side is measured all the same")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build-gpu", "dtrain"), help="the dtrain binary")
    ap.add_argument("--data", default="", help="Fashion-MNIST folder, or 'synthetic' (default: the first found "
                                               "of .gpu-deps/root/usr/share/datasets/fashion-mnist and "
                                               "/usr/share/datasets/fashion-mnist, else synthetic); the "
                                               "image models always train on synthetic data")
    ap.add_argument("--seconds", type=float, default=3, help="timed seconds per run (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=30, help="warm-up steps per run, not timed")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-rounds", type=int, default=3, help="rounds a bar needs (default 3)")
    ap.add_argument("--budget", type=float, default=480,
                    help="seconds for the whole benchmark: later rounds shrink or are left out to fit")
    ap.add_argument("--busy-seconds", type=float, default=6, help="timed seconds of the GPU-busy run")
    ap.add_argument("--variants", action="store_true",
                    help="also dtrain alone: resnet20 deterministic true/false, mlp128 and resnet20 cuda_graphs true/false")
    ap.add_argument("--variant-seconds", type=float, default=1.5)
    ap.add_argument("--variant-rounds", type=int, default=3)
    ap.add_argument("--only", nargs="+", default=DEFAULT_CONFIGS, choices=list(CONFIGS), metavar="NAME",
                    help=f"the configurations to run (default: {', '.join(DEFAULT_CONFIGS)}; also "
                         f"{', '.join(n for n in CONFIGS if n not in DEFAULT_CONFIGS)})")
    ap.add_argument("--work", default="", help="folder for the jobs and runs (default: a temporary one)")
    ap.add_argument("--json", default="", help="write the figures here")
    ap.add_argument("--write-jobs", metavar="DIR", help="write each configuration's job to DIR and stop")
    ap.add_argument("--steps", type=int, default=100, help="with --write-jobs: train.steps of the jobs")
    ap.add_argument("--dry-run", action="store_true", help="print the configurations, FLOPs and jobs; no GPU")
    ap.add_argument("--peer-server", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.warmup < 1:
        sys.exit("gpu_vs_pytorch: --warmup must be at least 1 step")
    if not a.data:
        a.data = next((d for d in DATA_DIRS if has_fashion_mnist(d)), "synthetic")
    elif a.data != "synthetic" and not has_fashion_mnist(a.data):
        sys.exit(f"gpu_vs_pytorch: no Fashion-MNIST in {a.data}; give a folder holding "
                 f"train-images-idx3-ubyte[.gz], or --data synthetic")
    a.data = a.data if a.data == "synthetic" else os.path.abspath(a.data)
    a.dtrain = os.path.abspath(a.dtrain)

    if a.peer_server:
        return peer_server(a)
    if a.write_jobs:
        os.makedirs(a.write_jobs, exist_ok=True)
        for name in a.only:
            print(write_job(os.path.abspath(a.write_jobs), name, a.data, a.steps)[0])
        return
    if not a.dry_run and not os.path.exists(a.dtrain):
        sys.exit(f"gpu_vs_pytorch: {a.dtrain} not found; build it (scripts/gpu/check.sh build) or pass --dtrain")
    with tempfile.TemporaryDirectory() as tmp:
        a.work = os.path.abspath(a.work) if a.work else tmp
        os.makedirs(a.work, exist_ok=True)
        if a.dry_run:
            return dry_run(a)
        out = measure(a)
    print_table(out)
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
        print(f"figures written to {a.json}")


if __name__ == "__main__":
    main()
