#!/usr/bin/python3
"""dtrain's CPU training of real models against PyTorch (Debian's python3-torch), in one run.

  resnet20      ResNet-20 (`preset = "resnet"`, depth 20) on a CIFAR-10 binary folder of
                generated data, batch 128; pixels scaled to [0,1], no augmentation.
  mobilenet_v2  MobileNetV2 width 1.0 (`preset = "mobilenet_v2"`) on an image folder of
                generated JPEG/PNG/BMP images of 120 to 200 pixels (2 classes), resized to
                96x96, normalised with the ImageNet mean and std, random horizontal flips,
                batch 64; a seeded tenth held out for validation.
Both: SGD momentum 0.9, lr 0.05, fp32, softmax cross-entropy. The bar on dtrain images/s /
PyTorch images/s is 1.2 for each.

What each side is charged for (the bar is on the training step):
  dtrain   `dtrain train` of a generated job, its own loader decoding and resizing the
           images on its threads ahead of the step, as a user runs it. images/s = the
           samples of the steps after the warm-up / the time between the end of the
           warm-up's last step and the end of the last one (metrics.jsonl "time").
  PyTorch  a process of this script (--peer): the data decoded once before timing (for the
           image folder with PIL: RGB, bilinear resize to 96x96, /255, mean/std), batches
           sliced from a seeded permutation, the flips drawn per batch inside the timed
           step. images/s the same way, after the same warm-up. Run at each setting
           (torch.set_num_threads 1 and 2, each in NCHW and in channels_last memory format);
           the best is the peer.
The loader alone: `dtrain bench loader JOB` on the mobilenet_v2 job (decode, resize,
normalise, flip into batches, no training); bar: >= 3x the images/s dtrain's training step
consumes (the mobilenet_v2 figure above).
Runs are interleaved (dtrain, then PyTorch at each setting, then the loader) for --repeats
rounds; each figure is the median. Peak RSS of each process from wait4. On a shared
machine, --wait-for-idle S holds each run until no other process has run for 2 s (up to S
seconds), and the report says in what share of its samples another process was running.

--self-check builds the PyTorch models and checks their parameter counts against the
published ones (ResNet-20 0.27M, ResNet-18 11.69M, MobileNetV2 3,504,872), and when the
dtrain binary knows the presets compares `dtrain check`'s counts with them.

Exit status: 0 when every bar passes, 1 when one fails.

Usage: scripts/bench/models_vs_pytorch.py [--data DIR] [--repeats 3] [--warmup 3] [--steps N]
           [--only resnet20|mobilenet_v2] [--torch-settings 1t,2t,1t+cl,2t+cl] [--pypi] [--pytorch-only]
           [--wait-for-idle S]
           [--json FILE] [--dtrain PATH]
       scripts/bench/models_vs_pytorch.py --self-check [--dtrain PATH]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from cpu_vs_pytorch import run_with_rss, torch_version  # noqa: E402
import distributed_vs_pytorch as load  # noqa: E402  (wait_for_idle, LoadWatch)
import make_image_data  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
# PyTorch's settings tried: torch.set_num_threads, and whether the model and data are in
# channels_last memory format (oneDNN's preferred layout on CPUs: it spares the reorders
# around each convolution; MobileNetV2 ran 1.6x as fast in it here, ResNet-20 a little
# slower). The best is the peer; --torch-settings 1t,2t keeps to the default layout.
# name -> (threads, channels_last, bf16 autocast); the "pypi" ones (with --pypi) run the latest
# PyTorch from PyPI in the virtual environment pipeline_vs_one.py makes, the others Debian's.
TORCH_SETTINGS = {"1t": (1, False, False), "2t": (2, False, False), "1t+cl": (1, True, False),
                  "2t+cl": (2, True, False)}
PYPI_SETTINGS = {"pypi 2t": (2, False, False), "pypi 2t+cl": (2, True, False),
                 "pypi 1t+cl bf16": (1, True, True), "pypi 2t+cl bf16": (2, True, True)}
_pypi_python = None


def peer_python(setting):
    global _pypi_python
    if setting not in PYPI_SETTINGS:
        return "/usr/bin/python3"
    if _pypi_python is None:
        import pipeline_vs_one
        _pypi_python = pipeline_vs_one.ensure_venv(pipeline_vs_one.DEFAULT_VENV)
    return _pypi_python
LOADER_BAR = 3.0
LOADER_BATCHES = 50  # timed batches of 64: about three passes over the folder's 1,080 training images
IMAGE_SIZE = 96
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
VALIDATION_FRACTION = 0.1
LR, MOMENTUM, SEED = 0.05, 0.9, 0

# name -> what it trains on and how; "classes" is the generated data's.
MODELS = {
    "resnet20": {"data": "cifar10", "batch": 128, "bar": 1.2, "classes": 10, "steps": 20,
                 "model_toml": 'preset = "resnet"\ndepth = 20\n'},
    "mobilenet_v2": {"data": "image_folder", "batch": 64, "bar": 1.2, "classes": 2, "width": 1.0, "steps": 10,
                     "model_toml": 'preset = "mobilenet_v2"\nwidth = 1.0\n'},
}


# ---------------------------------------------------------------------------- data

def prepare_data(root):
    """root/cifar10 and root/image_folder, generated where missing; returns {kind: dir}.
    Each is written under a temporary name and renamed when whole, so an interrupted
    run leaves no half data set for the next one to reuse."""
    makers = {"cifar10": lambda d: make_image_data.write_cifar(d, seed=SEED),
              "image_folder": lambda d: make_image_data.write_folder(
                  d, classes=MODELS["mobilenet_v2"]["classes"], seed=SEED)}
    dirs = {}
    for kind, make in makers.items():
        dirs[kind] = os.path.join(root, kind)
        if not os.path.isdir(dirs[kind]):
            tmp = dirs[kind] + ".partial"
            shutil.rmtree(tmp, ignore_errors=True)
            make(tmp)
            os.rename(tmp, dirs[kind])
    return dirs


def toml_str(s):
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def data_toml(kind, data_dir):
    if kind == "cifar10":
        return f'dataset = "cifar10"\ndir = {toml_str(data_dir)}\n'
    return (f'dataset = "image_folder"\ndir = {toml_str(data_dir)}\n'
            f"validation_fraction = {VALIDATION_FRACTION}\nimage_size = [{IMAGE_SIZE}, {IMAGE_SIZE}]\n"
            f"channels = 3\nmean = {MEAN}\nstd = {STD}\naugment_flip = true\nloader_threads = 0\n")


def write_model_job(path, model, run_dir, steps, data_section):
    """The dtrain job for `model`: its preset, `data_section` (the [data] table's body), SGD
    with momentum, no evaluation or checkpoints inside the timed steps."""
    m = MODELS[model]
    with open(path, "w") as f:
        f.write(f"""[job]
name = "bench_{model}"
run_dir = {toml_str(run_dir)}
seed = {SEED}
threads = 0
[model]
{m["model_toml"]}[data]
{data_section}[train]
steps = {steps}
batch_size = {m["batch"]}
eval_every_epoch = false
checkpoint_every_epoch = false
[optimizer]
type = "sgd"
lr = {LR}
momentum = {MOMENTUM}
""")
    return path


# ---------------------------------------------------------------------------- dtrain side

def dtrain_train(dtrain, job, run_dir, warmup):
    """(images/s after the warm-up, peak RSS MB) of one `dtrain train`."""
    load.wait_for_idle()
    _, rss = run_with_rss([dtrain, "train", job, "--quiet", "--overwrite"])
    metrics = os.path.join(run_dir, "metrics.jsonl")
    with open(metrics) as f:
        train = [r for r in map(json.loads, f) if r.get("split") == "train"]
    start = [r["time"] for r in train if r["step"] == warmup]
    if not start or train[-1]["step"] <= warmup:
        sys.exit(f"bench: {metrics} has no train record of step {warmup} followed by more; "
                 f"is a record written every step?")
    samples = sum(r["samples"] for r in train if r["step"] > warmup)
    return samples / (train[-1]["time"] - start[0]), rss


def dtrain_loader(dtrain, job):
    """(the JSON `dtrain bench loader` prints, peak RSS MB)."""
    load.wait_for_idle()
    out, rss = run_with_rss([dtrain, "bench", "loader", job, "--json", "--batches", str(LOADER_BATCHES)])
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"bench: `dtrain bench loader {job}` printed no JSON line:\n{out[-2000:]}")
    return json.loads(lines[-1]), rss


def dtrain_params(dtrain, job):
    """The model's parameter count from `dtrain check` (its summary's "total" row), or None
    with the reason when the check fails."""
    r = subprocess.run([dtrain, "check", job], capture_output=True, text=True)
    if r.returncode != 0:
        return None, ((r.stderr or r.stdout).strip().splitlines() or ["no output"])[-1]
    total = [l for l in r.stdout.splitlines() if l.startswith("total ")]
    if not total:
        return None, "no 'total' row in dtrain check's model summary"
    return int(total[-1].split()[1].replace(",", "")), None


# ---------------------------------------------------------------------------- PyTorch side

def read_cifar(data_dir):
    """(uint8 [N,3,32,32], int64 [N]) of the five training files."""
    import numpy as np
    recs = [np.fromfile(os.path.join(data_dir, f), np.uint8).reshape(-1, make_image_data.CIFAR_RECORD_BYTES)
            for f in make_image_data.CIFAR_TRAIN_FILES]
    recs = np.concatenate(recs)
    return recs[:, 1:].reshape(-1, 3, 32, 32), recs[:, 0].astype(np.int64)


def read_image_folder(root):
    """(float [N,3,96,96] normalised, int64 [N]): every image of root/<class>/, classes in
    sorted order, decoded with PIL to RGB and resized with its antialiased bilinear filter
    (dtrain resizes with stb_image_resize's default filters: the pixels differ a little,
    the work of a training step not at all)."""
    import numpy as np
    try:
        from PIL import Image
    except ImportError:
        sys.exit("bench: the PyTorch peer decodes the image folder with PIL: install python3-pil")
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    images, labels = [], []
    for label, c in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(root, c))):
            with Image.open(os.path.join(root, c, name)) as im:
                im = im.convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
                images.append(np.asarray(im, np.uint8))
            labels.append(label)
    x = np.stack(images).transpose(0, 3, 1, 2).astype(np.float32) / 255.0
    x = (x - np.array(MEAN, np.float32)[:, None, None]) / np.array(STD, np.float32)[:, None, None]
    return x, np.array(labels, np.int64)


def run_peer(a):
    """The PyTorch process: prints one JSON line with images/s and the losses."""
    import torch
    from model_peers import build, param_count
    torch.set_num_threads(a.threads)
    torch.manual_seed(SEED)
    m = MODELS[a.model]
    if m["data"] == "cifar10":
        x, y = read_cifar(a.data)
        x = torch.from_numpy(x.copy()).float().div_(255.0)
        flip = False
    else:
        x, y = read_image_folder(a.data)
        # dtrain trains on all but a seeded tenth; the peer holds out as many.
        keep = torch.randperm(len(y))[:len(y) - int(len(y) * VALIDATION_FRACTION)]
        x, y = torch.from_numpy(x)[keep].contiguous(), torch.from_numpy(y)[keep]
        flip = True
    y = torch.as_tensor(y)
    net = build(a.model, m["classes"], m.get("width", 1.0))
    net.train()
    if a.channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    loss_fn = torch.nn.CrossEntropyLoss()
    n, batch = x.shape[0], m["batch"]
    per_epoch = (n + batch - 1) // batch
    perm = torch.randperm(n)
    losses = []

    def step(i):
        nonlocal perm
        j = i % per_epoch
        if i > 0 and j == 0:
            perm = torch.randperm(n)
        idx = perm[j * batch:(j + 1) * batch]
        xb = x[idx]
        if flip:
            xb = torch.where((torch.rand(len(idx)) < 0.5)[:, None, None, None], xb.flip(3), xb)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = loss_fn(net(xb), y[idx])
        loss.backward()
        opt.step()
        losses.append(loss.item())
        return len(idx)

    for i in range(a.warmup):
        step(i)
    t0 = time.perf_counter()
    samples = sum(step(i) for i in range(a.warmup, a.warmup + a.steps))
    dt = time.perf_counter() - t0
    print(json.dumps({"images_per_s": samples / dt, "steps": a.steps, "seconds": dt, "images": n,
                      "params": param_count(net), "first_loss": losses[0], "last_loss": losses[-1]}))


def torch_train(model, setting, data_dir, warmup, steps):
    """(the peer's JSON, peak RSS MB)."""
    load.wait_for_idle()
    threads, channels_last, bf16 = {**TORCH_SETTINGS, **PYPI_SETTINGS}[setting]
    out, rss = run_with_rss([peer_python(setting), os.path.abspath(__file__), "--peer", "--model", model,
                             "--threads", str(threads), "--data", data_dir, "--warmup", str(warmup),
                             "--steps", str(steps)] + (["--channels-last"] if channels_last else []) +
                            (["--bf16"] if bf16 else []))
    return json.loads(out.strip().splitlines()[-1]), rss


# ---------------------------------------------------------------------------- self-check

def self_check(dtrain):
    """Checks the PyTorch models' parameter counts against the published ones and their
    output shapes; compares dtrain's counts from `dtrain check` (on synthetic data of the
    same shape and classes) when the binary knows the presets. Returns the exit status:
    1 when a count or shape differs."""
    import torch
    from model_peers import PUBLISHED_PARAMS, build, param_count
    sides = {"resnet20": 32, "resnet32": 32, "resnet56": 32, "resnet18": 224, "mobilenet_v2": 224}
    failures = []
    with tempfile.TemporaryDirectory() as work:
        for (name, classes), published in PUBLISHED_PARAMS.items():
            net, side = build(name, classes), sides[name]
            got = param_count(net)
            with torch.no_grad():
                out = tuple(net.eval()(torch.zeros(1, 3, side, side)).shape)
            ok = got == published and out == (1, classes)
            line = (f"{name:13} {classes:5} classes  PyTorch {got:>11,} {'=' if got == published else '!='} "
                    f"published {published:>11,} ({got / 1e6:.2f}M), output {list(out)} for {side}x{side}")
            if not ok:
                failures.append(f"PyTorch {name}")
            dt, why = dtrain_check_count(dtrain, name, classes, side, work)
            if dt is None:
                line += f"; dtrain not checked: {why}"
            else:
                line += f"; dtrain {dt:,} {'=' if dt == published else '!='} published"
                if dt != published:
                    failures.append(f"dtrain {name}")
                    buffers = sum(b.numel() for k, b in net.named_buffers() if "running" in k)
                    if dt - published == buffers:
                        line += " (the difference is BatchNorm's running mean and variance, which are not parameters)"
            print(line)
    print("self-check: " + (f"FAIL ({', '.join(failures)})" if failures else "PASS"))
    return 1 if failures else 0


def dtrain_check_count(dtrain, name, classes, side, work):
    """dtrain's count for `name` via `dtrain check` on synthetic data, or (None, reason)."""
    if not os.path.exists(dtrain):
        return None, f"{dtrain} not found"
    if name == "mobilenet_v2":
        model_toml = 'preset = "mobilenet_v2"\nwidth = 1.0\n'
    else:
        model_toml = f'preset = "resnet"\ndepth = {int(name[6:])}\n'
    job = os.path.join(work, f"check_{name}_{classes}.toml")
    with open(job, "w") as f:
        f.write(f'[job]\nname = "check_{name}"\nrun_dir = {toml_str(os.path.join(work, "run"))}\n'
                f'[model]\n{model_toml}[data]\ndataset = "synthetic"\nshape = [3, {side}, {side}]\n'
                f"classes = {classes}\ntrain_samples = 100\ntest_samples = 10\n")
    return dtrain_params(dtrain, job)


# ---------------------------------------------------------------------------- benchmark

def bench(a):
    dtrain = a.dtrain
    if not a.pytorch_only and not os.path.exists(dtrain):
        sys.exit(f"bench: {dtrain} not found; run scripts/build.sh first (or --pytorch-only)")
    models = [a.only] if a.only else list(MODELS)
    steps = {m: a.steps or MODELS[m]["steps"] for m in models}
    results, loader_runs = {}, []
    with tempfile.TemporaryDirectory() as work:
        data_root = a.data or os.path.join(work, "data")
        t = time.perf_counter()
        dirs = prepare_data(data_root)
        print(f"data: {data_root} ({time.perf_counter() - t:.1f} s to prepare)", flush=True)
        jobs = {}
        for model in models:
            kind = MODELS[model]["data"]
            run_dir = os.path.join(work, f"run_{model}")
            job = write_model_job(os.path.join(work, f"bench_{model}.toml"), model, run_dir,
                                  a.warmup + steps[model], data_toml(kind, dirs[kind]))
            jobs[model] = (job, run_dir)
            results[model] = {"dtrain": [], "dtrain_rss": [], "torch": {s: [] for s in a.torch_settings},
                              "torch_rss": {s: [] for s in a.torch_settings}}
        load.WAIT_FOR_IDLE_S = a.wait_for_idle
        watch = load.LoadWatch()
        watch.part = "all runs"
        # Interleave the programs so drift in machine load hits them alike.
        for r in range(a.repeats):
            for model in models:
                res = results[model]
                if not a.pytorch_only:
                    ips, rss = dtrain_train(dtrain, *jobs[model], a.warmup)
                    res["dtrain"].append(ips)
                    res["dtrain_rss"].append(rss)
                    print(f"round {r + 1}: {model} dtrain {ips:.1f} img/s", flush=True)
                for s in a.torch_settings:
                    out, rss = torch_train(model, s, dirs[MODELS[model]["data"]], a.warmup, steps[model])
                    res["torch"][s].append(out)
                    res["torch_rss"][s].append(rss)
                    print(f"round {r + 1}: {model} PyTorch {s} {out['images_per_s']:.1f} img/s "
                          f"(loss {out['first_loss']:.3f} -> {out['last_loss']:.3f})", flush=True)
            if not a.pytorch_only and "mobilenet_v2" in models:
                out, rss = dtrain_loader(dtrain, jobs["mobilenet_v2"][0])
                loader_runs.append((out, rss))
                print(f"round {r + 1}: dtrain bench loader {out['images_per_s']:.1f} img/s", flush=True)
        watch.stop()
        summary = {m: summarise(a, m, results[m], jobs[m][0]) for m in models}
    loader = summarise_loader(loader_runs, summary) if loader_runs else None

    print_table(a, steps, summary, loader, watch.summary())
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"models": summary, "loader": loader, "repeats": a.repeats, "warmup": a.warmup,
                       "steps": steps, "torch": torch_version(), "load": watch.summary()}, f, indent=2)
    passed = [r["pass"] for r in summary.values() if "pass" in r] + ([loader["pass"]] if loader else [])
    return 0 if all(passed) else 1


def summarise(a, model, res, job):
    """One model's medians, the best PyTorch setting, the ratio against it and the bar."""
    m = MODELS[model]
    t = {s: statistics.median(o["images_per_s"] for o in runs) for s, runs in res["torch"].items()}
    best = max(t, key=t.get)
    row = {"batch": m["batch"], "torch_images_per_s": t, "torch_best": best,
           "torch_params": res["torch"][best][0]["params"], "torch_peak_rss_mb": max(res["torch_rss"][best]),
           "bar": m["bar"]}
    if res["dtrain"]:
        row["dtrain_images_per_s"] = statistics.median(res["dtrain"])
        row["dtrain_peak_rss_mb"] = max(res["dtrain_rss"])
        row["ratio"] = row["dtrain_images_per_s"] / t[best]
        row["pass"] = row["ratio"] >= m["bar"]
        row["dtrain_params"], _ = dtrain_params(a.dtrain, job)
    return row


def summarise_loader(runs, summary):
    train_ips = summary["mobilenet_v2"]["dtrain_images_per_s"]
    ips = statistics.median(o["images_per_s"] for o, _ in runs)
    loader = {"images_per_s": ips, "threads": runs[0][0].get("threads"), "images": runs[0][0].get("images"),
              "peak_rss_mb": max(r for _, r in runs), "training_images_per_s": train_ips,
              "ratio": ips / train_ips, "bar": LOADER_BAR}
    loader["pass"] = loader["ratio"] >= LOADER_BAR
    return loader


def print_table(a, steps, summary, loader, load_summary):
    settings = " / ".join(a.torch_settings)
    runs = ", ".join(f"{m} {n}" for m, n in steps.items())
    print(f"\nmachine: {os.cpu_count()} cores; medians of {a.repeats} interleaved runs of {a.warmup} warm-up "
          f"steps and then timed steps ({runs}); SGD momentum 0.9, lr 0.05, fp32")
    print(f"share of load samples (twice a second) with another process running: {load_summary or 'none taken'}")
    print(f"PyTorch {torch_version()} at settings {settings} (threads; +cl = channels_last), the best is the "
          f"peer, fed pre-decoded tensors; dtrain fed by its own loader (decoding on its threads, ahead of the "
          f"step)")
    torch_head = f"PyTorch img/s ({settings})"
    print(f"{'model':13} {'batch':>5} {'dtrain img/s':>12} {torch_head:>38} {'best':>6} {'ratio':>6} {'bar':>6} "
          f"{'result':>6} {'dtrain RSS MB':>13} {'PyTorch RSS MB':>14} {'params dtrain / PyTorch':>25}")
    for model, r in summary.items():
        t = r["torch_images_per_s"]
        tcols = " / ".join(f"{t[s]:.1f}" for s in a.torch_settings)
        dash = "-"
        d_ips = f"{r['dtrain_images_per_s']:.1f}" if "ratio" in r else dash
        ratio = f"{r['ratio']:.2f}" if "ratio" in r else dash
        result = ("PASS" if r["pass"] else "FAIL") if "ratio" in r else dash
        d_rss = f"{r['dtrain_peak_rss_mb']:.0f}" if "ratio" in r else dash
        d_params = f"{r['dtrain_params']:,}" if r.get("dtrain_params") is not None else ("?" if "ratio" in r else dash)
        params = f"{d_params} / {r['torch_params']:,}"
        print(f"{model:13} {r['batch']:5} {d_ips:>12} {tcols:>38} {r['torch_best']:>6} {ratio:>6} "
              f"{'>=' + format(r['bar'], 'g'):>6} {result:>6} {d_rss:>13} {r['torch_peak_rss_mb']:14.0f} {params:>25}")
    if loader:
        print(f"loader alone (dtrain bench loader on the mobilenet_v2 job: image folder, {IMAGE_SIZE}x{IMAGE_SIZE}, "
              f"{loader['threads']} threads, {loader['images']} images): {loader['images_per_s']:.1f} img/s against "
              f"dtrain's mobilenet_v2 training {loader['training_images_per_s']:.1f} img/s = "
              f"{loader['ratio']:.2f} (bar >= {LOADER_BAR:g}) {'PASS' if loader['pass'] else 'FAIL'}; "
              f"peak RSS {loader['peak_rss_mb']:.0f} MB")


def settings_list(text):
    names = [s for s in text.split(",") if s]
    unknown = [s for s in names if s not in TORCH_SETTINGS and s not in PYPI_SETTINGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown setting {','.join(unknown) or text!r}; known: "
                                         f"{', '.join([*TORCH_SETTINGS, *PYPI_SETTINGS])}")
    return names


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", help="folder for the generated data (made where missing, kept); default a temp dir")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (at least 1)")
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: resnet20 20, mobilenet_v2 10)")
    ap.add_argument("--only", choices=list(MODELS))
    ap.add_argument("--torch-settings", type=settings_list, default=list(TORCH_SETTINGS),
                    help=f"comma-separated, of {','.join(TORCH_SETTINGS)} (default: all)")
    ap.add_argument("--pytorch-only", action="store_true", help="run the PyTorch side alone")
    ap.add_argument("--pypi", action="store_true",
                    help=f"also the latest PyTorch from PyPI: {', '.join(PYPI_SETTINGS)}")
    ap.add_argument("--wait-for-idle", type=float, default=0, metavar="S",
                    help="before each run wait up to S seconds for no other process to run for 2 s")
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--self-check", action="store_true", help="assert the models' parameter counts")
    # The PyTorch peer process (started by the benchmark); --data is then the model's data folder.
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", choices=list(MODELS), help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--channels-last", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.pypi:
        a.torch_settings = a.torch_settings + [s for s in PYPI_SETTINGS if s not in a.torch_settings]
    if a.peer:
        return run_peer(a)
    if a.self_check:
        return self_check(a.dtrain)
    if a.warmup < 1 or a.steps < 0 or a.repeats < 1:
        sys.exit("bench: --warmup and --repeats must be at least 1, --steps at least 0")
    return bench(a)


if __name__ == "__main__":
    sys.exit(main())
