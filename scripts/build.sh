#!/usr/bin/env bash
# Configures and builds dtrain into build/ (binary: build/dtrain).
#   scripts/build.sh [extra cmake arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build
