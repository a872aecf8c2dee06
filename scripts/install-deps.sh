#!/usr/bin/env bash
# Installs what dtrain needs to build and run, from Debian packages.
#   scripts/install-deps.sh          build + run dependencies, Fashion-MNIST and an English text
#                                    (dict-gcide's dictionary: configs/text_gpt.toml's corpus)
#   scripts/install-deps.sh --bench  also PyTorch (the benchmarks' peer) and PIL (its image-folder reader)
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtomlplusplus-dev libcli11-dev libzmq3-dev cppzmq-dev libgloo-dev
  libopenblas-dev libdnnl-dev zlib1g-dev libstb-dev doctest-dev
  ocl-icd-opencl-dev  # only recommended by libdnnl-dev, but its CMake package requires OpenCL
  dataset-fashion-mnist
  dict-gcide  # GNU's Collaborative International Dictionary of English, gzip text
  qemu-user  # the tests run the binary on an emulated CPU without AVX-512
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch python3-pil)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
