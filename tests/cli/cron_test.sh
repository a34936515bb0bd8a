#!/usr/bin/env bash
# scripts/cron/strata-cron.sh: a run never overlaps another (flock), an interrupted run is resumed
# by the next, a finished job makes later runs return at once, and everything lands in the log.
#
#   tests/cli/cron_test.sh path/to/strata       (ctest: cron_wrapper)
set -euo pipefail

strata="$(realpath "${1:?usage: cron_test.sh path/to/strata}")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cron="$repo/scripts/cron/strata-cron.sh"
model="$repo/tests/data/fixtures/llama-gqa"
export OMP_NUM_THREADS=1
tmp="$(mktemp -d /tmp/strata-cron.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "cron_test: FAILED: $*"; cat "$tmp/out.jsonl.log" 2>/dev/null; exit 1; }

for i in $(seq 0 59); do
  printf '{"custom_id":"c%d","prompt":"%s story","max_tokens":24,"temperature":0}\n' \
    "$i" "$(head -c $((1 + i % 17)) /dev/zero | tr '\0' 'w')"
done >"$tmp/in.jsonl"
"$strata" run --model "$model" --input "$tmp/in.jsonl" --output "$tmp/ref.jsonl" \
  --batch-size 1 2>/dev/null
run_cron() { "$cron" --bin "$strata" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" -- \
  --model "$model" --batch-size 1; }

# While another run holds the lock, a run starts nothing.
exec 8>>"$tmp/out.jsonl.lock"
flock 8
run_cron || fail "a run beside a held lock should exit 0"
[ ! -e "$tmp/out.jsonl" ] || fail "a run beside a held lock wrote output"
grep -q "still holds" "$tmp/out.jsonl.log" || fail "the skipped run left no log line"
exec 8>&-

# A run stopped by SIGTERM (a shutdown) exits 75; the next run resumes and finishes.
"$cron" --bin "$strata" --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" -- \
  --model "$model" --batch-size 1 &
wrapper=$!
while [ ! -s "$tmp/out.jsonl" ]; do sleep 0.01; done
strata_pid="$(pgrep -P "$wrapper")"
kill -TERM "$strata_pid"
rc=0
wait "$wrapper" || rc=$?
[ "$rc" = 75 ] || fail "the interrupted run exited $rc, expected 75"
grep -q "the next run resumes" "$tmp/out.jsonl.log" || fail "no log line for the interruption"
run_cron || fail "the resuming run failed"
grep -q "resuming: " "$tmp/out.jsonl.log" || fail "the second run did not resume"
[ -e "$tmp/out.jsonl.done" ] || fail "no done marker after the job finished"
[ "$(sort "$tmp/out.jsonl")" = "$(sort "$tmp/ref.jsonl")" ] ||
  fail "the output differs from an uninterrupted run"

# A finished job: later runs return at once and log nothing.
lines="$(wc -l <"$tmp/out.jsonl.log")"
run_cron || fail "a run after the end failed"
[ "$(wc -l <"$tmp/out.jsonl.log")" = "$lines" ] || fail "a run after the end started strata"
echo "cron_test: PASSED"
