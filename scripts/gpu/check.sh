#!/usr/bin/env bash
# Builds and checks dtrain on a GPU machine in one call of at most 10 minutes: the CUDA
# suite, compute-sanitizer memcheck, training parity, speed against PyTorch, and where a
# step's time goes.
#
#   scripts/gpu/check.sh [PHASE...] [--epochs N] [--mixed-epochs N] [--bench-seconds S] [--bench-rounds N]
#                        [--no-variants]
#
# Run from the repository root on the GPU machine, after scripts/gpu/fetch-debian-libs.sh
# ran on a machine with apt and .gpu-deps/root travelled with the working tree.
# PHASE (default all; several may be given, run in this order):
#   configure  cmake only (build-gpu); the one phase that runs without a GPU, to check
#              that every Debian dependency resolves inside .gpu-deps/root
#   build      configure and build with all cores (-DCMAKE_CUDA_ARCHITECTURES=90)    ~40-60 s
#   test       the CUDA suite (ctest -L cuda: every layer, kernel and optimizer
#              against the CPU)                                                       ~10 s
#   memcheck   compute-sanitizer --tool memcheck on the CUDA suite (NCCL cases left
#              out, CUDA API errors not reported: the allocator test's out-of-memory
#              is intended); clean = 0 errors. Runs beside parity when both are asked
#              for, and is waited for before the benchmark                            ~30-150 s
#   parity     configs/fashion_cnn.toml for N epochs (--epochs, default 1) on cuda and on
#              cpu; mixed precision on the GPU for M epochs (--mixed-epochs, default 3, in
#              place of the configurations' 10 and 12 to fit the time box): the cnn and
#              ResNet-20 (configs/fashion_resnet20.toml) in bf16 against fp32, test accuracy
#              within 0.3 points, and the cnn in fp16 (loss scaling) ending with finite
#              losses; a dtrain that refuses the precision on the GPU leaves those UNMEASURED;
#              mirrored 2 ranks (gloo) on the one GPU against 1 rank, same global batch;
#              an elastic run of 3 ranks there, one killed at step 150, against 1 rank;
#              a parameter server's 2 workers (sync, async) on the one GPU + 1 shard against
#              1 rank; central storage's 2 workers and a 2-stage pipeline on the one GPU
#              against 1 rank; a 1-rank NCCL run resumed with more steps against one run
#              straight through                                                        ~90 s
#   bench      scripts/bench/gpu_vs_pytorch.py: images/s against PyTorch eager for mlp
#              128/4096, cnn 128/1024, ResNet-20, MobileNetV2 (3 alternated rounds of
#              S seconds per run, default 2), TFLOP/s and share of the fp32 matmul
#              ceiling, GPU busy during mlp 4096 (nvidia-smi dmon), and unless
#              --no-variants dtrain's deterministic cost. Mixed precision against a
#              PyTorch bf16 peer (autocast, channels_last): ResNet-50 224 px batch 64
#              (bar 1.3x; dtrain's fp32 and tf32 beside it, no bar), MobileNetV2 224 px
#              batch 64 (1.3x) and ResNet-20 (1.5x) in bf16, with TFLOP/s and the share
#              of the bf16 matmul ceiling (the tf32 one measured too); each side's peak
#              device memory after the warm-up, and the bar dtrain ResNet-50 bf16 <= 0.6x
#              dtrain ResNet-50 fp32 (PyTorch's bf16 and fp32 peaks beside it). An older
#              dtrain that refuses bf16 on the GPU (exit 2, one line), or whose metrics
#              hold no device_peak_bytes, leaves those bars UNMEASURED with the reason,
#              not FAIL. Rounds shrink, or variants are left out, when the time box needs ~230-280 s
#   gpt        scripts/bench/gpt_gpu_vs_pytorch.py: GPT-2 small (context 1024, batch 8) tokens/s,
#              dtrain bf16 against PyTorch eager bf16 (autocast, SDPA flash, fused AdamW; bar
#              1.25x) and its torch.compile (bar 1.0x, compile time excluded), dtrain's MFU
#              (6N + 6LCT FLOPs a token, llm.c's count; bar 45% of the card's dense bf16 peak),
#              dtrain tf32 and fp32 against PyTorch fp32 with TF32 on and off (no bar); rounds
#              and steps shrink to its time box (default 150 s); a dtrain that exits non-zero
#              leaves its rows UNMEASURED with the reason                               ~100-150 s
#   step       scripts/gpu/bench_step.py: `dtrain bench step JOB --json` for mlp 4096,
#              cnn 1024, ResNet-20 and MobileNetV2; a failure is recorded, not fatal   ~20-40 s
#   cpu-test   the CPU suites in parallel, time-boxed (not in `all`: CI runs them)
#   all        build test memcheck parity bench gpt step                              ~8-9 minutes
# Phases after `build` build first when needed (ninja does nothing when up to date).
# The whole call is held to $DTRAIN_GPU_CHECK_SECONDS (default 560, under the 600 s a device
# call may run): each phase gets what is left less what the phases after it need, so the
# memcheck time box, the parity runs, the benchmark's rounds and variants, and the gpt
# phase's rounds and steps shrink to fit. With gpt in the call the benchmark's box is what is
# left less gpt's 120 s and step's 35 s, ~200-270 s (without gpt, 480 s in all: ~245-280 s);
# its variants, run last, give that up first; memcheck and parity keep their boxes. Each
# phase prints its elapsed time, and the summary lists them.
#
# The build directory is build-gpu ($DTRAIN_GPU_BUILD_DIR overrides; $DTRAIN_GPU_CMAKE_ARGS
# adds configure arguments). Results go to $OUT when set, else build-gpu/results:
#   environment.txt, dependencies.txt, configure.log, build.log, build.json, ldd-dtrain.txt
#   test-cuda.log, ctest-cuda.xml            the CUDA suite
#   memcheck.json, memcheck.log, memcheck-tests.log
#   parity.json                              (runs and their logs under build-gpu/parity)
#   bench.json, bench.log                    (jobs, runs and pytorch_peer.log under build-gpu/bench)
#   gpt-bench.json, gpt-bench.log            (token files, jobs, dtrain logs, pytorch_peer.log under build-gpu/gpt-bench)
#   bench-step.json, bench-step-NAME.json, bench-step-NAME.log, step.log
#   phases.txt                               seconds per phase, and of the whole call
#   summary.txt, summary.json                the table printed at the end (scripts/gpu/summary.py)
# The carried libraries need glibc >= 2.34 and libstdc++ >= GCC 12 (Ubuntu 22.04,
# Debian 12 or newer); the build checks with ldd that dtrain can load them.
# Exit status: 0 when every item checked passed, 1 otherwise or on a missing tool.
set -euo pipefail

script_t0=$(date +%s)
me=$(basename "$0")
die() {
  echo "$me: error: $*" >&2
  exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
build=${DTRAIN_GPU_BUILD_DIR:-build-gpu}
[[ $build == /* ]] || build=$repo/$build
results=${OUT:-$build/results}
total_s=${DTRAIN_GPU_CHECK_SECONDS:-560}
epochs=1
mixed_epochs=3
bench_seconds=2
bench_rounds=3
variants=(--variants)
jobs=$(nproc)

phases=()
while (($#)); do
  case $1 in
    configure | build | test | memcheck | parity | bench | gpt | step | cpu-test) phases+=("$1") ;;
    all) phases+=(build test memcheck parity bench gpt step) ;;
    --epochs)
      epochs=${2:?--epochs needs a number}
      shift
      ;;
    --mixed-epochs)
      mixed_epochs=${2:?--mixed-epochs needs a number}
      shift
      ;;
    --bench-seconds)
      bench_seconds=${2:?--bench-seconds needs a number}
      shift
      ;;
    --bench-rounds)
      bench_rounds=${2:?--bench-rounds needs a number}
      shift
      ;;
    --no-variants) variants=() ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1'; phases: configure build test memcheck parity bench gpt step cpu-test all; options: --epochs N --mixed-epochs N --bench-seconds S --bench-rounds N --no-variants" ;;
  esac
  shift
done
((${#phases[@]})) || phases=(build test memcheck parity bench gpt step)

# --- what must be there ---------------------------------------------------------
needs_gpu=0
for p in "${phases[@]}"; do [[ $p == configure ]] || needs_gpu=1; done
for tool in cmake ninja python3; do
  command -v $tool >/dev/null || die "$tool not found on PATH; the GPU machine should have it"
done
command -v c++ >/dev/null || command -v g++ >/dev/null || die "no C++ compiler (c++/g++) on PATH"
if ((needs_gpu)); then
  gpus=$( (nvidia-smi -L 2>/dev/null || true) | grep -c '^GPU ' || true)
  ((gpus > 0)) || die "no GPU visible (nvidia-smi -L lists none); run this on the GPU machine (only 'configure' runs without one)"
fi
# shellcheck source=scripts/gpu/deps-env.sh
source "$repo/scripts/gpu/deps-env.sh"
gpu_deps_setup
gpu_deps_cuda
mkdir -p "$results"
data_dir=$gpu_deps_root/usr/share/datasets/fashion-mnist

# --- phase bookkeeping and time ----------------------------------------------------
failed=()
stamp() { date +%H:%M:%S; }
elapsed() { echo $(($(date +%s) - script_t0)); }
# Seconds a phase is expected to need, held back for it by the phases before it.
estimate() {
  case $1 in
    build) echo 60 ;;
    test) echo 15 ;;
    memcheck) echo 45 ;; # beyond the parity runs it overlaps
    parity) echo 75 ;;
    bench) echo 190 ;; # it gets what is left less gpt's and step's, ~200-270 s
    gpt) echo 120 ;;
    step) echo 35 ;;
    *) echo 0 ;;
  esac
}
# budget PHASE DEFAULT MIN: what is left of the call's $total_s less the estimates of
# the phases after PHASE, within [MIN, DEFAULT].
budget() {
  local phase=$1 default=$2 min=$3 p after=0 seen=0 left
  for p in "${phases[@]}"; do
    ((seen)) && after=$((after + $(estimate "$p")))
    [[ $p == "$phase" ]] && seen=1
  done
  left=$((total_s - $(elapsed) - after))
  ((left < default)) || left=$default
  echo $((left > min ? left : min))
}
record_phase() { # NAME SECONDS into phases.txt, replacing an earlier call's figure
  { grep -v "^$1 " "$results/phases.txt" 2>/dev/null || true; echo "$1 $2"; } >"$results/phases.txt.tmp"
  mv "$results/phases.txt.tmp" "$results/phases.txt"
}
phase_begin() {
  phase_name=$1
  phase_t0=$(date +%s)
  echo "[$(stamp)] == $phase_name (at $(elapsed) s of $total_s) =="
  # An earlier call's figures must not pass for this one's.
  case $phase_name in
    build) rm -f "$results/build.json" ;;
    test) rm -f "$results/ctest-cuda.xml" ;;
    cpu-test) rm -f "$results/ctest-cpu.xml" "$results/ctest-cpu-planned.txt" ;;
    memcheck) rm -f "$results"/memcheck.json "$results"/memcheck*.log ;;
    parity) rm -f "$results/parity.json" ;;
    bench) rm -f "$results/bench.json" "$results/bench.log" ;;
    gpt) rm -f "$results/gpt-bench.json" "$results/gpt-bench.log" ;;
    step) rm -f "$results"/bench-step*.json "$results"/bench-step-*.log "$results/step.log" ;;
  esac
}
phase_end() {
  local s=$(($(date +%s) - phase_t0))
  record_phase "$phase_name" "$s"
  echo "[$(stamp)] == $phase_name done in $s s (at $(elapsed) s) =="
}

# --- configure / build --------------------------------------------------------------
# What CMake resolved, and from where: carried (.gpu-deps), wheel (python3's NVIDIA
# wheels, through .gpu-deps/local/cuda-hints) or machine (this machine's own).
report_deps() {
  local cache=$build/CMakeCache.txt var value where
  {
    echo "# where CMake found each dependency"
    for var in pkgcfg_lib_TOMLPP_tomlplusplus TOMLPP_INCLUDEDIR pkgcfg_lib_OPENBLAS_openblas OPENBLAS_INCLUDEDIR \
      ZLIB_LIBRARY_RELEASE ZLIB_INCLUDE_DIR CLI11_DIR cppzmq_DIR ZeroMQ_LIBRARY ZeroMQ_INCLUDE_DIR Gloo_DIR \
      doctest_DIR STB_INCLUDE_DIR PKG_CONFIG_EXECUTABLE CUDNN_INCLUDE_DIR CUDNN_LIBRARY NCCL_INCLUDE_DIR \
      NCCL_LIBRARY CMAKE_CUDA_COMPILER; do
      value=$(sed -n "s/^$var:[A-Z]*=//p" "$cache" | head -n 1)
      # pkg-config answers with paths like root/usr/lib/x86_64-linux-gnu/pkgconfig/../../../../usr/include
      [[ -e $value ]] && value=$(realpath -s -m "$value")
      case $value in
        *"/.gpu-deps/local/cuda-hints/"*) where=wheel ;;
        *"/.gpu-deps/"*) where=carried ;;
        "") where=- ;;
        *) where=machine ;;
      esac
      printf '%-31s %-8s %s\n' "$var" "$where" "$value"
    done
    for note in "${GPU_DEPS_NOTES[@]}"; do echo "note: $note"; done
  } | tee "$results/dependencies.txt"
}

configure() {
  local extra=()
  read -r -a extra <<<"${DTRAIN_GPU_CMAKE_ARGS:-}"
  if ! cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${GPU_DEPS_CMAKE_ARGS[@]}" "${extra[@]}" >"$results/configure.log" 2>&1; then
    tail -n 20 "$results/configure.log" >&2
    die "cmake configure failed; see $results/configure.log"
  fi
  sed -n '/dtrain configuration summary/,$p' "$results/configure.log"
  report_deps
}

build_all() {
  configure
  if ! cmake --build "$build" -j "$jobs" >"$results/build.log" 2>&1; then
    grep -E 'error|Error' "$results/build.log" | head -n 20 >&2 || tail -n 20 "$results/build.log" >&2
    die "build failed; see $results/build.log"
  fi
  echo "build: $(grep -c 'warning:' "$results/build.log" || true) compiler warnings (build.log)"
  # Every library must resolve here: a carried one built for a newer glibc, or one
  # neither carried nor on this machine, shows as "not found" / "version ... not found".
  # The CUDA libraries are the module's (libdtrain_cuda.so, loaded when a job asks for a GPU).
  ldd "$build/dtrain" "$build/libdtrain_cuda.so" >"$results/ldd-dtrain.txt" 2>&1 || true
  if grep -E 'not found' "$results/ldd-dtrain.txt" >&2; then
    die "dtrain or its CUDA module cannot load the libraries above; carry them in scripts/gpu/fetch-debian-libs.sh"
  fi
  echo "{\"ok\": true, \"seconds\": $(($(date +%s) - phase_t0)), \"jobs\": $jobs}" >"$results/build.json"
}

ensure_built() {
  [[ -n ${built:-} ]] && return 0
  phase_begin build
  build_all
  phase_end
  built=1
}

# --- test -------------------------------------------------------------------------
run_cuda_tests() {
  ctest --test-dir "$build" -L cuda --output-on-failure --timeout 240 \
    --output-junit "$results/ctest-cuda.xml" >"$results/test-cuda.log" 2>&1 || failed+=("cuda tests")
  tail -n 4 "$results/test-cuda.log"
}

run_cpu_tests() {
  local box
  # None started after half the time left, none running longer than the other half.
  box=$(($(budget cpu-test 480 120) / 2))
  echo "cpu suites (time box ${box} s + ${box} s):"
  ctest --test-dir "$build" -L cpu -j "$((jobs / 2 > 1 ? jobs / 2 : 1))" --timeout "$box" \
    --stop-time "$(date -d "+$box sec" +%H:%M:%S)" --output-on-failure --output-junit "$results/ctest-cpu.xml" \
    >"$results/test-cpu.log" 2>&1 || failed+=("cpu tests")
  tail -n 4 "$results/test-cpu.log"
  ctest --test-dir "$build" -N -L cpu | sed -n 's/^ *Test *#[0-9]*: //p' >"$results/ctest-cpu-planned.txt"
}

# --- memcheck -----------------------------------------------------------------------
# compute-sanitizer memcheck over the CUDA suite, in a time box of $1 seconds; writes
# memcheck.json. Runs in the background beside parity, so it only writes files.
memcheck_run() {
  local box=$1 t0 rc=0 sanitizer errors tests
  t0=$(date +%s)
  sanitizer=$(command -v compute-sanitizer || echo "$(dirname "$(command -v nvcc)")/compute-sanitizer")
  if [[ ! -x $sanitizer ]]; then
    python3 -c 'import json, sys; json.dump({"ok": False, "error": sys.argv[1], "seconds": 0}, open(sys.argv[2], "w"))' \
      "compute-sanitizer not found (PATH, beside nvcc)" "$results/memcheck.json"
    return 0
  fi
  # timeout signals the whole process group: the sanitizer and the suite it started.
  timeout -k 10 "$box" "$sanitizer" --tool memcheck --report-api-errors no --error-exitcode 86 --print-limit 20 \
    --log-file "$results/memcheck.log" "$build/dtrain_tests_cuda" --test-case-exclude='*nccl*' \
    >"$results/memcheck-tests.log" 2>&1 || rc=$?
  errors=$( (sed -n 's/.*ERROR SUMMARY: \([0-9][0-9]*\) error.*/\1/p' "$results/memcheck.log" 2>/dev/null || true) | tail -n 1)
  tests=$(grep -E 'test cases:' "$results/memcheck-tests.log" | tail -n 1 | sed 's/^\[doctest\] *//' || true)
  python3 - "$results/memcheck.json" "$rc" "${errors:-}" "$box" "$(($(date +%s) - t0))" "$tests" <<'EOF'
import json, sys
path, rc, errors, box, seconds, tests = sys.argv[1:]
rc, box, seconds = int(rc), int(box), int(seconds)
finished = rc not in (124, 137) and errors != ""
out = {"ok": finished and errors == "0", "errors": int(errors) if errors else None, "finished": finished,
       "exit": rc, "seconds": seconds, "box": box, "tests": tests, "excluded": "*nccl*",
       "options": "--tool memcheck --report-api-errors no"}
if not finished:
    out["error"] = (f"not finished within its time box of {box} s" if rc in (124, 137)
                    else f"no ERROR SUMMARY in memcheck.log (exit {rc})")
json.dump(out, open(path, "w"), indent=1)
EOF
}

memcheck_pid=
memcheck_t0=
memcheck_start() {
  local box
  box=$(budget memcheck 240 60)
  memcheck_t0=$(date +%s)
  echo "memcheck: compute-sanitizer on dtrain_tests_cuda, time box $box s$([[ " ${phases[*]} " == *" parity "* ]] && echo ", beside parity")"
  memcheck_run "$box" &
  memcheck_pid=$!
}
memcheck_join() {
  [[ -n $memcheck_pid ]] || return 0
  echo "[$(stamp)] waiting for memcheck"
  wait "$memcheck_pid" || true
  memcheck_pid=
  record_phase memcheck $(($(date +%s) - memcheck_t0))
  python3 - "$results/memcheck.json" <<'EOF' || failed+=("memcheck")
import json, sys
m = json.load(open(sys.argv[1]))
print(f"memcheck: {m['errors']} errors" if m.get("errors") is not None else "memcheck: no result",
      f"in {m['seconds']} s" + (f"; {m['error']}" if m.get("error") else "")
      + (f"; the suite under memcheck: {m['tests']}" if m.get("tests") else ""))
sys.exit(0 if m["ok"] else 1)
EOF
  echo "[$(stamp)] == memcheck done in $(($(date +%s) - memcheck_t0)) s (at $(elapsed) s) =="
}

# --- main ---------------------------------------------------------------------------
echo "[$(stamp)] $me: phases ${phases[*]}; build $build; results $results; $total_s s in all"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || echo "no GPU"
  nvcc --version | tail -n 2
  cmake --version | head -n 1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "no torch"
  echo "cores: $jobs"
} >"$results/environment.txt"
bench_data=$data_dir
[[ -e $data_dir/train-images-idx3-ubyte.gz || -e $data_dir/train-images-idx3-ubyte ]] || bench_data=synthetic
for p in "${phases[@]}"; do
  # The benchmark and the step timings need the GPU to themselves.
  [[ $p == parity ]] || memcheck_join
  case $p in
    configure)
      phase_begin configure
      configure
      phase_end
      ;;
    build) ensure_built ;;
    test)
      ensure_built
      phase_begin test
      run_cuda_tests
      phase_end
      ;;
    cpu-test)
      ensure_built
      phase_begin cpu-test
      run_cpu_tests
      phase_end
      ;;
    memcheck)
      ensure_built
      phase_begin memcheck
      memcheck_start
      ;;
    parity)
      ensure_built
      phase_begin parity
      python3 "$repo/scripts/gpu/parity.py" --dtrain "$build/dtrain" --data-dir "$data_dir" --epochs "$epochs" \
        --mixed-epochs "$mixed_epochs" --budget "$(budget parity 240 120)" --work "$build/parity" \
        --json "$results/parity.json" || failed+=("parity")
      phase_end
      ;;
    bench)
      ensure_built
      phase_begin bench
      python3 "$repo/scripts/bench/gpu_vs_pytorch.py" --dtrain "$build/dtrain" --data "$bench_data" \
        --seconds "$bench_seconds" --rounds "$bench_rounds" --budget "$(budget bench 280 120)" "${variants[@]}" \
        --work "$build/bench" --json "$results/bench.json" 2>&1 | tee "$results/bench.log" || failed+=("bench")
      phase_end
      ;;
    gpt)
      ensure_built
      phase_begin gpt
      python3 "$repo/scripts/bench/gpt_gpu_vs_pytorch.py" --dtrain "$build/dtrain" \
        --seconds-budget "$(budget gpt 150 90)" --work "$build/gpt-bench" --json "$results/gpt-bench.json" 2>&1 |
        tee "$results/gpt-bench.log" || failed+=("gpt")
      phase_end
      ;;
    step)
      ensure_built
      phase_begin step
      python3 "$repo/scripts/gpu/bench_step.py" --dtrain "$build/dtrain" --data "$bench_data" --steps 50 \
        --budget "$(budget step 120 30)" --work "$build/bench-step" --results "$results" 2>&1 |
        tee "$results/step.log" || echo "bench step: the script failed; going on"
      phase_end
      ;;
  esac
done
memcheck_join

record_phase call "$(elapsed)"
if [[ " ${phases[*]} " != " configure " ]]; then
  python3 "$repo/scripts/gpu/summary.py" "$results" || failed+=("items marked FAIL in the summary")
fi
echo "[$(stamp)] $me: $(elapsed) s in all"
if ((${#failed[@]})); then
  echo "$me: FAILED: ${failed[*]} (see $results)" >&2
  exit 1
fi
echo "[$(stamp)] $me: all checked items passed (results in $results)"
