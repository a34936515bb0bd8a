#!/usr/bin/env bash
# Registers, shared memory, spills and stack frame of every CUDA kernel strata compiles, from
# `ptxas -v` (issue 28; the table in docs/PERFORMANCE.md "Kernel resources"). Configures BUILD_DIR
# (default build-ptxas) with STRATA_CUDA_RESOURCE_USAGE=ON for one architecture, recompiles the
# CUDA objects of strata_backend_cuda (the only target with .cu files) and prints a Markdown table.
# Exits 1 when any kernel spills. Needs nvcc, not a GPU.
#
#   scripts/ptxas_report.sh [BUILD_DIR] [ARCH]      e.g. scripts/ptxas_report.sh build-ptxas 90
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-ptxas}
arch=${2:-90}

# Ninja prints each compiler's output as one block, so a parallel build keeps ptxas's lines
# together; with Make they can interleave, so that builds one file at a time.
generator=()
if [[ ! -f $build/CMakeCache.txt ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
cmake -S "$root" -B "$build" "${generator[@]}" -DSTRATA_CUDA=ON -DSTRATA_CUDA_RESOURCE_USAGE=ON \
  -DSTRATA_CUDA_ARCHS="$arch" -DCMAKE_BUILD_TYPE=Release >/dev/null
jobs=1
if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt"; then jobs=$(nproc); fi

log=$(mktemp)
trap 'rm -f "$log" "$log.rows"' EXIT
find "$build" -name '*.cu.o' -delete  # ptxas speaks only when it compiles
cmake --build "$build" --target strata_backend_cuda -j "$jobs" >"$log" 2>&1 ||
  { cat "$log" >&2; exit 2; }

# One row per entry function: its name from "Compiling entry function", the stack and spills from
# the "Function properties" line of that name, registers and shared memory from "Used".
awk -v arch="sm_$arch" '
  match($0, /Compiling entry function \047[^\047]+\047 for \047sm_[0-9]+\047/) {
    split(substr($0, RSTART, RLENGTH), f, "\047"); entry = (f[4] == arch) ? f[2] : ""; props = ""
  }
  /Function properties for/ { props = $NF }
  entry != "" && props == entry && /bytes stack frame/ {
    stack = $1; stores = $5; loads = $9
  }
  entry != "" && /Used [0-9]+ registers/ {
    match($0, /Used [0-9]+ registers/); split(substr($0, RSTART, RLENGTH), r, " ")
    smem = 0
    if (match($0, /[0-9]+ bytes smem/)) { split(substr($0, RSTART, RLENGTH), s, " "); smem = s[1] }
    print entry, r[2], smem, stores, loads, stack
    entry = ""
  }' "$log" | sort -u >"$log.rows"
[[ -s $log.rows ]] || { echo "no ptxas lines found in the build of $build" >&2; exit 2; }

echo "| kernel (sm_$arch) | registers | smem bytes | spill stores | spill loads | stack frame |"
echo "|---|---:|---:|---:|---:|---:|"
while read -r name regs smem stores loads stack; do
  pretty=$(c++filt -p "$name" | sed -e 's/strata::kernels::cuda:://g' \
    -e 's/cub::CUB_[0-9]*_SM_[0-9]*::/cub::/g')
  echo "| \`$pretty\` | $regs | $smem | $stores | $loads | $stack |"
done <"$log.rows" | LC_ALL=C sort
spills=$(awk '$4 + $5 > 0' "$log.rows" | wc -l)
echo
echo "$(wc -l <"$log.rows") kernels, $spills spilling"
((spills == 0))
