#!/usr/bin/env bash
# Builds and checks dtrain on a GPU machine: CUDA tests, training parity, speed against PyTorch.
#
#   scripts/gpu/check.sh [PHASE...] [--epochs N] [--bench-seconds S]
#
# Run from the repository root on the GPU machine, after scripts/gpu/fetch-debian-libs.sh
# ran on a machine with apt and .gpu-deps/root travelled with the working tree.
# PHASE (default all; several may be given, run in this order):
#   configure  cmake only (build-gpu); the one phase that runs without a GPU, to check
#              that every Debian dependency resolves inside .gpu-deps/root
#   build      configure and build with all cores (-DCMAKE_CUDA_ARCHITECTURES=90)
#   test       ctest -L cuda, then the CPU suites in parallel (time-boxed: at most 8 minutes)
#   parity     configs/fashion_cnn.toml for N epochs (default 1) on cuda and on cpu;
#              mirrored 2 ranks (gloo) on the one GPU against 1 rank, same global batch;
#              a 1-rank NCCL run resumed with more steps against one run straight through
#   bench      scripts/bench/gpu_vs_pytorch.py: images/s against PyTorch eager
#   all        build test parity bench
# Phases after `build` build first when needed (ninja does nothing when up to date), so
# one phase per call works on a fresh machine. Each phase fits in 10 minutes on an
# H100/H200 with 16 cores, build included (a call holding one long phase keeps within
# 570 s: the CPU suites, parity runs and benchmark rounds shrink to fit); `all` takes
# about 20. On a runner with a 10-minute limit per command, carrying .gpu-deps/root:
#   scripts/gpu/check.sh test;  scripts/gpu/check.sh parity;  scripts/gpu/check.sh bench
#
# The build directory is build-gpu ($DTRAIN_GPU_BUILD_DIR overrides; $DTRAIN_GPU_CMAKE_ARGS
# adds configure arguments). Results (logs, JUnit and JSON files, summary.txt) go to $OUT
# when set, else build-gpu/results; the summary table at the end shows what that folder
# holds. The carried libraries need glibc >= 2.34 and libstdc++ >= GCC 12 (Ubuntu 22.04,
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
epochs=1
bench_seconds=8
jobs=$(nproc)

phases=()
while (($#)); do
  case $1 in
    configure | build | test | parity | bench) phases+=("$1") ;;
    all) phases+=(build test parity bench) ;;
    --epochs)
      epochs=${2:?--epochs needs a number}
      shift
      ;;
    --bench-seconds)
      bench_seconds=${2:?--bench-seconds needs a number}
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) die "unknown argument '$1'; phases: configure build test parity bench all; options: --epochs N --bench-seconds S" ;;
  esac
  shift
done
((${#phases[@]})) || phases=(build test parity bench)

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

# --- phase bookkeeping ------------------------------------------------------------
failed=()
stamp() { date +%H:%M:%S; }
phase_begin() {
  phase_name=$1
  phase_t0=$(date +%s)
  echo "[$(stamp)] == $phase_name =="
  # An earlier call's figures must not pass for this one's.
  case $phase_name in
    build) rm -f "$results/build.json" ;;
    test) rm -f "$results"/ctest-*.xml "$results"/ctest-*-planned.txt ;;
    parity | bench) rm -f "$results/$phase_name.json" ;;
  esac
}
phase_end() {
  echo "[$(stamp)] == $phase_name done in $(($(date +%s) - phase_t0)) s =="
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
  ldd "$build/dtrain" >"$results/ldd-dtrain.txt" 2>&1 || true
  if grep -E 'not found' "$results/ldd-dtrain.txt" >&2; then
    die "dtrain cannot load the libraries above; carry them in scripts/gpu/fetch-debian-libs.sh"
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

# Seconds a phase may still take. A call that holds one long phase (test, parity or
# bench, with the build before it) is taken to be one runner call of 10 minutes: what
# is left of 570 s since the start, at least MIN. Several long phases in one call have
# no such limit: DEFAULT.
time_left() {
  local default=$1 min=$2 p long=0
  for p in "${phases[@]}"; do [[ $p == configure || $p == build ]] || long=$((long + 1)); done
  if ((long > 1)); then
    echo "$default"
    return
  fi
  local left=$((570 - ($(date +%s) - script_t0)))
  ((left < default)) || left=$default
  echo $((left > min ? left : min))
}

# --- test -------------------------------------------------------------------------
run_tests() {
  local box
  echo "cuda suites:"
  ctest --test-dir "$build" -L cuda --output-on-failure --timeout 240 \
    --output-junit "$results/ctest-cuda.xml" >"$results/test-cuda.log" 2>&1 || failed+=("cuda tests")
  tail -n 4 "$results/test-cuda.log"
  # The CPU suites in parallel: none started after half the time left, none running
  # longer than the other half (240 s each at most).
  box=$(($(time_left 480 120) / 2))
  echo "cpu suites (time box ${box} s + ${box} s):"
  ctest --test-dir "$build" -L cpu -j "$((jobs / 2 > 1 ? jobs / 2 : 1))" --timeout "$box" \
    --stop-time "$(date -d "+$box sec" +%H:%M:%S)" --output-on-failure --output-junit "$results/ctest-cpu.xml" \
    >"$results/test-cpu.log" 2>&1 || failed+=("cpu tests")
  tail -n 4 "$results/test-cpu.log"
  ctest --test-dir "$build" -N -L cpu | sed -n 's/^ *Test *#[0-9]*: //p' >"$results/ctest-cpu-planned.txt"
}

# --- main ---------------------------------------------------------------------------
echo "[$(stamp)] $me: phases ${phases[*]}; build $build; results $results"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || echo "no GPU"
  nvcc --version | tail -n 2
  cmake --version | head -n 1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null || echo "no torch"
  echo "cores: $jobs"
} >"$results/environment.txt"
for p in "${phases[@]}"; do
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
      run_tests
      phase_end
      ;;
    parity)
      ensure_built
      phase_begin parity
      python3 "$repo/scripts/gpu/parity.py" --dtrain "$build/dtrain" --data-dir "$data_dir" --epochs "$epochs" \
        --budget "$(time_left 480 150)" --work "$build/parity" --json "$results/parity.json" || failed+=("parity")
      phase_end
      ;;
    bench)
      ensure_built
      phase_begin bench
      python3 "$repo/scripts/bench/gpu_vs_pytorch.py" --dtrain "$build/dtrain" --data "$data_dir" \
        --seconds "$bench_seconds" --budget "$(time_left 480 150)" --work "$build/bench" --json "$results/bench.json" ||
        failed+=("bench")
      phase_end
      ;;
  esac
done

if [[ " ${phases[*]} " != " configure " ]]; then
  python3 "$repo/scripts/gpu/summary.py" "$results" || failed+=("items marked FAIL in the summary")
fi
if ((${#failed[@]})); then
  echo "$me: FAILED: ${failed[*]} (see $results)" >&2
  exit 1
fi
echo "[$(stamp)] $me: all checked items passed (results in $results)"
