#!/usr/bin/env bash
# Submits a sharded strata job to Slurm: an array of N tasks (strata-array.sbatch), one shard
# each, and a merge job (strata-merge.sbatch) that runs when every task has succeeded.
#
#   scripts/slurm/submit.sh --input in.jsonl --output-dir out --shards 4 \
#       [--model M] [--time 04:00:00] [--ext .jsonl.zst] [--bin build/strata] \
#       [-- more sbatch flags for the array, e.g. --partition gpu --gres gpu:1]
#
# STRATA_ARGS in the environment passes more `strata run` flags. Logs go to OUTPUT_DIR/logs.
# Prints the two job ids; the merged file is OUTPUT_DIR/merged.jsonl (or .jsonl.zst).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }

input="" out="" shards="" model="" time_limit="" ext=".jsonl" bin=""
while [ $# -gt 0 ]; do
  case "$1" in
    --input) input="$2"; shift 2 ;;
    --output-dir) out="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --time) time_limit="$2"; shift 2 ;;
    --ext) ext="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
  esac
done
[ -n "$input" ] && [ -n "$out" ] && [ -n "$shards" ] || usage
[ "$shards" -ge 1 ] 2>/dev/null || { echo "submit: --shards must be a positive number" >&2; exit 2; }
[ -f "$input" ] || { echo "submit: input $input not found" >&2; exit 2; }
[ -z "$bin" ] && bin="$(command -v strata || echo "$here/../../build/strata")"
[ -x "$bin" ] || { echo "submit: strata binary $bin not found; build it or pass --bin" >&2; exit 2; }
mkdir -p "$out/logs"

# Jobs may start in another directory: give them absolute paths.
export STRATA_INPUT="$(realpath "$input")" STRATA_OUTPUT_DIR="$(realpath "$out")"
export STRATA_SHARDS="$shards" STRATA_OUTPUT_EXT="$ext" STRATA_BIN="$(realpath "$bin")"
export STRATA_MERGED="$STRATA_OUTPUT_DIR/merged$ext"
[ -n "$model" ] && export STRATA_MODEL="$(realpath "$model")"
array_flags=(--parsable --array="0-$((shards - 1))" --output="$STRATA_OUTPUT_DIR/logs/strata-%A_%a.log")
[ -n "$time_limit" ] && array_flags+=(--time="$time_limit")

array_id="$(sbatch "${array_flags[@]}" "$@" "$here/strata-array.sbatch")"
array_id="${array_id%%;*}"
merge_id="$(sbatch --parsable --dependency="afterok:$array_id" \
  --output="$STRATA_OUTPUT_DIR/logs/strata-merge-%j.log" "$here/strata-merge.sbatch")"
merge_id="${merge_id%%;*}"
echo "array job $array_id ($shards shards), merge job $merge_id -> $STRATA_MERGED"
