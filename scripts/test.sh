#!/usr/bin/env bash
# One command that installs everything, builds strata (the CUDA backend too when nvcc is found)
# and runs every test. Tests labelled `gpu` skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc)" "$@"
