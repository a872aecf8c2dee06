#!/usr/bin/python3
"""dtrain's CPU kernel levels against each other, in one run: the same binary told by
DTRAIN_CPU to compute with its AVX2 kernels, with its AVX-512 ones, and in bf16.

For the mlp and the cnn (Fashion-MNIST, batch 128), ResNet-20 (generated CIFAR-10,
batch 128) and MobileNetV2 (a generated image folder at 96 px, batch 64), each on every
core, it measures training images/s of:
  avx2       DTRAIN_CPU=avx2, fp32: the baseline path (OpenBLAS's Haswell kernels,
             256-bit vectors)
  avx512     the best level this CPU runs, fp32
  bf16       the best level, precision = "bf16"
and reports avx512/avx2 and bf16/avx512. Runs are interleaved for --repeats rounds;
each figure is the median. Bars (issue: the CPU at full width): avx512/avx2 >= 1.5 for
the mlp and the cnn, >= 1.3 for ResNet-20 and MobileNetV2; bf16/avx512 >= 1.4 for the
mlp and the cnn, >= 1.3 for ResNet-20.

`dtrain bench cpu` prints the ceilings the ratios are read against (register-resident
FMA and bf16 dot-product rates, and the matrix products alone at the mlp's shapes).

Exit status: 0 when every bar passes, 1 when one fails.

Usage: scripts/bench/cpu_levels.py [--repeats 3] [--only mlp,cnn,resnet20,mobilenet_v2]
           [--wait-for-idle S] [--json FILE] [--dtrain PATH] [--data DIR]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_job import write_bench_job  # noqa: E402
import distributed_vs_pytorch as load  # noqa: E402  (wait_for_idle)
import models_vs_pytorch as models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
MODELS = {
    # name: (steps timed after WARMUP, bar avx512/avx2, bar bf16/avx512)
    "mlp": (300, 1.5, 1.4),
    "cnn": (120, 1.5, 1.4),
    "resnet20": (20, 1.3, 1.3),
    "mobilenet_v2": (16, 1.3, None),
}
WARMUP = 3
SIDES = {"avx2": ("avx2", "fp32"), "avx512": ("", "fp32"), "bf16": ("", "bf16")}


def job_for(model, side, work, data_dirs):
    run_dir = os.path.join(work, f"run_{model}_{side}")
    steps = WARMUP + MODELS[model][0]
    precision = SIDES[side][1]
    path = os.path.join(work, f"{model}_{side}.toml")
    if model in ("mlp", "cnn"):
        write_bench_job(path, f"levels_{model}", run_dir, model, steps,
                        job_extra=f'precision = "{precision}"\n')
    else:
        kind = models.MODELS[model]["data"]
        models.write_model_job(path, model, run_dir, steps, models.data_toml(kind, data_dirs[kind]))
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("[job]\n", f'[job]\nprecision = "{precision}"\n', 1))
    return path, run_dir


def measure(dtrain, model, side, work, data_dirs):
    path, run_dir = job_for(model, side, work, data_dirs)
    level = SIDES[side][0]
    if level:
        os.environ["DTRAIN_CPU"] = level
    else:
        os.environ.pop("DTRAIN_CPU", None)
    try:
        ips, _ = models.dtrain_train(dtrain, path, run_dir, WARMUP)
    finally:
        os.environ.pop("DTRAIN_CPU", None)
    return ips


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--wait-for-idle", type=float, default=0.0)
    ap.add_argument("--json")
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "dtrain-bench-models"))
    a = ap.parse_args()
    load.WAIT_FOR_IDLE_S = a.wait_for_idle
    names = [m for m in a.only.split(",") if m]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        sys.exit(f"cpu_levels: unknown model {unknown[0]!r}; known: {', '.join(MODELS)}")
    data_dirs = models.prepare_data(a.data) if any(m in models.MODELS for m in names) else {}
    runs = {m: {s: [] for s in SIDES} for m in names}
    with tempfile.TemporaryDirectory(prefix="dtrain-levels-") as work:
        for r in range(a.repeats):
            for m in names:
                for s in SIDES:
                    ips = measure(a.dtrain, m, s, work, data_dirs)
                    runs[m][s].append(ips)
                    print(f"  round {r + 1} {m:12} {s:7} {ips:10.1f} img/s", flush=True)
    ok = True
    out = {}
    print(f"\n{'model':13} {'avx2':>10} {'avx512':>10} {'bf16':>10} {'512/avx2':>9} {'bar':>5} "
          f"{'bf16/512':>9} {'bar':>5}")
    for m in names:
        med = {s: statistics.median(v) for s, v in runs[m].items()}
        wide, half = med["avx512"] / med["avx2"], med["bf16"] / med["avx512"]
        _, bar_wide, bar_half = MODELS[m]
        pass_wide = wide >= bar_wide
        pass_half = bar_half is None or half >= bar_half
        ok = ok and pass_wide and pass_half
        out[m] = {"images_per_s": med, "runs": runs[m], "avx512_over_avx2": wide, "bf16_over_avx512": half,
                  "bar_avx512_over_avx2": bar_wide, "bar_bf16_over_avx512": bar_half}
        print(f"{m:13} {med['avx2']:10.1f} {med['avx512']:10.1f} {med['bf16']:10.1f} {wide:9.2f} "
              f"{bar_wide:5.1f} {'PASS' if pass_wide else 'FAIL'} {half:9.2f} "
              f"{'' if bar_half is None else bar_half:>5} {'' if bar_half is None else 'PASS' if pass_half else 'FAIL'}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
