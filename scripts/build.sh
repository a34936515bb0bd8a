#!/usr/bin/env bash
# Configures and builds strata into build/ (Release). Extra arguments go to cmake, e.g.
# -DSTRATA_CUDA=OFF or -DSTRATA_CUDA_ARCHS="80;90".
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$(nproc)"
