#!/usr/bin/env bash
# Prepares the Debian libraries a GPU machine lacks, for scripts/gpu/check.sh there.
#
#   scripts/gpu/fetch-debian-libs.sh
#
# Run it on a Debian machine with apt (no root needed), from anywhere in the repository,
# before copying the working tree to the GPU machine. The GPU machine has no package
# registry, so what the build needs must travel with the tree:
#
#   .gpu-deps/debs/   the downloaded .deb files (kept, so a second run downloads nothing;
#                     they stay here: only .gpu-deps/root travels)
#   .gpu-deps/root/   the packages unpacked with dpkg -x and pruned to what the build and
#                     the run use: headers, the libraries dtrain links, pkg-config and
#                     CMake files (made relative to where they lie, so the folder works
#                     wherever it is copied), the pkgconf tool and Fashion-MNIST
#   .gpu-deps/root/packed-libs.tar.xz
#                     OpenBLAS (36 MB: every CPU's kernels) and the libraries needed
#                     only at run time (libgfortran, libsodium, krb5, ...), compressed
#                     from 50 MB to 12; check.sh unpacks them into .gpu-deps/local/
#                     on the GPU machine, outside the carried root
#
# Both folders are git-ignored; name .gpu-deps/root among the paths the GPU run carries.
set -euo pipefail

me=$(basename "$0")
die() {
  echo "$me: error: $*" >&2
  exit 1
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
deps=$repo/.gpu-deps
debs=$deps/debs
root=$deps/root
arch_dir=usr/lib/x86_64-linux-gnu
max_mb=50

# The packages: the -dev packages the build finds, their runtime libraries and
# those libraries' own dependencies beyond glibc and libstdc++ (a GPU machine
# that has some of them uses its own; check.sh adds only the missing ones).
# Left out: libssl3 (libkrb5-3 names it as a package dependency, but none of
# the libraries dtrain loads links it).
packages=(
  libtomlplusplus-dev libtomlplusplus3
  libcli11-dev
  libzmq3-dev cppzmq-dev libzmq5 libsodium23 libpgm-5.3-0 libnorm1 libbsd0 libmd0
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200 libnl-route-3-200
  libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libquadmath0
  zlib1g-dev zlib1g
  libstb-dev libstb0
  doctest-dev
  pkgconf pkgconf-bin libpkgconf3
  dataset-fashion-mnist
)

for tool in apt-get dpkg-deb xz tar realpath; do
  command -v $tool >/dev/null || die "$tool not found; run this on a Debian machine with apt (xz: xz-utils)"
done

# --- download (only what is not in .gpu-deps/debs yet) -----------------------
mkdir -p "$debs"
missing=()
for p in "${packages[@]}"; do
  compgen -G "$debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "$me: downloading ${#missing[@]} packages: ${missing[*]}"
  # apt-get download writes into the working directory; as root it warns that
  # the download is unsandboxed, which is harmless here.
  (cd "$debs" && apt-get download -q "${missing[@]}" 2>&1) | grep -v "unsandboxed" || true
  echo
  for p in "${missing[@]}"; do
    compgen -G "$debs/${p}_*.deb" >/dev/null ||
      die "apt-get download $p failed; run 'apt-get update' (or check the package name) and retry"
  done
else
  echo "$me: all ${#packages[@]} packages already in .gpu-deps/debs"
fi

# --- unpack into a fresh root --------------------------------------------------
# Built anew every time from the .debs, so a run never mixes old and new files.
rm -rf "$root"
mkdir -p "$root"
for p in "${packages[@]}"; do
  # The newest of the downloaded versions, when several are kept.
  deb=$(printf '%s\n' "$debs/${p}"_*.deb | sort -V | tail -n 1)
  dpkg-deb -x "$deb" "$root"
done

# Packages not yet merged into /usr (zlib1g) put libraries under /lib: move them
# beside the others so one library folder serves all.
if [[ -d $root/lib ]]; then
  cp -a "$root/lib/." "$root/usr/lib/"
  rm -rf "${root:?}/lib"
fi

# --- prune what neither the build nor the run reads ----------------------------
rm -rf "${root:?}"/etc "${root:?}"/usr/sbin "${root:?}"/usr/share/{doc,doc-base,man,lintian,bug,locale}
rm -rf "$root/$arch_dir"/krb5
find "$root" -name '*.a' -delete
# OpenBLAS's reference-BLAS/LAPACK alternatives: dtrain links -lopenblas only.
rm -f "$root/$arch_dir"/openblas-pthread/{libblas,liblapack}.so*
rm -f "$root/$arch_dir"/openblas-pthread/pkgconfig/{blas,lapack}-openblas.pc
# OpenBLAS's CMake files name /usr outright; the build reads openblas.pc instead.
rm -rf "$root/$arch_dir"/cmake/openblas "$root/$arch_dir"/openblas-pthread/cmake

# --- symbolic links: make absolute ones relative -------------------------------
# dpkg -x keeps links such as libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13;
# inside the copied root they must point at the copy, wherever it lies.
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  [[ $target == /* ]] || continue
  target=${target#/}
  [[ -e $root/$target ]] || target=usr/$target # /lib/... moved under usr/lib/ above
  [[ -e $root/$target ]] || die "link ${link#"$root"/} points at /$target, which no package provides"
  ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$root/$target")" "$link"
done < <(find "$root" -type l -print0)
find "$root" -xtype l -delete # links to what was pruned (libblas.so, ...)

# --- pack OpenBLAS and the run-time-only libraries -----------------------------
# A library stays unpacked when the build links it by name (a libX.so link points
# at it: zmq, gloo, toml++, z); the others are loaded only when dtrain runs, so
# they travel compressed and check.sh unpacks them into .gpu-deps/local/.
blas=$root/$arch_dir/openblas-pthread
[[ -f $blas/pkgconfig/openblas.pc ]] || die "openblas.pc missing from libopenblas-pthread-dev"
mv "$blas/pkgconfig/openblas.pc" "$root/$arch_dir/pkgconfig/openblas.pc"
rmdir "$blas/pkgconfig"
declare -A linked=()
while IFS= read -r -d '' devlink; do
  linked[$(realpath "$devlink")]=1
done < <(find "$root/usr/lib" -name 'lib*.so' -type l -print0)
pack_list=$(mktemp)
trap 'rm -f "$pack_list"' EXIT
(
  cd "$root"
  # OpenBLAS whole; elsewhere each run-time-only library with the links to it.
  find "$arch_dir/openblas-pthread" -name 'lib*'
  while IFS= read -r -d '' lib; do
    [[ -n ${linked[$(realpath "$lib")]:-} ]] && continue
    echo "${lib#./}"
  done < <(find ./usr/lib -maxdepth 2 -name 'lib*.so.*' -print0)
) | sort -u >"$pack_list"
tar -C "$root" -cf - -T "$pack_list" | xz -9 -T0 >"$root/packed-libs.tar.xz"
(cd "$root" && xargs -d '\n' rm -f <"$pack_list")
# openblas.pc names where check.sh unpacks the library (outside the root, so
# unpacking never makes the root too large to carry).
# shellcheck disable=SC2016  # ${pcfiledir} is pkg-config's, not the shell's
sed -i -E 's#^libdir=.*#libdir=${pcfiledir}/../../../../../local/packed/'"$arch_dir"'/openblas-pthread#' \
  "$root/$arch_dir/pkgconfig/openblas.pc"

# --- pkg-config files: paths relative to the .pc file ---------------------------
# prefix=/usr becomes prefix=${pcfiledir}/../../../usr (as deep as the file lies),
# so pkg-config answers with paths inside this root wherever it is copied.
while IFS= read -r -d '' pc; do
  up=$(dirname "${pc#"$root"/}" | sed 's#[^/][^/]*#..#g')
  sed -i -E "s#(^[a-z_]+=\"?|-I|-L)/usr#\\1\${pcfiledir}/$up/usr#" "$pc"
  # dtrain links libzmq as a shared library: its static-link dependencies
  # (Requires.private) are not needed, and their .pc files are not carried.
  sed -i '/^Requires.private:/d' "$pc"
  if grep -qE '(^[a-z_]+="?|-I|-L)/' "$pc"; then
    die "${pc#"$root"/} still names an absolute path: $(grep -E '(^[a-z_]+="?|-I|-L)/' "$pc" | head -n 1)"
  fi
done < <(find "$root" -name '*.pc' -print0)

# --- CMake package files: /usr relative to the file ----------------------------
# Debian's Gloo, doctest and toml++ files name /usr outright in places (the
# library's location, the import prefix). Each such file gets a first line that
# computes this root's usr from the file's own folder, and uses it instead.
while IFS= read -r -d '' f; do
  grep -qE '"/usr(/|")' "$f" || continue
  up=$(dirname "${f#"$root"/usr/}" | sed 's#[^/][^/]*#..#g')
  sed -i -E 's#"/usr(/|")#"${_gpu_deps_usr}\1#g' "$f"
  sed -i "1i get_filename_component(_gpu_deps_usr \"\${CMAKE_CURRENT_LIST_DIR}/$up\" ABSOLUTE) # fetch-debian-libs.sh" "$f"
done < <(find "$root/usr" -name '*.cmake' -print0)
if left=$(grep -rlE '^[^#]*(^|[" ;(])/usr/' --include='*.cmake' "$root"); then
  die "these CMake files still name /usr: ${left//$root\//}"
fi
find "$root" -depth -type d -empty -delete

size_kb=$(du -sk "$root" | cut -f1)
data_kb=$(du -sk "$root/usr/share/datasets" | cut -f1)
packed_kb=$(du -sk "$root/packed-libs.tar.xz" | cut -f1)
echo "$me: .gpu-deps/root is $((size_kb / 1024)) MB ($((data_kb / 1024)) MB Fashion-MNIST," \
  "$((packed_kb / 1024)) MB packed libraries, $(find "$root" -type f | wc -l) files)"
((size_kb < max_mb * 1024)) || die ".gpu-deps/root is $((size_kb / 1024)) MB, over the $max_mb MB a GPU run can carry"
echo "$me: done; a GPU run carries .gpu-deps/root (the .debs stay here)"
