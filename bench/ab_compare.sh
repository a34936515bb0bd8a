#!/usr/bin/env bash
# Old binary against new, side by side on this machine: N alternating runs of each of two jobs
# on the default model, and the median tokens/s of each with the ratio new/old (issue 27 asks
# for >= 0.97 at every step of the backend refactor).
#
#   bench/ab_compare.sh OLD_STRATA NEW_STRATA [RUNS]       (RUNS default 5)
#
# The jobs:
#   bench: an offloading plan (weights, cache and activations over GPU, CPU and disk tiers),
#          its "total ... tokens/s" line;
#   run:   `strata run` over examples/chat.jsonl with the all-on-device plan, its
#          "generated tokens/s" line;
#   default: the same job with no plan flags (before the one engine: the in-memory Generator;
#          since: the engine, everything on the device, each block one micro-batch).
# Environment: MODEL (default: the model scripts/setup.sh fetched), OFFLOAD (default a temporary
# directory).
set -euo pipefail
cd "$(dirname "$0")/.."
OLD=$1
NEW=$2
RUNS=${3:-5}
MODEL=${MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf}
OFFLOAD=${OFFLOAD:-$(mktemp -d)}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

bench_tps() {
  "$1" bench --model "$MODEL" --prompt-len 64 --gen-len 16 --gpu-batch-size 4 \
    --num-gpu-batches 2 --offload-dir "$OFFLOAD" --percent 30 40 20 50 40 30 2>/dev/null |
    awk '/^total/ {print $2}'
}
run_tps() {
  rm -f "$OUT/out.jsonl"
  "$1" run --model "$MODEL" --input examples/chat.jsonl --output "$OUT/out.jsonl" \
    --percent 100 0 100 0 100 0 2>&1 | sed -n 's/.*(\([0-9.]*\) generated tokens\/s.*/\1/p'
}
default_tps() {
  rm -f "$OUT/out.jsonl"
  "$1" run --model "$MODEL" --input examples/chat.jsonl --output "$OUT/out.jsonl" 2>&1 |
    sed -n 's/.*(\([0-9.]*\) generated tokens\/s.*/\1/p'
}
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for job in bench run default; do
  : >"$OUT/$job.old"
  : >"$OUT/$job.new"
  for ((i = 0; i < RUNS; ++i)); do
    "${job}_tps" "$OLD" >>"$OUT/$job.old"
    "${job}_tps" "$NEW" >>"$OUT/$job.new"
  done
  old=$(median <"$OUT/$job.old")
  new=$(median <"$OUT/$job.new")
  printf "%-6s old %s  new %s  (tokens/s, median of %d)  new/old %.3f\n" "$job" "$old" "$new" \
    "$RUNS" "$(awk -v n="$new" -v o="$old" 'BEGIN {print n / o}')"
  echo "       old runs: $(tr '\n' ' ' <"$OUT/$job.old")"
  echo "       new runs: $(tr '\n' ' ' <"$OUT/$job.new")"
done
