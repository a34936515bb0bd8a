#!/usr/bin/env bash
# Configures and builds strata into build/ (Release). `--target NAME` (repeatable) builds only
# those targets; every other argument goes to cmake, e.g. -DSTRATA_CUDA=OFF or
# -DSTRATA_CUDA_ARCHS="80;90".
set -euo pipefail
cd "$(dirname "$0")/.."
configure=()
targets=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--target" ] && [ $# -gt 1 ]; then
    targets+=(--target "$2")
    shift 2
  else
    configure+=("$1")
    shift
  fi
done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${configure[@]+"${configure[@]}"} >/dev/null
cmake --build build -j"$(nproc)" ${targets[@]+"${targets[@]}"}
