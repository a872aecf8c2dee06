"""The dtrain job the benchmarks train: a preset on Fashion-MNIST, batch 128 unless told,
plain SGD with momentum, no evaluation or checkpoints inside the timed steps."""


def write_bench_job(path, name, run_dir, model, steps, job_extra="", strategy="", batch_size=128):
    with open(path, "w") as f:
        f.write(f"""[job]
name = "{name}"
run_dir = "{run_dir}"
{job_extra}[model]
preset = "{model}"
[data]
dataset = "fashion_mnist"
[train]
steps = {steps}
batch_size = {batch_size}
eval_every_epoch = false
checkpoint_every_epoch = false
[optimizer]
type = "sgd"
lr = 0.05
momentum = 0.9
{strategy}""")
    return path
