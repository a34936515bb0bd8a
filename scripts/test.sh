#!/usr/bin/env bash
# One command that installs everything, builds strata (the CUDA backend too when nvcc is found)
# and runs every test. Tests labelled `gpu` skip themselves on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
# ctest runs tests side by side; OpenMP threads that spin while they wait would then fight over
# the cores (a 2-core machine slows down tenfold), so waiting threads sleep instead.
export OMP_WAIT_POLICY=PASSIVE
ctest --output-on-failure -j"$(nproc)" "$@"
