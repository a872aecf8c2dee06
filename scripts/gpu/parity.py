#!/usr/bin/env python3
"""Training parity on a GPU machine: the same jobs must learn the same on every path.

Items (each PASS or FAIL, with its figures; the mixed-precision ones UNMEASURED where dtrain
refuses the precision on the GPU, its one-line error the reason):
  cuda-vs-cpu    configs/fashion_cnn.toml for --epochs on cuda (fp32) and on the CPU
                 (one thread per core): test accuracies within 0.005 (half a point), and the first 10
                 training losses within 0.1% of each other (same weights, same batches,
                 same dropout masks: only the order of float sums differs).
  bf16-cnn       configs/fashion_cnn.toml for --mixed-epochs on cuda in bf16 against fp32 (the
                 same job, seed and epochs): test accuracies within 0.003 (0.3 points).
  bf16-resnet20  configs/fashion_resnet20.toml (ResNet-20 on Fashion-MNIST) the same way:
                 within 0.003. --mixed-epochs (default 3) stands in for the configurations'
                 own 10 and 12 epochs, to fit the GPU check's time box.
  fp16-cnn       configs/fashion_cnn.toml in fp16 (dynamic loss scaling on the GPU) for
                 --mixed-epochs: the run finishes with a finite test loss and a finite last
                 training loss; its accuracy against fp32's, the steps skipped for an overflow
                 and the final loss scale are reported (no bar on them).
  gloo-2-ranks   the same job mirrored over 2 ranks on the one GPU (backend gloo: NCCL
                 refuses two ranks on one device) against 1 rank (one_device), the same
                 global batch: final test accuracy within 0.005 and test loss within 1%.
  elastic-3-ranks
                 mirrored over 3 ranks on the one GPU (gloo, [cluster] elastic = true); one
                 worker killed (kill -9) after step 150: the 2 others finish the run from
                 their memory, every step is logged once, one generation line names the lost
                 rank, and against the 1-rank run test accuracy is within 0.005 and test loss
                 within 1% (the same global batches throughout).
  ps-2-workers   the same job as a parameter server, 2 workers on the one GPU + 1 shard,
                 against the 1-rank run above: sync within 0.005 in test accuracy and 1% in
                 test loss (the same training up to the order of float sums), async within
                 0.01 in test accuracy.
  central-storage-2-workers
                 central storage, 2 workers on the one GPU (gloo), the variables and the
                 update on rank 0, against the 1-rank run: test accuracy within 0.005 and
                 test loss within 1%.
  pipeline-2-stages
                 the pipeline strategy, 2 stages (1f1b, 4 micro-batches) on the one GPU, the
                 stage-to-stage messages staged through host memory, against the 1-rank run:
                 test accuracy within 0.005 and test loss within 1%.
  nccl-resume    mirrored, 1 rank, backend nccl, constant lr: 200 steps, then
                 `dtrain resume RUN_DIR --set train.steps=400`; against one run of 400
                 steps straight through: the resume reaches step 400 with every step
                 logged once, and its test accuracy is within 0.005 of the straight run's.

Writes the items as JSON (--json; an UNMEASURED item has "pass" null and "result"
"UNMEASURED"). Exit status 0 when no item failed (UNMEASURED is not a failure).

Usage: scripts/gpu/parity.py --dtrain build-gpu/dtrain --data-dir DIR [--epochs N] [--mixed-epochs N]
                             [--budget S] [--work DIR] [--json FILE] [--only NAME...]
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
JOB = os.path.join(ROOT, "configs", "fashion_cnn.toml")
RESNET20_JOB = os.path.join(ROOT, "configs", "fashion_resnet20.toml")
MIXED_ACCURACY_BAR = 0.003  # bf16 against fp32: 0.3 points of test accuracy
DTRAIN_EXIT_BAD_CONFIG = 2  # cli/commands.h kExitBadConfig: the job is refused
UNMEASURED = "UNMEASURED"
DONE = re.compile(r"done: step (\d+), test loss ([0-9.eE+-]+|nan|inf), test accuracy ([0-9.eE+-]+)")
RUN_TIMEOUT_S = 180  # one run; a 1-epoch cnn takes well under a minute on a GPU machine
DEADLINE = [float("inf")]  # time.monotonic() after which no run starts (--budget)


class Run:
    """One dtrain command's outcome: exit code, last lines, final step and test figures."""

    def __init__(self, label, cmd, run_dir, meanwhile=None):
        """meanwhile(process, run_dir), when given, runs while the command does (to kill a worker)."""
        self.label, self.cmd, self.run_dir = label, cmd, run_dir
        self.note = ""
        t0 = time.monotonic()
        timeout = min(RUN_TIMEOUT_S, DEADLINE[0] - t0)
        if timeout < 10:
            self.code, out = "not run", "the time budget (--budget) is spent"
        else:
            # Output to a file: the command may write while `meanwhile` runs.
            with open(run_dir + ".out", "w+") as sink:
                p = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, text=True)
                try:
                    if meanwhile:
                        self.note = meanwhile(p, run_dir, t0 + timeout) or ""
                    self.code = p.wait(timeout=max(1.0, t0 + timeout - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    self.code = f"timeout after {timeout:.0f} s"
                sink.seek(0)
                out = sink.read()
            os.remove(run_dir + ".out")
        self.seconds = time.monotonic() - t0
        self.tail = [l for l in out.splitlines() if l.strip()][-3:]
        m = DONE.findall(out)
        self.step, self.loss, self.accuracy = (int(m[-1][0]), float(m[-1][1]), float(m[-1][2])) if m else (None,) * 3
        self.ok = self.code == 0 and m != []
        log = os.path.join(os.path.dirname(run_dir), re.sub(r"\W+", "_", label).strip("_") + ".log")
        with open(log, "w") as f:
            f.write(" ".join(cmd) + "\n" + out)

    def why(self):
        code = f"exit {self.code}" if isinstance(self.code, int) else self.code
        return f"{self.label}: {code}: " + " | ".join(self.tail)

    def refusal(self):
        """dtrain's one-line error when it refused the job's precision on the GPU (an older
        dtrain, before 16-bit precisions ran there), else None."""
        if self.code != DTRAIN_EXIT_BAD_CONFIG:
            return None
        for line in self.tail:
            if line.startswith("dtrain: error:") and "precision" in line:
                return line[len("dtrain: error:"):].strip()
        return None

    def train_rows(self):
        path = os.path.join(self.run_dir, "metrics.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as f:
            return [r for r in (json.loads(l) for l in f if l.endswith("}\n")) if r.get("split") == "train"]

    def train_losses(self):
        return [(r["step"], r["loss"]) for r in self.train_rows()]

    def figures(self):
        return {"exit": self.code, "step": self.step, "test_loss": self.loss, "test_accuracy": self.accuracy,
                "seconds": round(self.seconds, 1)}


def train(a, label, sets, command="train", run_dir=None, meanwhile=None, job=JOB):
    run_dir = run_dir or os.path.join(a.work, label)
    if command == "train":
        shutil.rmtree(run_dir, ignore_errors=True)
        cmd = [a.dtrain, "train", job, "--quiet", "--overwrite", "--set", f"job.run_dir={run_dir}",
               "--set", f"data.dir={a.data_dir}"]
    else:
        cmd = [a.dtrain, "resume", run_dir, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    print(f"  {label}: {' '.join(sets)}", flush=True)
    os.makedirs(os.path.dirname(run_dir), exist_ok=True)
    return Run(label, cmd, run_dir, meanwhile)


def item(name, ok, detail, **figures):
    print(f"{name}: {'PASS' if ok else 'FAIL'}: {detail}", flush=True)
    return {"name": name, "pass": bool(ok), "detail": detail, **figures}


def unmeasured_item(name, detail, **figures):
    print(f"{name}: {UNMEASURED}: {detail}", flush=True)
    return {"name": name, "pass": None, "result": UNMEASURED, "detail": detail, **figures}


GPU_RUNS = {}  # (job, precision, epochs) -> Run: one run serves every item that compares with it


def gpu_run(a, model, precision, epochs, label=None):
    """configs' `model` job ("cnn" or "resnet20") on cuda in `precision` for `epochs`, run once."""
    job = {"cnn": JOB, "resnet20": RESNET20_JOB}[model]
    key = (job, precision, epochs)
    if key not in GPU_RUNS:
        GPU_RUNS[key] = train(a, label or f"{model}_cuda_{precision}_{epochs}ep",
                              [f"train.epochs={epochs}", "job.device=cuda", f"job.precision={precision}"], job=job)
    return GPU_RUNS[key]


def cuda_vs_cpu(a):
    common = [f"train.epochs={a.epochs}"]
    gpu = gpu_run(a, "cnn", "fp32", a.epochs, label="cnn_cuda")
    cpu = train(a, "cnn_cpu", common + ["job.device=cpu", "job.threads=0"])
    figures = {"cuda": gpu.figures(), "cpu": cpu.figures()}
    if not (gpu.ok and cpu.ok):
        return item("cuda-vs-cpu", False, "; ".join(r.why() for r in (gpu, cpu) if not r.ok), **figures)
    early_g, early_c = dict(gpu.train_losses()[:10]), dict(cpu.train_losses()[:10])
    steps = sorted(set(early_g) & set(early_c))
    early = max((abs(early_g[s] - early_c[s]) / max(abs(early_c[s]), 1e-12) for s in steps), default=float("inf"))
    diff = abs(gpu.accuracy - cpu.accuracy)
    ok = diff <= 0.005 and early <= 1e-3 and len(steps) == 10
    return item("cuda-vs-cpu", ok,
                f"{a.epochs} epoch(s): test accuracy cuda {gpu.accuracy:.4f} / cpu {cpu.accuracy:.4f} (diff "
                f"{diff:.4f}, bar 0.005); first {len(steps)} losses differ by at most {early:.1e} (bar 1e-3)",
                accuracy_diff=diff, early_loss_rel_diff=early, **figures)


ONE_RANK = {}  # the 1-rank run, made once for the items that compare against it


def one_rank(a):
    if "run" not in ONE_RANK:
        common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32"]
        ONE_RANK["run"] = train(a, "cnn_1rank", common + ["strategy.type=one_device"])
    return ONE_RANK["run"]


def same_as_one_rank(a, name, run, label, key, also_ok=True, also_said=""):
    """The item comparing a several-process run with the 1-rank run: test accuracy within 0.005,
    test loss within 1%; `also_ok` and `also_said`: the item's other checks."""
    one = one_rank(a)
    figures = {key: run.figures(), "one_rank": one.figures()}
    if not (run.ok and one.ok):
        return item(name, False, also_said + "; ".join(r.why() for r in (run, one) if not r.ok), **figures)
    acc_diff = abs(run.accuracy - one.accuracy)
    loss_rel = abs(run.loss - one.loss) / max(one.loss, 1e-12)
    ok = acc_diff <= 0.005 and loss_rel <= 0.01 and also_ok
    return item(name, ok,
                f"{also_said}test accuracy {label} {run.accuracy:.4f} / 1 rank {one.accuracy:.4f} (diff "
                f"{acc_diff:.4f}, bar 0.005); test loss {run.loss:.4f} / {one.loss:.4f} ({loss_rel:.1%}, bar 1%)",
                accuracy_diff=acc_diff, loss_rel_diff=loss_rel, **figures)


def gloo_two_ranks(a):
    common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32"]
    two = train(a, "cnn_gloo_2ranks", common + ["strategy.type=mirrored", "strategy.workers=2",
                                                "strategy.backend=gloo"])
    return same_as_one_rank(a, "gloo-2-ranks", two, "2 ranks", "two_ranks")


def ps_two_workers(a):
    common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32",
              "strategy.type=parameter_server", "strategy.workers=2", "strategy.ps=1"]
    sync = train(a, "cnn_ps_sync", common + ["strategy.consistency=sync"])
    asyn = train(a, "cnn_ps_async", common + ["strategy.consistency=async"])
    one = one_rank(a)
    figures = {"sync": sync.figures(), "async": asyn.figures(), "one_rank": one.figures()}
    if not (sync.ok and asyn.ok and one.ok):
        return item("ps-2-workers", False, "; ".join(r.why() for r in (sync, asyn, one) if not r.ok), **figures)
    sync_acc = abs(sync.accuracy - one.accuracy)
    sync_loss = abs(sync.loss - one.loss) / max(one.loss, 1e-12)
    async_acc = abs(asyn.accuracy - one.accuracy)
    ok = sync_acc <= 0.005 and sync_loss <= 0.01 and async_acc <= 0.01
    return item("ps-2-workers", ok,
                f"test accuracy sync {sync.accuracy:.4f} / async {asyn.accuracy:.4f} / 1 rank {one.accuracy:.4f} "
                f"(sync diff {sync_acc:.4f}, bar 0.005; async diff {async_acc:.4f}, bar 0.01); test loss sync "
                f"{sync.loss:.4f} / 1 rank {one.loss:.4f} ({sync_loss:.1%}, bar 1%)",
                sync_accuracy_diff=sync_acc, sync_loss_rel_diff=sync_loss, async_accuracy_diff=async_acc, **figures)


def central_storage_two_workers(a):
    common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32",
              "strategy.type=central_storage", "strategy.workers=2", "strategy.backend=gloo"]
    two = train(a, "cnn_central_storage", common)
    return same_as_one_rank(a, "central-storage-2-workers", two, "2 workers", "two_workers")


def pipeline_two_stages(a):
    common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32", "strategy.type=pipeline",
              "strategy.stages=2", "strategy.micro_batches=4", "strategy.schedule=1f1b"]
    two = train(a, "cnn_pipeline_2stages", common)
    return same_as_one_rank(a, "pipeline-2-stages", two, "2 stages", "two_stages")


def bf16_against_fp32(a, name, model):
    """A bf16 run on the GPU against the fp32 one, the same job and epochs: test accuracy within
    MIXED_ACCURACY_BAR."""
    fp32 = gpu_run(a, model, "fp32", a.mixed_epochs)
    bf16 = gpu_run(a, model, "bf16", a.mixed_epochs)
    figures = {"epochs": a.mixed_epochs, "fp32": fp32.figures(), "bf16": bf16.figures()}
    refused = bf16.refusal()
    if refused and fp32.ok:
        return unmeasured_item(name, f"dtrain refuses bf16 on the GPU: {refused}; fp32 test accuracy "
                                     f"{fp32.accuracy:.4f} ({a.mixed_epochs} epoch(s))", **figures)
    if not (fp32.ok and bf16.ok):
        return item(name, False, "; ".join(r.why() for r in (fp32, bf16) if not r.ok), **figures)
    diff = abs(bf16.accuracy - fp32.accuracy)
    ok = diff <= MIXED_ACCURACY_BAR + 1e-9 and math.isfinite(bf16.loss)
    return item(name, ok,
                f"{a.mixed_epochs} epoch(s) on cuda: test accuracy bf16 {bf16.accuracy:.4f} / fp32 "
                f"{fp32.accuracy:.4f} (diff {100 * diff:.2f} points, bar {100 * MIXED_ACCURACY_BAR:.1f}); test loss "
                f"{bf16.loss:.4f} / {fp32.loss:.4f}; {bf16.seconds:.0f} s / {fp32.seconds:.0f} s",
                accuracy_diff=diff, **figures)


def bf16_cnn(a):
    return bf16_against_fp32(a, "bf16-cnn", "cnn")


def bf16_resnet20(a):
    return bf16_against_fp32(a, "bf16-resnet20", "resnet20")


def finite(v):
    return v is not None and math.isfinite(v)


def fp16_cnn(a):
    """fp16 on the GPU: the run finishes with finite losses; its loss scale's work is reported."""
    fp16 = gpu_run(a, "cnn", "fp16", a.mixed_epochs)
    fp32 = gpu_run(a, "cnn", "fp32", a.mixed_epochs)
    figures = {"epochs": a.mixed_epochs, "fp16": fp16.figures(), "fp32": fp32.figures()}
    refused = fp16.refusal()
    if refused:
        return unmeasured_item("fp16-cnn", f"dtrain refuses fp16 on the GPU: {refused}", **figures)
    if not fp16.ok:
        return item("fp16-cnn", False, fp16.why(), **figures)
    rows = fp16.train_rows()
    # Each fp16 line holds the scale its step used and the steps skipped so far; the last line
    # with samples (the CPU logs a skipped step with none) says where training ended.
    trained = [r for r in rows if r.get("samples")]
    last_loss = trained[-1]["loss"] if trained else None
    skipped = rows[-1].get("skipped_steps") if rows else None
    scale = rows[-1].get("loss_scale") if rows else None
    ok = finite(fp16.loss) and finite(last_loss)
    against = (f"; fp32 {fp32.accuracy:.4f} (diff {100 * abs(fp16.accuracy - fp32.accuracy):.2f} points, no bar)"
               if fp32.ok else f"; fp32 not measured: {fp32.why()}")
    figures.update(last_train_loss=last_loss, skipped_steps=skipped, final_loss_scale=scale)
    return item("fp16-cnn", ok,
                f"{a.mixed_epochs} epoch(s) on cuda: test loss {fp16.loss} and last training loss {last_loss} "
                f"(bar: both finite); test accuracy {fp16.accuracy:.4f}{against}; "
                f"{'-' if skipped is None else f'{skipped:.0f}'} step(s) skipped for an overflow, last loss "
                f"scale {'-' if scale is None else f'{scale:g}'}", **figures)


def logged_step(run_dir):
    """The last training step metrics.jsonl holds so far (0 before the first)."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            steps = [json.loads(l)["step"] for l in f if l.endswith("}\n") and '"split":"train"' in l]
    except OSError:
        return 0
    return max(steps, default=0)


def kill_a_worker_after(step):
    """A `meanwhile` for Run: kill -9 the host process's last worker once `step` is logged."""
    def meanwhile(p, run_dir, deadline):
        while p.poll() is None and time.monotonic() < deadline and logged_step(run_dir) < step:
            time.sleep(0.05)
        try:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                workers = [int(w) for w in f.read().split()]
        except OSError:
            workers = []
        if p.poll() is not None or not workers:
            return "the run ended before a worker could be killed"
        os.kill(workers[-1], 9)
        return f"killed worker pid {workers[-1]} at step {logged_step(run_dir)}"
    return meanwhile


def elastic_three_ranks(a):
    common = [f"train.epochs={a.epochs}", "job.device=cuda", "job.precision=fp32", "strategy.type=mirrored",
              "strategy.workers=3", "strategy.backend=gloo", "cluster.elastic=true",
              "train.checkpoint_every_steps=100"]
    run = train(a, "cnn_elastic_3ranks", common, meanwhile=kill_a_worker_after(150))
    rows = []
    if os.path.exists(os.path.join(run.run_dir, "metrics.jsonl")):
        with open(os.path.join(run.run_dir, "metrics.jsonl")) as f:
            rows = [json.loads(l) for l in f if l.endswith("}\n")]
    steps = [r["step"] for r in rows if r.get("split") == "train"]
    generations = [r for r in rows if r.get("event") == "generation"]
    logged_once = steps == list(range(1, len(steps) + 1)) and run.step is not None and len(steps) == run.step
    regrouped = len(generations) == 1 and generations[0]["world_size"] == 2 and "lost rank 2" in generations[0]["change"]
    said = (f"{run.note}; every step logged once: {logged_once}; generation lines: "
            f"{[g['change'] for g in generations]}; ")
    return same_as_one_rank(a, "elastic-3-ranks", run, "3 ranks, 1 lost", "elastic", logged_once and regrouped, said)


def nccl_resume(a):
    common = ["job.device=cuda", "job.precision=fp32", "strategy.type=mirrored", "strategy.workers=1",
              "strategy.backend=nccl", "schedule.type=constant", "schedule.warmup_steps=0"]
    first = train(a, "cnn_nccl_resumed", common + ["train.steps=200"])
    resumed = train(a, "cnn_nccl_resumed (resume)", ["train.steps=400"], command="resume",
                    run_dir=os.path.join(a.work, "cnn_nccl_resumed")) if first.ok else None
    straight = train(a, "cnn_nccl_straight", common + ["train.steps=400"])
    runs = [r for r in (first, resumed, straight) if r]
    figures = {"first": first.figures(), "resumed": resumed.figures() if resumed else None,
               "straight": straight.figures()}
    bad = [r for r in runs if not r.ok]
    if bad or not resumed:
        return item("nccl-resume", False, "; ".join(r.why() for r in bad) or "the first run failed", **figures)
    steps = [s for s, _ in resumed.train_losses()]
    logged_once = steps == list(range(1, 401))
    diff = abs(resumed.accuracy - straight.accuracy)
    ok = resumed.step == 400 and logged_once and diff <= 0.005
    same_bits = resumed.loss == straight.loss and resumed.accuracy == straight.accuracy
    return item("nccl-resume", ok,
                f"200 steps, resumed to step {resumed.step} (steps 1..400 logged once: {logged_once}); test "
                f"accuracy resumed {resumed.accuracy:.4f} / straight {straight.accuracy:.4f} (diff {diff:.4f}, "
                f"bar 0.005); test loss {resumed.loss:.4f} / {straight.loss:.4f}"
                f"{' (identical)' if same_bits else ''}",
                accuracy_diff=diff, identical=same_bits, **figures)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", required=True)
    ap.add_argument("--data-dir", required=True, help="the Fashion-MNIST folder")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--work", default=os.path.join(ROOT, "build-gpu", "parity"))
    ap.add_argument("--json", default="")
    ap.add_argument("--budget", type=float, default=0, help="seconds for all runs together (default: no limit)")
    ap.add_argument("--mixed-epochs", type=int, default=3,
                    help="epochs of the mixed-precision items' runs, fp32 and 16-bit alike (default 3)")
    # The mixed-precision items right after cuda-vs-cpu: a budget that runs short cuts the
    # multi-process items, which the fp32 work has measured before.
    names = ["cuda-vs-cpu", "bf16-cnn", "bf16-resnet20", "fp16-cnn", "gloo-2-ranks", "elastic-3-ranks",
             "ps-2-workers", "central-storage-2-workers", "pipeline-2-stages", "nccl-resume"]
    ap.add_argument("--only", nargs="+", choices=names, default=names)
    a = ap.parse_args()
    a.dtrain = os.path.abspath(a.dtrain)
    if not os.path.exists(a.dtrain):
        sys.exit(f"parity: {a.dtrain} not found; build it first (scripts/gpu/check.sh build)")
    if not os.path.exists(os.path.join(a.data_dir, "train-images-idx3-ubyte.gz")) and not os.path.exists(
            os.path.join(a.data_dir, "train-images-idx3-ubyte")):
        sys.exit(f"parity: no Fashion-MNIST in {a.data_dir}")
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    if a.budget > 0:
        DEADLINE[0] = time.monotonic() + a.budget
    checks = {"cuda-vs-cpu": cuda_vs_cpu, "bf16-cnn": bf16_cnn, "bf16-resnet20": bf16_resnet20, "fp16-cnn": fp16_cnn,
              "gloo-2-ranks": gloo_two_ranks, "ps-2-workers": ps_two_workers,
              "central-storage-2-workers": central_storage_two_workers, "pipeline-2-stages": pipeline_two_stages,
              "elastic-3-ranks": elastic_three_ranks, "nccl-resume": nccl_resume}
    items = [checks[name](a) for name in a.only]
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump({"epochs": a.epochs, "mixed_epochs": a.mixed_epochs, "job": os.path.relpath(JOB, ROOT),
                       "items": items}, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    sys.exit(0 if all(i["pass"] is not False for i in items) else 1)


if __name__ == "__main__":
    main()
