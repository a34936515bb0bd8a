#!/usr/bin/env bash
# Runs a strata job from cron: never two runs at once (flock), every message appended to a log,
# and each run resumes where the last one stopped (the output file is the job's journal).
#
#   strata-cron.sh --input IN --output OUT [--log FILE] [--lock FILE] [--bin STRATA] \
#                  [-- more `strata run` flags, e.g. --model M --batch-size 32]
#
# crontab line, every 15 minutes:
#   */15 * * * * /path/to/strata/scripts/cron/strata-cron.sh --input /data/in.jsonl --output /data/out.jsonl
#
# Defaults: log OUT.log, lock OUT.lock, binary build/strata of this checkout. A run that finds
# the previous one still going logs that and exits 0. When a run finishes the whole input it
# writes OUT.done; later runs then exit at once until the input changes (is newer than OUT.done),
# so a finished job costs nothing. Exit codes are strata run's (README: Exit codes).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

input="" output="" logfile="" lock="" bin="$here/../../build/strata"
while [ $# -gt 0 ]; do
  case "$1" in
    --input) input="$2"; shift 2 ;;
    --output) output="$2"; shift 2 ;;
    --log) logfile="$2"; shift 2 ;;
    --lock) lock="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --) shift; break ;;
    *) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
if [ -z "$input" ] || [ -z "$output" ]; then
  echo "strata-cron: --input and --output are required" >&2
  exit 2
fi
logfile="${logfile:-$output.log}"
lock="${lock:-$output.lock}"
done_marker="$output.done"

log() { echo "$(date '+%Y-%m-%dT%H:%M:%S') strata-cron[$$]: $*" >>"$logfile"; }

exec 9>>"$lock"
if ! flock -n 9; then
  log "the previous run still holds $lock; not starting another"
  exit 0
fi
if [ -e "$done_marker" ] && [ "$done_marker" -nt "$input" ]; then
  exit 0
fi

# strata inherits fd 9, so the lock stays held as long as strata runs, even if this shell dies.
log "start: $bin run --input $input --output $output $*"
"$bin" run --input "$input" --output "$output" "$@" >>"$logfile" 2>&1
rc=$?
case "$rc" in
  0 | 1) touch "$done_marker"; log "finished (exit $rc); $output is complete" ;;
  75) log "interrupted (exit 75); the next run resumes" ;;
  *) log "failed (exit $rc); fix the problem above, the next run retries" ;;
esac
exit "$rc"
