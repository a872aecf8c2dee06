#!/usr/bin/python3
"""dtrain's multi-process benchmark against PyTorch DDP (Debian's python3-torch), in one run.

Parts (all by default; --only picks some):
  throughput  images/s on Fashion-MNIST, global batch 128, SGD momentum 0.9, lr 0.05:
              PyTorch DDP (gloo) 2 ranks x 1 thread and dtrain mirrored 2 workers x 1
              thread, for the mlp and cnn presets; dtrain one_device 1 thread for the cnn
              (the scaling bar). PyTorch runs with one OpenBLAS thread per rank and with
              OpenBLAS's default; the better is the peer. Runs are interleaved so drift in
              machine load hits all alike; each figure is the median over the rounds.
  allreduce   100 MB float32 all-reduce between 2 local ranks: torch.distributed (gloo)
              against `dtrain bench allreduce`; medians of 10 calls after 2 warm-up, both
              checking the sums; interleaved.
  failure     5 trials: kill -9 one worker of a 2-worker mirrored run (default heartbeat
              timeout) once it is training, and time until every process of the run
              (host and workers) has exited.
  rendezvous  `dtrain train` with 8 workers x 1 thread: from launch to "group formed" on
              the coordinator's log (all joined) and to the start of the first step (the
              first metrics.jsonl record's time less its step time).

Prints each figure with its peer, the ratio and the bar, PASS or FAIL.

On a shared machine, --wait-for-idle S holds each measurement until no other process has
run for 2 s (up to S seconds), and the report says how much of each part still ran beside
other work. A dtrain run that fails is run once more and reported at the end.

Usage: scripts/bench/distributed_vs_pytorch.py [--quick] [--only PART ...] [--wait-for-idle S]
                                               [--repeats N] [--dtrain PATH]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from bench_job import write_bench_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEER = os.path.join(ROOT, "scripts", "bench", "pytorch_ddp_peer.py")
PARTS = ("throughput", "allreduce", "failure", "rendezvous")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")
    return p.stdout


# dtrain runs that failed and were run again: (command, the failure's last lines).
# Reported at the end, never hidden: a failure here is a bug to fix.
RETRIED = []


def run_dtrain(cmd):
    """Runs a dtrain command; a failed run is recorded and run once more."""
    for attempt in (1, 2):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode == 0:
            return p.stdout
        tail = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()][-3:]
        RETRIED.append((" ".join(cmd[1:3]), p.returncode, tail))
    sys.exit(f"bench: {' '.join(cmd)} failed twice ({p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")


def last_json(text):
    return json.loads([l for l in text.splitlines() if l.startswith("{")][-1])


def read_stat(path):
    """(comm, state, ppid) from a /proc stat file, or None when it is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    return head.partition("(")[2], fields[0], int(fields[1])


def foreign_load():
    """(compilers, running threads) of processes outside this benchmark's own
    process tree: other people's builds and tests on a shared machine. They
    distort timings, two-process runs most (those need both cores)."""
    procs = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            st = read_stat(f"/proc/{pid}/stat")
            if st:
                procs[int(pid)] = st
    me = os.getpid()

    def ours(pid):
        for _ in range(64):
            if pid == me:
                return True
            if pid not in procs or pid <= 1:
                return False
            pid = procs[pid][2]
        return False

    compilers = running = 0
    for pid, (comm, _, ppid) in procs.items():
        if pid <= 2 or ppid == 2 or ours(pid):  # init, kernel threads, or this benchmark
            continue
        compilers += comm in ("cc1plus", "cc1")
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            st = read_stat(f"/proc/{pid}/task/{tid}/stat")
            running += bool(st and st[1] == "R")
    return compilers, running


WAIT_FOR_IDLE_S = 0.0  # --wait-for-idle
WAITING = threading.Event()


def wait_for_idle():
    """Before a measurement: wait (up to --wait-for-idle seconds) until nothing
    outside this benchmark has been running for 2 s."""
    deadline = time.monotonic() + WAIT_FOR_IDLE_S
    WAITING.set()  # not measuring: LoadWatch does not count this time
    quiet = 0
    while quiet < 4 and time.monotonic() < deadline:
        quiet = quiet + 1 if foreign_load() == (0, 0) else 0
        time.sleep(0.5)
    WAITING.clear()


class LoadWatch:
    """Samples foreign_load() twice a second on a thread, per part (not while
    waiting for idle), so the report can say how much of each part's measuring
    ran beside someone else's work."""

    def __init__(self):
        self.part, self.samples, self._stop = None, {}, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.5):
            if self.part and not WAITING.is_set():
                self.samples.setdefault(self.part, []).append(foreign_load())

    def stop(self):
        self._stop.set()
        self._thread.join()

    def summary(self):
        """Per part: the share of samples with another process running, and with a compiler."""
        out = []
        for part, v in self.samples.items():
            busy = sum(1 for _, r in v if r) * 100 // len(v)
            compiling = sum(1 for c, _ in v if c) * 100 // len(v)
            out.append(f"{part} {busy}% busy / {compiling}% compiling")
        return ", ".join(out)


# ---------------------------------------------------------------------------- dtrain jobs

def write_job(workdir, name, model, steps, workers, threads=1):
    """A job like cpu_vs_pytorch.py's, with the workers and threads given."""
    strategy = (f'type = "mirrored"\nworkers = {workers}' if workers > 1 else 'type = "one_device"')
    run_dir = os.path.join(workdir, f"run_{name}")
    path = write_bench_job(os.path.join(workdir, f"{name}.toml"), name, run_dir, model, steps,
                           job_extra=f"threads = {threads}\n", strategy=f"[strategy]\n{strategy}\n")
    return path, run_dir


def read_metrics(run_dir):
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.endswith("}\n")]


def dtrain_images_per_s(a, workdir, model, workers, warmup, steps):
    wait_for_idle()
    job, run_dir = write_job(workdir, f"{model}_{workers}w", model, warmup + steps, workers)
    run_dtrain([a.dtrain, "train", job, "--quiet", "--overwrite"])
    train = [r for r in read_metrics(run_dir) if r["split"] == "train"]
    t0 = next(r["time"] for r in train if r["step"] == warmup)
    samples = sum(r["samples"] for r in train if r["step"] > warmup)
    return samples / (train[-1]["time"] - t0)


# Each PyTorch rank runs torch.set_num_threads(1); Debian's torch calls OpenBLAS,
# which starts its own threads unless told otherwise. Both settings are run and
# the better is the peer: one BLAS thread per rank suits the mlp, OpenBLAS's
# default (a thread per core in each rank) was faster for the cnn.
TORCH_BLAS = {"blas1": 1, "blas-default": 0}


def torch_images_per_s(model, warmup, steps, blas_threads):
    wait_for_idle()
    out = run(["/usr/bin/python3", PEER, "--mode", "train", "--model", model, "--world", "2", "--threads", "1",
               "--blas-threads", str(blas_threads), "--warmup", str(warmup), "--steps", str(steps)])
    return last_json(out)["images_per_s"]


# ---------------------------------------------------------------------------- parts

def part_throughput(a, workdir, rows):
    plan = {"mlp": (20, 150 if a.quick else 400), "cnn": (20, 20 if a.quick else 150)}
    names = [f"{who}_{model}" for model in plan for who in ["dtrain"] + [f"torch_{b}" for b in TORCH_BLAS]]
    runs = {k: [] for k in names + ["dtrain_cnn_1w"]}
    for rep in range(a.repeats):
        for model, (warmup, steps) in plan.items():
            for b, blas_threads in TORCH_BLAS.items():
                runs[f"torch_{b}_{model}"].append(torch_images_per_s(model, warmup, steps, blas_threads))
            runs[f"dtrain_{model}"].append(dtrain_images_per_s(a, workdir, model, 2, warmup, steps))
            if model == "cnn":
                runs["dtrain_cnn_1w"].append(dtrain_images_per_s(a, workdir, model, 1, warmup, steps))
        print(f"  throughput round {rep + 1}: " +
              ", ".join(f"{k} {v[-1]:.0f}" for k, v in runs.items()) + " img/s", flush=True)
    med = {k: statistics.median(v) for k, v in runs.items()}
    for model, bar in (("mlp", 2.0), ("cnn", 1.3)):
        best = max(TORCH_BLAS, key=lambda b: med[f"torch_{b}_{model}"])
        d, t = med[f"dtrain_{model}"], med[f"torch_{best}_{model}"]
        rows.append((f"{model} 2 ranks x 1 thread, img/s", f"{d:,.0f}", f"{t:,.0f} (DDP {best})", d / t,
                     f">= {bar}", d / t >= bar, runs[f"dtrain_{model}"], runs[f"torch_{best}_{model}"]))
    d2, d1 = med["dtrain_cnn"], med["dtrain_cnn_1w"]
    rows.append(("cnn scaling 2x1 / 1x1, img/s", f"{d2:,.0f}", f"{d1:,.0f} (dtrain 1x1)", d2 / d1, ">= 1.8",
                 d2 / d1 >= 1.8, runs["dtrain_cnn"], runs["dtrain_cnn_1w"]))


def part_allreduce(a, workdir, rows):
    iters = 5 if a.quick else 10
    d_runs, t_runs = [], []
    for rep in range(a.repeats):
        wait_for_idle()
        out = run(["/usr/bin/python3", PEER, "--mode", "allreduce", "--world", "2", "--mb", "100", "--iters",
                   str(iters), "--warmup", "2"])
        t_runs.append(last_json(out)["median_ms"])
        wait_for_idle()
        out = run_dtrain([a.dtrain, "bench", "allreduce", "--ranks", "2", "--mb", "100", "--iters", str(iters),
                          "--warmup", "2", "--json"])
        d = last_json(out)
        d_runs.append(d["median_ms"])
        print(f"  all-reduce round {rep + 1}: torch {t_runs[-1]:.1f} ms, dtrain {d_runs[-1]:.1f} ms "
              f"({d['algorithm']})", flush=True)
    d, t = statistics.median(d_runs), statistics.median(t_runs)
    rows.append(("all-reduce 100 MB, 2 ranks, ms", f"{d:.1f}", f"{t:.1f} (gloo)", d / t, "<= 1.0", d <= t,
                 d_runs, t_runs))


def children_of(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def alive(pid):
    """Running (not gone and not a zombie waiting to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def failure_trial(a, workdir, trial):
    job, run_dir = write_job(workdir, f"kill{trial}", "cnn", 1000000, 2)
    wait_for_idle()
    log = open(os.path.join(workdir, f"kill{trial}.log"), "w")
    host = subprocess.Popen([a.dtrain, "train", job, "--quiet", "--overwrite"], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while len(read_metrics(run_dir)) < 5:  # both workers are in the training loop
            if host.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"bench: the kill trial's run did not start training (see {log.name})")
            time.sleep(0.05)
        workers = children_of(host.pid)
        if len(workers) != 2:
            sys.exit(f"bench: expected 2 worker processes under dtrain (pid {host.pid}), found {workers}")
        victim = workers[trial % 2]  # launch order = slot order: alternate which one dies
        start = time.monotonic()
        os.kill(victim, 9)
        while host.poll() is None or any(alive(p) for p in workers if p != victim):
            if time.monotonic() - start > 120:
                sys.exit(f"bench: the run was still running 120 s after kill -9 of a worker (see {log.name})")
            time.sleep(0.002)
        took = time.monotonic() - start
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        log.close()
    with open(log.name) as f:
        lines = [l.strip() for l in f if l.strip()]
    return took, host.returncode, trial % 2, lines[-1] if lines else ""


def part_failure(a, workdir, rows):
    times = []
    for trial in range(a.kill_trials):
        took, code, slot, last = failure_trial(a, workdir, trial)
        times.append(took)
        print(f"  kill -9 trial {trial + 1}: slot {slot} killed; all exited after {took:.3f} s; "
              f"dtrain exit {code}: {last}", flush=True)
    m = statistics.median(times)
    rows.append((f"failure detection, median of {len(times)}, s", f"{m:.2f}", "-", None, "<= 12", m <= 12, times,
                 []))


def rendezvous_trial(a, workdir, trial):
    for attempt in (1, 2):
        result = rendezvous_attempt(a, workdir, f"{trial}_{attempt}")
        if result:
            return result
    sys.exit("bench: the 8-worker run failed twice:\n" + "\n".join(RETRIED[-1][2]))


def rendezvous_attempt(a, workdir, name):
    """(joined, first step started, first metrics line) in s after launch; None when the run failed."""
    job, run_dir = write_job(workdir, f"rdv{name}", "mlp", 3, 8)
    wait_for_idle()
    seen = {}

    def watch(stream, label):
        for line in stream:
            now = time.time()
            if "group formed" in line and "joined" not in seen:
                seen["joined"] = now
            seen.setdefault(label + "_lines", []).append(line.rstrip())

    launch = time.time()
    host = subprocess.Popen([a.dtrain, "train", job, "--quiet", "--overwrite"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    threads = [threading.Thread(target=watch, args=(host.stdout, "out")),
               threading.Thread(target=watch, args=(host.stderr, "err"))]
    for t in threads:
        t.start()
    code = host.wait(timeout=300)
    for t in threads:
        t.join()
    if code != 0:
        RETRIED.append(("train (8 workers)", code, seen.get("err_lines", [])[-3:]))
        return None
    first = [r for r in read_metrics(run_dir) if r["split"] == "train"][0]
    step_started = first["time"] - first["samples"] / first["images_per_s"]
    joined = seen["joined"] - launch if "joined" in seen else float("nan")
    return joined, step_started - launch, first["time"] - launch


def part_rendezvous(a, workdir, rows):
    starts = []
    for trial in range(a.rendezvous_trials):
        joined, started, first_line = rendezvous_trial(a, workdir, trial)
        starts.append(started)
        print(f"  8 workers, trial {trial + 1}: all joined {joined:.3f} s, first step started {started:.3f} s, "
              f"first metrics line {first_line:.3f} s after launch", flush=True)
    m = statistics.median(starts)
    rows.append((f"8-worker launch to first step, median of {len(starts)}, s", f"{m:.2f}", "-", None, "<= 2",
                 m <= 2, starts, []))


# ---------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps, calls and trials (a smoke run)")
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="run only these parts")
    ap.add_argument("--repeats", type=int, default=0, help="interleaved rounds (default 3; 1 with --quick)")
    ap.add_argument("--wait-for-idle", type=float, default=0, metavar="S",
                    help="before each measurement wait up to S seconds until no other process runs")
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"), help="the dtrain binary")
    a = ap.parse_args()
    a.repeats = a.repeats or (1 if a.quick else 3)
    global WAIT_FOR_IDLE_S
    WAIT_FOR_IDLE_S = a.wait_for_idle
    a.kill_trials = 2 if a.quick else 5
    a.rendezvous_trials = 1 if a.quick else 3
    if not os.path.exists(a.dtrain):
        sys.exit(f"bench: {a.dtrain} not found; run scripts/build.sh first (or pass --dtrain)")
    torch_version = run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"]).strip()

    rows = []
    watch = LoadWatch()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        for part in PARTS:
            if part in a.only:
                print(f"{part}:", flush=True)
                watch.part = part
                globals()[f"part_{part}"](a, work, rows)
    watch.stop()
    print(f"\nmachine: {os.cpu_count()} cores; PyTorch {torch_version}; {a.repeats} interleaved rounds; "
          f"{time.monotonic() - started:.0f} s")
    print(f"other processes while measuring (share of samples with one running / with a compiler): "
          f"{watch.summary() or 'not sampled'}")
    print(f"{'figure':52} {'dtrain':>10} {'peer':>28} {'ratio':>6}  {'bar':8} result")
    for name, d, peer, ratio, bar, ok, _, _ in rows:
        r = f"{ratio:6.2f}" if ratio is not None else f"{'':6}"
        print(f"{name:52} {d:>10} {peer:>28} {r}  {bar:8} {'PASS' if ok else 'FAIL'}")
    for cmd, code, tail in RETRIED:
        print(f"dtrain run failed and was repeated: `{cmd}` exit {code}: " + " | ".join(tail))
    print("distributions:")
    for name, *_, mine, peer in rows:
        paired = f"; per-round ratios {[round(m / p, 2) for m, p in zip(mine, peer)]}" if peer else ""
        print(f"  {name}: dtrain {[round(v, 2) for v in mine]}" +
              (f"; peer {[round(v, 2) for v in peer]}" if peer else "") + paired)


if __name__ == "__main__":
    main()
