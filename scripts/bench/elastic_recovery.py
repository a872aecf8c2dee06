#!/usr/bin/python3
"""How fast an elastic dtrain run recovers from a lost worker, against torchrun.

Two hosts are network namespaces of this machine (scripts/netns-cluster.sh), each running 2
workers of an elastic multi_worker_mirrored job: the mlp preset on Fashion-MNIST, global
batch 128, SGD momentum 0.9, lr 0.05 on a cosine schedule, 938 steps (2 epochs; 3000 for
SIGSTOP), one compute thread per worker, [cluster] elastic = true, heartbeat_timeout_s = 10
(the default). The schedule lets the weights settle: at a constant rate, runs that differ only
in float rounding (3 workers against 4) end 0.2-0.4 points apart in test accuracy at 600 steps. Times are wall-clock (time.time(), the clock of
metrics.jsonl's "time").

Parts (--parts, default all):
  kill      --trials trials: a random worker killed with kill -9 at a random moment of
            training. recovery = from the kill to the first step completed by the next
            generation (the first train line of metrics.jsonl after its generation line);
            redone = the steps computed again (the one under way at the kill, at most).
            Bar: median recovery <= 5 s; redone <= 1.
  stop      --stop-trials trials: a random worker frozen with SIGSTOP; recovery as above.
            Bar: <= heartbeat_timeout_s + 2 s.
  random    --random-trials trials, each a random victim (a worker, or every process of
            host B; never node 0's dtrain, whose loss stops the run by design) at a random
            moment: during a step; during a checkpoint write (checkpoints every step, the
            chief killed); during a rendezvous (a second victim killed 0.3 s after the
            first, while the group re-forms). Bars: 0 hangs (the run ends by itself within
            its limit), 0 corrupt checkpoints (each reads back with dtrain eval), final
            test accuracy within 0.3 points of an uninterrupted run's.
  torchrun  --torch-trials trials of the same training in PyTorch DDP under torchrun
            (Debian's python3-torch; scripts/bench/elastic_ddp_peer.py) with
            --max_restarts 3, --monitor_interval --monitor-interval, c10d rendezvous on
            host 0: a random worker of host B killed with kill -9; recovery = from the kill
            to the first step of the restarted workers (which reload the last checkpoint,
            written every 50 steps). Bar: dtrain's median kill recovery <= 1/5 of torchrun's.

Needs root and iproute2 (network namespaces); says so and exits 77 where they cannot be made.
Usage: sudo scripts/bench/elastic_recovery.py [--parts kill,stop,random,torchrun] [--trials 10]
          [--stop-trials 3] [--random-trials 20] [--torch-trials 3] [--seed 1] [--dtrain PATH]
          [--json FILE]
"""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netns_hosts import HOSTS, ROOT, NetnsHosts, two_hosts  # noqa: E402

PEER = os.path.join(ROOT, "scripts", "bench", "elastic_ddp_peer.py")
PREFIX = "dtrain-ebench"
NS = NetnsHosts(PREFIX)
HEARTBEAT_TIMEOUT = 10.0
RUN_LIMIT = 300  # seconds a run may take before it counts as a hang
STEPS = 938  # 2 epochs


def write_job(work, name, steps, checkpoint_every=50):
    path = os.path.join(work, name + ".toml")
    with open(path, "w") as f:
        f.write(f"""[job]
name = "{name}"
run_dir = "{os.path.join(work, name)}"
threads = 1
[model]
preset = "mlp"
[data]
dataset = "fashion_mnist"
[train]
steps = {steps}
batch_size = 128
eval_every_epoch = false
checkpoint_every_epoch = false
checkpoint_every_steps = {checkpoint_every}
keep_last = 3
[optimizer]
type = "sgd"
lr = 0.05
momentum = 0.9
[schedule]
type = "cosine"
[strategy]
type = "multi_worker_mirrored"
[cluster]
coordinator = "{HOSTS[0]}:29400"
token_file = "{os.path.join(work, 'cluster.token')}"
hosts = [{{ address = "{HOSTS[0]}", slots = 2 }}, {{ address = "{HOSTS[1]}", slots = 2 }}]
heartbeat_timeout_s = {HEARTBEAT_TIMEOUT}
elastic = true
""")
    return path


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def read_lines(path):
    try:
        with open(path) as f:
            return [json.loads(l) for l in f if l.strip().endswith("}")]
    except OSError:
        return []


class Run:
    """One elastic run of `job` on both hosts."""

    def __init__(self, dtrain, job, work, tag):
        self.run_dir = job[:-len(".toml")]
        self.logs = []
        self.hosts = []
        for node in (1, 0):
            log = open(os.path.join(work, f"{tag}_{node}.log"), "w+")
            p = subprocess.Popen(NS.exec_command(node, dtrain, "train", job, "-q", "--node", str(node)),
                                 stdout=log, stderr=subprocess.STDOUT)
            self.hosts.append(p)
            self.logs.append(log)
        self.hosts.reverse()  # by node
        self.logs.reverse()

    def metrics(self):
        return read_lines(os.path.join(self.run_dir, "metrics.jsonl"))

    def wait_training(self, limit=60):
        end = time.time() + limit
        while time.time() < end:
            if any(l.get("split") == "train" for l in self.metrics()):
                return True
            time.sleep(0.02)
        return False

    def worker(self, rank):
        """The pid of generation 1's rank (node rank // 2, slot rank % 2)."""
        kids = children(self.hosts[rank // 2].pid)
        return kids[rank % 2] if len(kids) > rank % 2 else None

    def host_pids(self, node):
        return NS.pids(node)

    def finish(self, limit=RUN_LIMIT):
        """Exit codes by node; None for a host still running after `limit` (a hang)."""
        codes = []
        end = time.time() + limit
        for p in self.hosts:
            try:
                codes.append(p.wait(timeout=max(1, end - time.time())))
            except subprocess.TimeoutExpired:
                codes.append(None)
        for p in self.hosts:
            if p.poll() is None:
                p.kill()
        return codes

    def log(self, node):
        self.logs[node].seek(0)
        return self.logs[node].read()


def recovery_after(lines, t_kill):
    """(seconds from t_kill to the first step of the next generation, steps redone, generation line)."""
    gen_at = next((i for i, l in enumerate(lines) if l.get("event") == "generation" and l["time"] >= t_kill), None)
    if gen_at is None:
        return None, None, None
    first = next((l for l in lines[gen_at + 1:] if l.get("split") == "train"), None)
    before = [l["step"] for l in lines if l.get("split") == "train" and l["time"] < t_kill]
    redone = max(0, (max(before) if before else 0) + 1 - lines[gen_at]["step"])
    return (first["time"] - t_kill if first else None), redone, lines[gen_at]


def one_loss(a, work, tag, sig, steps, victims=1, checkpoint_every=50, chief=False, host_b=False):
    """Starts a run, loses a victim at a random moment, lets it finish; the trial's figures."""
    job = write_job(work, tag, steps, checkpoint_every)
    run = Run(a.dtrain, job, work, tag)
    out = {"tag": tag}
    if not run.wait_training():
        run.finish(5)
        sys.exit(f"elastic_recovery: {tag}: training did not start:\n{run.log(0)[-3000:]}")
    time.sleep(random.uniform(0.5, 2.0))
    ranks = random.sample(range(4), victims) if not chief else [0] + random.sample(range(1, 4), victims - 1)
    t_kill = time.time()
    if host_b:
        for pid in run.host_pids(1):
            os.kill(pid, signal.SIGKILL)
        out["victim"] = "host B"
    else:
        pids = [run.worker(r) for r in ranks]
        for i, pid in enumerate(pids):
            if i:
                time.sleep(0.3)  # the group is re-forming
            os.kill(pid, sig)
        out["victim"] = ", ".join(f"rank {r}" for r in ranks)
    codes = run.finish()
    lines = run.metrics()
    out["hang"] = codes[0] is None
    out["exit_codes"] = codes
    out["recovery_s"], out["redone"], gen = recovery_after(lines, t_kill)
    out["generation"] = gen["change"] if gen else None
    tests = [l for l in lines if l.get("split") == "test"]
    out["accuracy"] = tests[-1]["accuracy"] if tests else None
    # Finished: its last step logged, by whichever rank was the chief by then (node 0's
    # dtrain exits non-zero when every one of its own workers was lost, and goes on
    # serving the rendezvous until the others finish).
    out["completed"] = 0 in codes and any(l.get("split") == "train" and l["step"] == steps for l in lines)
    if sig == signal.SIGSTOP:
        for node in (0, 1):
            for pid in run.host_pids(node):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
    out["corrupt_checkpoints"] = corrupt_checkpoints(a.dtrain, run.run_dir)
    if not out["completed"]:
        out["log"] = run.log(0)[-1500:] + run.log(1)[-1500:]
    return out


def corrupt_checkpoints(dtrain, run_dir):
    bad = []
    ckpts = os.path.join(run_dir, "checkpoints")
    for name in sorted(os.listdir(ckpts)) if os.path.isdir(ckpts) else []:
        if not name.startswith("step-"):
            continue
        r = subprocess.run([dtrain, "eval", os.path.join(ckpts, name), "--json"], capture_output=True, text=True)
        if r.returncode != 0:
            bad.append(name)
    return bad


def part_kill(a, work):
    trials = [one_loss(a, work, f"kill{i}", signal.SIGKILL, STEPS) for i in range(a.trials)]
    rec = [t["recovery_s"] for t in trials if t["recovery_s"] is not None]
    return {"trials": trials, "median_recovery_s": statistics.median(rec) if rec else None,
            "max_redone": max((t["redone"] or 0) for t in trials),
            "bar_recovery": bool(rec) and len(rec) == len(trials) and statistics.median(rec) <= 5.0,
            "bar_redone": all((t["redone"] or 0) <= 1 for t in trials)}


def part_stop(a, work):
    trials = [one_loss(a, work, f"stop{i}", signal.SIGSTOP, 3000) for i in range(a.stop_trials)]
    rec = [t["recovery_s"] for t in trials if t["recovery_s"] is not None]
    return {"trials": trials, "max_recovery_s": max(rec) if rec else None,
            "bar": len(rec) == len(trials) and max(rec) <= HEARTBEAT_TIMEOUT + 2}


def part_random(a, work):
    ref = one_reference(a, work)
    trials = []
    for i in range(a.random_trials):
        moment = random.choice(["step", "checkpoint", "rendezvous"])
        host_b = moment == "step" and random.random() < 0.25
        t = one_loss(a, work, f"random{i}", signal.SIGKILL, STEPS, victims=2 if moment == "rendezvous" else 1,
                     checkpoint_every=1 if moment == "checkpoint" else 50, chief=moment == "checkpoint",
                     host_b=host_b)
        t["moment"] = moment
        trials.append(t)
    accs = [t["accuracy"] for t in trials if t["accuracy"] is not None]
    worst = max((abs(x - ref) for x in accs), default=None)
    return {"reference_accuracy": ref, "trials": trials, "hangs": sum(t["hang"] for t in trials),
            "not_completed": sum(not t["completed"] for t in trials),
            "corrupt_checkpoints": sum(len(t["corrupt_checkpoints"]) for t in trials),
            "worst_accuracy_gap_points": 100 * worst if worst is not None else None,
            "bar": all(not t["hang"] and t["completed"] and not t["corrupt_checkpoints"] for t in trials)
            and worst is not None and worst <= 0.003}


def one_reference(a, work):
    job = write_job(work, "reference", STEPS)
    run = Run(a.dtrain, job, work, "reference")
    codes = run.finish()
    if codes != [0, 0]:
        sys.exit(f"elastic_recovery: the uninterrupted run failed:\n{run.log(0)[-3000:]}")
    return [l for l in run.metrics() if l.get("split") == "test"][-1]["accuracy"]


def torch_trial(a, work, i):
    d = os.path.join(work, f"torch{i}")
    os.makedirs(d)
    log_path, ckpt = os.path.join(d, "steps.jsonl"), os.path.join(d, "ckpt.pt")
    procs = []
    for node in (0, 1):
        cmd = ["/usr/bin/torchrun", "--nnodes=2", "--nproc_per_node=2", "--rdzv_backend=c10d",
               f"--rdzv_conf=is_host={1 if node == 0 else 0}",
               # Debian's torch 1.13 under Python 3.11 cannot read its own default "0"
               # here (Std.NONE is not iterated); 1 (stdout to a file, and shown) works.
               "--redirects=1", "--tee=1", f"--log_dir={os.path.join(d, f'agent{node}')}",
               f"--rdzv_endpoint={HOSTS[0]}:29600", f"--rdzv_id=ebench{i}", "--max_restarts=3",
               f"--monitor_interval={a.monitor_interval}", PEER, "--steps", "3000", "--ckpt", ckpt,
               "--log", log_path]
        out = open(os.path.join(d, f"host{node}.log"), "w+")
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        procs.append((subprocess.Popen(NS.exec_command(node, *cmd), stdout=out, stderr=subprocess.STDOUT, env=env),
                      out))
    end = time.time() + 120
    while time.time() < end and len(read_lines(log_path)) < 60:
        time.sleep(0.05)
    if len(read_lines(log_path)) < 60:
        for p, _ in procs:
            p.kill()
        procs[0][1].seek(0)
        sys.exit(f"elastic_recovery: torchrun did not train:\n{procs[0][1].read()[-3000:]}")
    time.sleep(random.uniform(0.5, 2.0))
    host_b = NS.pids(1)
    workers = []
    for pid in host_b:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "elastic_ddp_peer.py" in cmd and "torchrun" not in cmd:
            workers.append(pid)
    if not workers:
        sys.exit("elastic_recovery: no torchrun worker found on host B")
    t_kill = time.time()
    os.kill(random.choice(workers), signal.SIGKILL)
    end = t_kill + 180
    first = None
    while time.time() < end and first is None:
        first = next((l for l in read_lines(log_path) if l["restart"] >= 1), None)
        time.sleep(0.02)
    for node in (0, 1):
        for pid in NS.pids(node):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for p, _ in procs:
        p.wait()
    return {"recovery_s": first["time"] - t_kill if first else None}


def part_torchrun(a, work):
    # torchrun's c10d rendezvous and its workers find host 0 by its host name, which a
    # namespace's resolver does not know: `ip netns exec` reads /etc/netns/NS/hosts
    # over /etc/hosts, so these two files (removed afterwards) name both hosts.
    made = []
    for node in (0, 1):
        d = f"/etc/netns/{PREFIX}-h{node}"
        os.makedirs(d, exist_ok=True)
        made.append(d)
        with open(os.path.join(d, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n" + "".join(f"{h} {PREFIX}-h{i}\n" for i, h in enumerate(HOSTS)))
    try:
        trials = [torch_trial(a, work, i) for i in range(a.torch_trials)]
    finally:
        for d in made:
            os.remove(os.path.join(d, "hosts"))
            os.rmdir(d)
    rec = [t["recovery_s"] for t in trials if t["recovery_s"] is not None]
    return {"monitor_interval_s": a.monitor_interval, "trials": trials,
            "median_recovery_s": statistics.median(rec) if rec else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="kill,stop,random,torchrun")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--stop-trials", type=int, default=3)
    ap.add_argument("--random-trials", type=int, default=20)
    ap.add_argument("--torch-trials", type=int, default=3)
    ap.add_argument("--monitor-interval", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    random.seed(a.seed)
    result = {}
    with two_hosts(PREFIX, "token-of-the-elastic-benchmark") as (_, work):
        parts = {"kill": part_kill, "stop": part_stop, "random": part_random, "torchrun": part_torchrun}
        for name in a.parts.split(","):
            result[name] = parts[name](a, work)
            summary = {k: v for k, v in result[name].items() if k != "trials"}
            print(f"{name}: {json.dumps(summary)}", flush=True)
    if "kill" in result and "torchrun" in result and result["torchrun"]["median_recovery_s"]:
        ours, theirs = result["kill"]["median_recovery_s"], result["torchrun"]["median_recovery_s"]
        result["ratio_to_torchrun"] = ours / theirs if ours is not None else None
        print(f"kill recovery: dtrain {ours:.2f} s, torchrun {theirs:.2f} s: ratio {ours / theirs:.3f} "
              f"(bar <= 0.2: {'PASS' if ours / theirs <= 0.2 else 'FAIL'})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
