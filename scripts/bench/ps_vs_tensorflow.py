#!/usr/bin/python3
"""dtrain's asynchronous parameter server against TensorFlow's ParameterServerStrategy.

The same model, data, optimizer and cluster shape on this host:
  model      the cnn preset (models/model_builder.cpp): conv3x3(32, pad 1)-relu-maxpool2-
             conv3x3(64, pad 1)-relu-maxpool2-flatten-dense(128)-relu-dense(10), He-normal
             weights (untruncated, fan in), zero biases; 421,642 parameters on both sides
             (TensorFlow's is NHWC, the only layout its CPU convolutions take).
  data       Fashion-MNIST training set (/usr/share/datasets/fashion-mnist), bytes / 255,
             shuffled; the test split for the accuracy.
  optimizer  SGD, momentum 0.9, lr 0.05, softmax cross-entropy.
  batch      global batch 128 over 2 workers: each update is one worker's 64 samples, its
             loss summed and divided by 128 (the share of the global batch it stands for),
             as a dtrain async push. --steps global batches (469 = 1 epoch) = 2 x --steps
             updates of 64 on each side (--tf-batch-per-step 128 gives TensorFlow batches of
             128 per update instead, half as many, the TensorFlow tutorial's layout).
  dtrain     scripts/bench/bench_job.py's job with [strategy] type = "parameter_server",
             workers = 2, ps = 1, consistency = "async", [job] threads = 1.
  TensorFlow tensorflow-cpu + tf_keras (Keras 2: Keras 3 does not run with this strategy)
             in a virtual environment of its own (--venv, made on first use, reused after).
             One process per task, tf.distribute.Server on localhost ports: 1 chief (the
             ClusterCoordinator, a custom training loop: schedule(step) per update, every
             step a tf.function that reads the variables from the ps, computes the
             gradient and applies it there with tf_keras' SGD), 2 workers and 1 ps, as
             dtrain's 2 workers x 1 thread + 1 shard: every op on 1 intra-op thread; the ps
             on 1 inter-op thread, a worker on 2 (with 1 its first step never ends), tf.data
             on a private pool of 1 thread; the chief on TensorFlow's defaults. Each worker
             reads the IDX files inside its dataset_fn (tf.io ops) and shuffles them itself.

Figures:
  images/s   dtrain: as ps_vs_mirrored.py, all workers' training samples over the chief's
             training time from metrics.jsonl (first to last train line, scaled by the
             steps the first line stands for; startup excluded, the first steps included).
             TensorFlow: after --tf-warmup updates (scheduled, then coordinator.join():
             tracing, graph setup on both workers, dataset creation), the remaining
             updates of the run are scheduled and joined; their samples over that wall
             time. Both sides train --steps global batches. Median over --rounds.
  accuracy   test accuracy at the end (last round's): dtrain's own final evaluation; for
             TensorFlow the chief evaluates the ps's variables on the 10,000 test images
             (outside the timing).
  two alone  (--ceiling) what 2 x 1 thread reach here without any parameter server: two
             one_device dtrain processes of 1 thread side by side, each training --steps
             batches of 64 (an async worker's share); the sum of their images/s. dtrain
             async over it is what the parameter server costs; 3x TensorFlow over it says
             whether the bar is within reach of 2 x 1 thread of these kernels at all.
Bar: dtrain async images/s >= 3x TensorFlow's. Runs are interleaved (dtrain, TF, then TF,
dtrain, ...) so drift in machine load hits both alike.

On a shared machine, --wait-for-idle S holds each run until no other process has run for
2 s (up to S seconds), and the report says how much of each side's runs still ran beside
other work (distributed_vs_pytorch.py's wait_for_idle and LoadWatch).

Usage: scripts/bench/ps_vs_tensorflow.py [--rounds N] [--steps N] [--ceiling] [--dtrain PATH] [--json FILE]
                                         [--venv DIR] [--tf-batch-per-step 64|128]
                                         [--wait-for-idle S]
"""
import argparse
import gzip
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_job import write_bench_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = "/usr/share/datasets/fashion-mnist"
DEFAULT_VENV = os.path.join(os.path.expanduser("~"), ".cache", "dtrain-bench", "tf-venv")
GLOBAL_BATCH = 128
WORKERS = 2
BAR = 3.0
STRATEGY = ('[strategy]\ntype = "parameter_server"\nworkers = 2\nps = 1\nconsistency = "async"\n')


def idx_path(name):
    """The IDX file of that name in DATA, plain or gzipped."""
    for p in (os.path.join(DATA, name), os.path.join(DATA, name + ".gz")):
        if os.path.exists(p):
            return p
    return None


# ---------------------------------------------------------------------------------------
# dtrain


def train_rate(metrics_path, workers=None):
    """Samples of all workers per second of training, from the chief's train lines."""
    workers = WORKERS if workers is None else workers
    lines = [json.loads(l) for l in open(metrics_path) if '"split":"train"' in l]
    if len(lines) < 3:
        raise RuntimeError(f"{metrics_path}: only {len(lines)} train lines")
    # Every worker trains the same steps, of the same size (an epoch's last global batch
    # is smaller: 469 batches are 60,000 samples).
    samples = workers * sum(l["samples"] for l in lines)
    span = lines[-1]["time"] - lines[0]["time"]
    steps = lines[-1]["step"] - lines[0]["step"]
    # The first line's time marks the end of its step: count that step's share too.
    seconds = span * (steps + 1) / steps
    return samples / seconds


def run_dtrain(dtrain, work, steps, rnd):
    run_dir = os.path.join(work, f"dtrain-{rnd}")
    job = os.path.join(work, f"dtrain-{rnd}.toml")
    write_bench_job(job, "bench", run_dir, "cnn", steps, job_extra="threads = 1\n", strategy=STRATEGY)
    p = subprocess.run([dtrain, "train", job, "-q"], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"dtrain exited {p.returncode}: {p.stdout[-500:]} {p.stderr[-500:]}")
    accuracy = None
    for line in p.stdout.splitlines():
        if "test accuracy" in line:
            accuracy = float(line.split("test accuracy")[1].split()[0].strip(","))
    return train_rate(os.path.join(run_dir, "metrics.jsonl")), accuracy


def run_two_alone(dtrain, work, steps, rnd):
    """Two one_device processes of 1 thread side by side, batches of 64: the sum of their images/s."""
    procs, dirs = [], []
    for k in range(2):
        run_dir = os.path.join(work, f"alone-{rnd}-{k}")
        job = os.path.join(work, f"alone-{rnd}-{k}.toml")
        write_bench_job(job, "bench", run_dir, "cnn", steps, job_extra="threads = 1\n")
        procs.append(subprocess.Popen([dtrain, "train", job, "-q", "--set", "train.batch_size=64"],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        dirs.append(run_dir)
    for p in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"one_device dtrain exited {p.returncode}: {out[-500:]}")
    return sum(train_rate(os.path.join(d, "metrics.jsonl"), workers=1) for d in dirs), None


# ---------------------------------------------------------------------------------------
# TensorFlow's virtual environment


def venv_versions(python):
    """(tensorflow, tf_keras) versions importable by that python, or None."""
    code = "import tensorflow as tf, tf_keras; print(tf.__version__, tf_keras.__version__)"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    p = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    return tuple(p.stdout.split()[-2:])


def ensure_venv(venv):
    """The venv's python, with tensorflow-cpu and tf_keras; made on first use."""
    python = os.path.join(venv, "bin", "python")
    if os.path.exists(python) and venv_versions(python):
        return python
    # Debian's python3 first; the python3 on PATH (pyenv) where no tensorflow-cpu wheel fits it.
    for base in ("/usr/bin/python3", "python3"):
        print(f"ps_vs_tensorflow: making {venv} with {base} (tensorflow-cpu, tf_keras)", flush=True)
        subprocess.run(["rm", "-rf", venv], check=True)
        os.makedirs(os.path.dirname(venv), exist_ok=True)
        if subprocess.run([base, "-m", "venv", venv]).returncode != 0:
            continue
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        if subprocess.run(pip + ["tensorflow-cpu"]).returncode != 0:
            continue
        tf_version = subprocess.run([python, "-c", "import importlib.metadata as m; "
                                     "print(m.version('tensorflow-cpu'))"],
                                    capture_output=True, text=True).stdout.strip()
        major_minor = ".".join(tf_version.split(".")[:2])
        # tf_keras depends on "tensorflow" (the GPU-capable wheel); tensorflow-cpu provides
        # the same module, so take tf_keras alone, at the same minor version.
        if subprocess.run(pip + ["--no-deps", f"tf_keras~={major_minor}.0"]).returncode != 0:
            continue
        if venv_versions(python):
            return python
    sys.exit(f"ps_vs_tensorflow: could not install tensorflow-cpu and tf_keras into {venv}")


# ---------------------------------------------------------------------------------------
# TensorFlow's cluster: this file run by the venv's python with --tf-role


def free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("localhost", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_tensorflow(python, work, steps, warmup, per_step, rnd, timeout):
    ports = free_ports(WORKERS + 2)
    cluster = {"chief": [f"localhost:{ports[0]}"],
               "worker": [f"localhost:{p}" for p in ports[1:1 + WORKERS]],
               "ps": [f"localhost:{ports[-1]}"]}
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    me = os.path.abspath(__file__)
    tasks = [("ps", 0)] + [("worker", i) for i in range(WORKERS)]
    servers = []
    logs = []
    try:
        for role, i in tasks:
            log = open(os.path.join(work, f"tf-{rnd}-{role}{i}.log"), "w")
            logs.append(log)
            servers.append(subprocess.Popen(
                [python, me, "--tf-role", role, "--tf-index", str(i), "--tf-cluster", json.dumps(cluster)],
                stdout=log, stderr=subprocess.STDOUT, env=env))
        updates = steps * GLOBAL_BATCH // per_step
        chief = subprocess.run(
            [python, me, "--tf-role", "chief", "--tf-index", "0", "--tf-cluster", json.dumps(cluster),
             "--tf-updates", str(updates), "--tf-warmup", str(warmup), "--tf-batch-per-step", str(per_step)],
            capture_output=True, text=True, env=env, timeout=timeout)
        cpu = {f"{role}{i}": cpu_seconds(s.pid) for (role, i), s in zip(tasks, servers)}
    finally:
        for s in servers:
            s.terminate()
        for s in servers:
            try:
                s.wait(timeout=10)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        for log in logs:
            log.close()
    result = None
    for line in chief.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
    if chief.returncode != 0 or result is None:
        tails = "".join(open(l.name).read()[-600:] for l in logs)
        raise RuntimeError(f"TensorFlow chief exited {chief.returncode}: {chief.stdout[-800:]} "
                           f"{chief.stderr[-1500:]}\nservers: {tails}")
    result["cpu_s"] = dict(cpu, chief=result.pop("chief_cpu_s"))
    return result


def cpu_seconds(pid):
    """User + system CPU seconds a live process has used, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tf_server(role, index, cluster):
    """A worker or ps task: a tf.distribute.Server with 1 intra-op thread, and 1 inter-op
    thread on the ps, 2 on a worker: with 1, a worker's first step never finishes
    (TensorFlow 2.21: the coordinator's first closure waits forever)."""
    import tensorflow as tf
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=1,
                                      inter_op_parallelism_threads=2 if role == "worker" else 1)
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=role, task_index=index,
                                  protocol="grpc", config=config, start=True)
    server.join()


def read_idx(kind):
    """Fashion-MNIST's images ([n, 28, 28, 1] float32 in [0, 1]) and labels, with numpy."""
    import numpy as np
    def load(name, header):
        path = idx_path(name)
        raw = gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
        return np.frombuffer(raw, np.uint8, offset=header)
    x = load(f"{kind}-images-idx3-ubyte", 16).reshape(-1, 28, 28, 1).astype(np.float32) / 255.0
    return x, load(f"{kind}-labels-idx1-ubyte", 8).astype(np.int32)


def tf_chief(cluster, updates, warmup, per_step):
    """The coordinator: builds the model on the ps, trains `updates` steps, prints RESULT."""
    import tensorflow as tf
    import tf_keras as keras

    images_path, labels_path = idx_path("train-images-idx3-ubyte"), idx_path("train-labels-idx1-ubyte")

    def dataset_fn():
        # Runs on each worker: the IDX files read and decoded by tf ops there.
        def idx(path, header, shape):
            raw = tf.io.read_file(path)
            if path.endswith(".gz"):
                raw = tf.io.decode_compressed(raw, compression_type="GZIP")
            data = tf.io.decode_raw(tf.strings.substr(raw, header, 1 << 30), tf.uint8)
            return tf.reshape(data, shape)
        x = tf.cast(idx(images_path, 16, [-1, 28, 28, 1]), tf.float32) / 255.0
        y = tf.cast(idx(labels_path, 8, [-1]), tf.int32)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(60000).repeat()
        ds = ds.batch(per_step, drop_remainder=True).prefetch(2)
        options = tf.data.Options()
        options.threading.private_threadpool_size = 1
        options.threading.max_intra_op_parallelism = 1
        return ds.with_options(options)

    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster), task_type="chief", task_id=0, rpc_layer="grpc")
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    he = keras.initializers.VarianceScaling(2.0, "fan_in", "untruncated_normal", seed=42)
    with strategy.scope():
        model = keras.Sequential([
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu", kernel_initializer=he),
            keras.layers.MaxPooling2D(2),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu", kernel_initializer=he),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu", kernel_initializer=he),
            keras.layers.Dense(10, kernel_initializer=he),
        ])
        optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    params = model.count_params()

    @tf.function
    def step_fn(iterator):
        def replica_fn(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                per_sample = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
                # A worker's share of the global batch, as dtrain's push: sum / 128.
                loss = tf.reduce_sum(per_sample) / GLOBAL_BATCH
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))
    t_start = time.perf_counter()
    for _ in range(warmup):
        coordinator.schedule(step_fn, args=(iterator,))
    coordinator.join()
    t0 = time.perf_counter()
    for _ in range(updates - warmup):
        last = coordinator.schedule(step_fn, args=(iterator,))
    coordinator.join()
    t1 = time.perf_counter()
    last_loss = float(last.fetch()) * GLOBAL_BATCH / per_step

    x_test, y_test = read_idx("t10k")
    correct = 0
    for i in range(0, len(x_test), 1000):
        logits = model(x_test[i:i + 1000], training=False)
        correct += int(tf.reduce_sum(tf.cast(tf.argmax(logits, 1, output_type=tf.int32) == y_test[i:i + 1000],
                                             tf.int32)))
    print("RESULT " + json.dumps({
        "images_per_s": (updates - warmup) * per_step / (t1 - t0), "timed_updates": updates - warmup,
        "timed_s": t1 - t0, "warmup_s": t0 - t_start, "accuracy": correct / len(x_test), "last_loss": last_loss,
        "params": params, "tensorflow": tf.__version__, "tf_keras": keras.__version__,
        "chief_cpu_s": sum(os.times()[:2])}), flush=True)


# ---------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=469, help="global batches of 128 (469: 1 epoch)")
    ap.add_argument("--tf-warmup", type=int, default=20, help="TensorFlow updates before its timing")
    ap.add_argument("--tf-batch-per-step", type=int, default=64, choices=(64, 128))
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--venv", default=DEFAULT_VENV)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one TensorFlow run")
    ap.add_argument("--wait-for-idle", type=float, default=0, metavar="S",
                    help="before each run, wait up to S s until no other process has run for 2 s")
    ap.add_argument("--ceiling", action="store_true",
                    help="also run two one_device processes of 1 thread side by side (see 'two alone')")
    ap.add_argument("--json", help="also write the figures to this file")
    # Internal: one task of the TensorFlow cluster, run by the venv's python.
    ap.add_argument("--tf-role", help=argparse.SUPPRESS)
    ap.add_argument("--tf-index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--tf-cluster", help=argparse.SUPPRESS)
    ap.add_argument("--tf-updates", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.tf_role:
        cluster = json.loads(a.tf_cluster)
        if a.tf_role == "chief":
            tf_chief(cluster, a.tf_updates, a.tf_warmup, a.tf_batch_per_step)
        else:
            tf_server(a.tf_role, a.tf_index, cluster)
        return

    if not idx_path("train-images-idx3-ubyte"):
        sys.exit(f"ps_vs_tensorflow: no Fashion-MNIST in {DATA}: install dataset-fashion-mnist")
    if not os.access(a.dtrain, os.X_OK):
        sys.exit(f"ps_vs_tensorflow: no dtrain binary at {a.dtrain}: build it or pass --dtrain")
    updates = a.steps * GLOBAL_BATCH // a.tf_batch_per_step
    if a.tf_warmup >= updates - 2:
        sys.exit(f"ps_vs_tensorflow: --steps {a.steps} leaves no TensorFlow updates after --tf-warmup {a.tf_warmup}")
    python = ensure_venv(a.venv)
    import distributed_vs_pytorch as load  # wait_for_idle, LoadWatch
    load.WAIT_FOR_IDLE_S = a.wait_for_idle
    watch = load.LoadWatch()
    tf_version, keras_version = venv_versions(python)
    names = ("dtrain_async", "tensorflow") + (("two_alone",) if a.ceiling else ())
    rates = {n: [] for n in names}
    accuracy = {}
    tf_runs = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ps_tf_bench_") as work:
        for rnd in range(a.rounds):
            for name in (names if rnd % 2 == 0 else reversed(names)):
                load.wait_for_idle()
                watch.part = name
                if name == "dtrain_async":
                    rate, acc = run_dtrain(a.dtrain, work, a.steps, rnd)
                elif name == "two_alone":
                    rate, acc = run_two_alone(a.dtrain, work, a.steps, rnd)
                else:
                    r = run_tensorflow(python, work, a.steps, a.tf_warmup, a.tf_batch_per_step, rnd, a.timeout)
                    rate, acc = r["images_per_s"], r["accuracy"]
                    tf_runs.append(r)
                watch.part = None
                rates[name].append(rate)
                accuracy[name] = acc
                said = "" if acc is None else f", test accuracy {acc:.4f}"
                print(f"  round {rnd + 1} {name}: {rate:,.0f} img/s{said}", flush=True)
    watch.stop()
    busy = watch.summary()
    median = {n: statistics.median(r) for n, r in rates.items()}
    ratio = median["dtrain_async"] / median["tensorflow"]
    ok = ratio >= BAR
    print(f"\ncnn, Fashion-MNIST, global batch 128, 2 workers x 1 thread + 1 ps, asynchronous, "
          f"{a.steps} global batches ({a.steps / 469:.2f} epochs), medians of {a.rounds} interleaved rounds, "
          f"{time.time() - started:.0f} s")
    print(f"  TensorFlow {tf_version}, tf_keras {keras_version}: updates of {a.tf_batch_per_step} samples, "
          f"timed after {a.tf_warmup}")
    print(f"  {'side':<14} {'images/s':>9}  {'rounds':<26} test accuracy")
    for n in names:
        runs = " / ".join(f"{r:,.0f}" for r in rates[n])
        acc = "-" if accuracy[n] is None else f"{accuracy[n]:.4f}"
        print(f"  {n:<14} {median[n]:>9,.0f}  {runs:<26} {acc}")
    cpu = tf_runs[-1]["cpu_s"]
    print(f"  TensorFlow CPU seconds, last run (its startup included): "
          + ", ".join(f"{task} {cpu[task]:.1f}" for task in sorted(cpu)))
    print(f"  share of load samples (twice a second) with another process running: {busy or 'none taken'}")
    print(f"  dtrain / TensorFlow: {ratio:.2f}x (bar >= {BAR:g}x): {'PASS' if ok else 'FAIL'}")
    if a.ceiling:
        alone = median["two_alone"]
        print(f"  without a parameter server (two_alone) {alone:,.0f} img/s: dtrain async at "
              f"{median['dtrain_async'] / alone:.0%} of it; {BAR:g}x TensorFlow = {BAR * median['tensorflow']:,.0f} "
              f"img/s = {BAR * median['tensorflow'] / alone:.0%} of it")
    if a.json:
        out = {"steps": a.steps, "epochs": a.steps / 469, "rounds": a.rounds,
               "tf_batch_per_step": a.tf_batch_per_step, "tf_warmup": a.tf_warmup,
               "tensorflow": tf_version, "tf_keras": keras_version, "images_per_s": median, "runs": rates,
               "accuracy": accuracy, "tf_runs": tf_runs, "ratio": ratio, "bar": BAR, "pass": ok,
               "load": busy}
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
