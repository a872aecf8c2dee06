# shellcheck shell=bash disable=SC2154  # $repo and die come from check.sh
# Sourced by scripts/gpu/check.sh: points CMake, pkg-config and the dynamic loader
# at the Debian libraries carried in .gpu-deps/root (scripts/gpu/fetch-debian-libs.sh),
# and at cuDNN and NCCL wherever this machine has them.
#
# Sets (for the caller): GPU_DEPS_CMAKE_ARGS (array), PKG_CONFIG_LIBDIR, LD_LIBRARY_PATH,
# PATH (nvcc), GPU_DEPS_NOTES (array of one-line findings for the report).
# Needs: $repo (the repository root) and a function die MESSAGE.
#
# What the dynamic loader gets: only the carried libraries this machine lacks
# (linked one by one into .gpu-deps/local/lib). A carried library that shadowed
# the system's own copy would be loaded by every program started from here too,
# cmake and python3 included, and an older copy can break them.

gpu_deps_root=$repo/.gpu-deps/root
gpu_deps_local=$repo/.gpu-deps/local
gpu_deps_arch=usr/lib/x86_64-linux-gnu
GPU_DEPS_CMAKE_ARGS=()
GPU_DEPS_NOTES=()

# Unpacks packed-libs.tar.xz into .gpu-deps/local/packed (once per archive).
gpu_deps_unpack() {
  local archive=$gpu_deps_root/packed-libs.tar.xz packed=$gpu_deps_local/packed
  [[ -f $archive ]] || die ".gpu-deps/root has no packed-libs.tar.xz; run scripts/gpu/fetch-debian-libs.sh on a machine with apt first"
  [[ -f $packed/.unpacked && $packed/.unpacked -nt $archive ]] && return 0
  rm -rf "$packed"
  mkdir -p "$packed"
  if command -v xz >/dev/null; then
    tar -C "$packed" -xJf "$archive"
  else # tar needs xz for .xz; Python's tarfile does not
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$packed"
  fi || die "cannot unpack $archive into $packed"
  touch "$packed/.unpacked"
}

# True when the dynamic loader finds library NAME without our help.
gpu_deps_system_has() {
  local name=$1 dir
  grep -qF " $name " <<<"$gpu_deps_system_libs" && return 0
  local IFS=:
  for dir in ${LD_LIBRARY_PATH:-}; do
    [[ -n $dir && $dir != "$gpu_deps_local/lib" && -e $dir/$name ]] && return 0
  done
  return 1
}

# .gpu-deps/local/lib: a link to each carried library the system lacks.
gpu_deps_link_missing() {
  local lib dir name linked=()
  # "libzmq.so.5 (libc6,x86-64) => /lib/..." -> " libzmq.so.5 "
  gpu_deps_system_libs=" $( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p 2>/dev/null || true) |
    awk '/x86-64/ {print $1}' | tr '\n' ' ')"
  rm -rf "${gpu_deps_local:?}/lib"
  mkdir -p "$gpu_deps_local/lib"
  for dir in "$gpu_deps_root/usr/lib" "$gpu_deps_root/$gpu_deps_arch" "$gpu_deps_local/packed/$gpu_deps_arch" \
    "$gpu_deps_local/packed/$gpu_deps_arch/openblas-pthread"; do
    [[ -d $dir ]] || continue
    for lib in "$dir"/lib*.so.*; do
      [[ -e $lib ]] || continue
      name=$(basename "$lib")
      gpu_deps_system_has "$name" && continue
      ln -sfn "$lib" "$gpu_deps_local/lib/$name"
      [[ $name =~ \.so\.[0-9]+$ ]] && linked+=("$name")
    done
  done
  GPU_DEPS_NOTES+=("carried libraries this machine lacks (${#linked[@]}): ${linked[*]:-none}")
}

# The carried Debian packages: pkg-config, CMake's search prefixes, the loader.
gpu_deps_setup() {
  [[ -d $gpu_deps_root/usr ]] ||
    die ".gpu-deps/root is missing; run scripts/gpu/fetch-debian-libs.sh on a machine with apt first (and carry .gpu-deps/root)"
  gpu_deps_unpack
  gpu_deps_link_missing
  export LD_LIBRARY_PATH=$gpu_deps_local/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Only the carried .pc files: a system copy must not answer instead.
  export PKG_CONFIG_LIBDIR=$gpu_deps_root/$gpu_deps_arch/pkgconfig:$gpu_deps_root/usr/share/pkgconfig
  unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
  # CMake searches CMAKE_PREFIX_PATH before the system folders, so the carried
  # packages win where the system has copies too; CMAKE_LIBRARY_PATH covers
  # compilers that do not report the multiarch folder (x86_64-linux-gnu).
  GPU_DEPS_CMAKE_ARGS+=(
    "-DCMAKE_PREFIX_PATH=$gpu_deps_root/usr"
    "-DCMAKE_LIBRARY_PATH=$gpu_deps_root/$gpu_deps_arch;$gpu_deps_root/usr/lib"
  )
  # This machine's pkg-config when it has one (the .pc files are the carried
  # ones either way), else the carried pkgconf.
  local pkg_config
  pkg_config=$(command -v pkg-config || command -v pkgconf || echo "$gpu_deps_root/usr/bin/pkgconf")
  GPU_DEPS_CMAKE_ARGS+=("-DPKG_CONFIG_EXECUTABLE=$pkg_config")
  GPU_DEPS_NOTES+=("pkg-config: $pkg_config")
}

# Where python3's NVIDIA wheels keep FILE (cudnn.h, libnccl.so.2, ...): one folder per line.
gpu_deps_wheel_dirs() {
  python3 - "$@" <<'EOF' 2>/dev/null || true
import os, sys
try:
    import nvidia
except ImportError:
    sys.exit(0)
for base in list(nvidia.__path__):
    for dirpath, _, files in os.walk(base, followlinks=True):
        for pattern in sys.argv[1:]:
            if any(f == pattern or f.startswith(pattern + ".") for f in files):
                print(pattern, dirpath)
EOF
}

# A folder CMake can take as CUDNN_ROOT / NCCL_ROOT for a wheel's NAME (cudnn, nccl):
# include/ -> the wheel's headers; lib/ -> links to the wheel's libraries, with the
# unversioned libNAME.so the wheel does not ship (find_library needs it).
gpu_deps_wheel_root() {
  local name=$1 header=$2 found inc libdir hint lib
  found=$(gpu_deps_wheel_dirs "$header" "lib$name.so")
  # The wheel's own folder first (nvidia/cudnn/...), should another wheel hold a copy.
  inc=$( (grep "^$header .*/$name/" <<<"$found" || grep "^$header " <<<"$found") | head -n 1 | cut -d' ' -f2-)
  libdir=$( (grep "^lib$name.so .*/$name/" <<<"$found" || grep "^lib$name.so " <<<"$found") | head -n 1 |
    cut -d' ' -f2-)
  [[ -n $inc && -n $libdir ]] || return 1
  hint=$gpu_deps_local/cuda-hints/$name
  rm -rf "$hint"
  mkdir -p "$hint/lib"
  ln -s "$inc" "$hint/include"
  for lib in "$libdir"/lib*.so*; do ln -s "$lib" "$hint/lib/"; done
  local versioned=("$libdir/lib$name.so".*) # libcudnn.so.9: the wheel's one version
  [[ -e $hint/lib/lib$name.so ]] || ln -s "${versioned[0]}" "$hint/lib/lib$name.so"
  echo "$hint"
}

# nvcc, and cuDNN / NCCL: beside the toolkit when there, else from python3's wheels.
gpu_deps_cuda() {
  local cuda=${CUDA_HOME:-${CUDA_PATH:-/usr/local/cuda}} name header var hint
  if ! command -v nvcc >/dev/null; then
    [[ -x $cuda/bin/nvcc ]] || die "nvcc not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda/bin); install the CUDA toolkit or set CUDA_HOME"
    export PATH=$cuda/bin:$PATH
  fi
  cuda=$(cd "$(dirname "$(command -v nvcc)")/.." && pwd)
  GPU_DEPS_CMAKE_ARGS+=("-DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc" "-DCUDAToolkit_ROOT=$cuda")
  for name in cudnn nccl; do
    header=$name.h
    var=${name^^}_ROOT
    if [[ -n ${!var:-} ]]; then
      GPU_DEPS_NOTES+=("$name: $var=${!var} (given)")
    elif compgen -G "$cuda/include/$header" >/dev/null && compgen -G "$cuda/lib*/lib$name.so" >/dev/null; then
      GPU_DEPS_NOTES+=("$name: beside the CUDA toolkit in $cuda")
      continue
    elif compgen -G "/usr/include/$header" >/dev/null && compgen -G "/usr/lib/x86_64-linux-gnu/lib$name.so" >/dev/null; then
      GPU_DEPS_NOTES+=("$name: in /usr (system package)")
      continue
    elif hint=$(gpu_deps_wheel_root "$name" "$header"); then
      export "$var=$hint"
      # What the wheel's library loads beside itself (cuDNN's engine libraries).
      export LD_LIBRARY_PATH=$hint/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
      GPU_DEPS_NOTES+=("$name: python3's wheel, $(readlink "$hint/include")")
    else
      die "$name not found beside the CUDA toolkit ($cuda), in /usr or in python3's nvidia wheels; set $var"
    fi
    GPU_DEPS_CMAKE_ARGS+=("-D$var=${!var}")
  done
}
