#!/usr/bin/env bash
# A real single-node Slurm cluster runs a sharded strata job through scripts/slurm.
#
#   tests/cli/slurm_cluster_test.sh path/to/strata       (ctest: slurm_cluster, label slurm)
#
# 1. Installs slurm-wlm and munge from Debian when sbatch is missing (as root, or through
#    passwordless sudo; otherwise the test is skipped, exit 77, with a message).
# 2. Brings up slurmctld and slurmd under a temporary directory, as docs ANCHORS.md describes:
#    no systemd, AuthType=auth/none with CredType=cred/none (no munge daemon), proctrack/linuxproc,
#    free ports, RequeueExit=75.
# 3. Submits scripts/slurm/submit.sh over the default model with four shards of a handful of
#    short greedy prompts, requeues the task with the most requests while it runs (after it has
#    written a result, so its second start resumes), and waits for the merge job.
# 4. Checks the merged file: every custom_id exactly once, byte-identical to an unsharded run put
#    in input order; each shard holds exactly the ids the shard rule gives it; the requeued task
#    was stopped by the requeue (strata exit 75), started again and resumed from its journal.
# 5. Shuts the cluster down and removes the directory, on success and on failure alike.
set -euo pipefail

strata="$(realpath "${1:?usage: slurm_cluster_test.sh path/to/strata}")"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
export OMP_NUM_THREADS=1

say() { echo "slurm_cluster_test: $*"; }
skip() { say "SKIPPED: $*"; exit 77; }

if [ "$(id -u)" -ne 0 ]; then
  sudo -n true 2>/dev/null || skip "needs root or passwordless sudo to run slurmctld and slurmd"
  exec sudo -n -E bash "$0" "$@"
fi
if ! command -v sbatch >/dev/null || ! command -v slurmctld >/dev/null; then
  say "installing slurm-wlm and munge"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends slurm-wlm munge; } >/dev/null ||
    skip "could not install slurm-wlm (no network or no Debian archive?)"
fi

cache="${STRATA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/strata}"
model="$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || skip "the default model is not in $cache; run scripts/setup.sh"

tmp="$(mktemp -d /tmp/strata-slurm.XXXXXX)"
export SLURM_CONF="$tmp/slurm.conf"
ctld_pid="" slurmd_pid=""
cleanup() {
  local rc=$?
  if [ -n "$ctld_pid" ]; then
    scancel --quiet --full $(squeue -h -o %A 2>/dev/null) 2>/dev/null || true
    for _ in $(seq 1 30); do
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      sleep 1
    done
  fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    say "FAILED; logs follow"
    for f in "$tmp"/*.log "$tmp"/out/logs/*.log; do
      [ -f "$f" ] && { echo "==== $f"; tail -n 40 "$f"; }
    done
  fi
  [ -n "$slurmd_pid" ] && kill "$slurmd_pid" 2>/dev/null
  [ -n "$ctld_pid" ] && kill "$ctld_pid" 2>/dev/null
  [ -n "$slurmd_pid" ] && wait "$slurmd_pid" 2>/dev/null
  [ -n "$ctld_pid" ] && wait "$ctld_pid" 2>/dev/null
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/out"
cat >"$SLURM_CONF" <<CONF
ClusterName=stratatest
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
MpiDefault=none
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
RequeueExit=75
MinJobAge=600
KillWait=15
NodeName=localhost CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -f "$SLURM_CONF" -N localhost >"$tmp/slurmd.out" 2>&1 &
slurmd_pid=$!
for i in $(seq 1 60); do
  state="$(sinfo -h -n localhost -o %T 2>/dev/null || true)"
  [ "$state" = "idle" ] && break
  [ "$i" = 60 ] && { say "the node never became idle (state: $state)"; exit 1; }
  sleep 1
done
say "cluster up in $tmp"

# A handful of short greedy prompts, and the reference: one unsharded run, in input order.
prompts=("The capital of France is" "Water boils at" "The largest planet is" "Two plus two is"
         "Bees make" "The sun rises in the" "A week has" "Snow is" "The opposite of hot is"
         "Cats like to" "The first month of the year is" "Grass is")
for i in "${!prompts[@]}"; do
  printf '{"custom_id":"s%d","prompt":"%s","max_tokens":16,"temperature":0}\n' "$i" "${prompts[$i]}"
done >"$tmp/in.jsonl"
"$strata" run --input "$tmp/in.jsonl" --output "$tmp/ref.jsonl" --batch-size 4 2>"$tmp/ref.log"
"$strata" merge --input-order "$tmp/in.jsonl" "$tmp/ref.jsonl" --output "$tmp/ref-ordered.jsonl" \
  2>>"$tmp/ref.log"

# --batch-size 1: a block per request, so the task to requeue has written a result first.
export STRATA_ARGS="--batch-size 1 --progress-interval 1"
submitted="$("$repo/scripts/slurm/submit.sh" --input "$tmp/in.jsonl" --output-dir "$tmp/out" \
  --shards 4 --bin "$strata" -- --chdir="$tmp")"
say "$submitted"
array_id="$(echo "$submitted" | sed -n 's/^array job \([0-9]*\).*/\1/p')"
merge_id="$(echo "$submitted" | sed -n 's/.*merge job \([0-9]*\).*/\1/p')"
[ -n "$array_id" ] && [ -n "$merge_id" ]

job_field() { scontrol show job "$1" 2>/dev/null | grep -o "$2=[^ ]*" | head -n 1 | cut -d= -f2; }

# The ids of each shard by the rule of src/job/shard.h; the test checks the shard outputs hold
# exactly these, and requeues the task with the most requests.
shard_ids() {
  python3 - "$tmp/in.jsonl" <<'PY'
import json, sys
M = (1 << 64) - 1
def shard(cid, n):
    h = 0xcbf29ce484222325
    for b in cid.encode():
        h = ((h ^ b) * 0x100000001b3) & M
    h = ((h ^ (h >> 30)) * 0xbf58476d1ce4e5b9) & M
    h = ((h ^ (h >> 27)) * 0x94d049bb133111eb) & M
    return (h ^ (h >> 31)) % n
ids = [[] for _ in range(4)]
for line in open(sys.argv[1]):
    cid = json.loads(line)["custom_id"]
    ids[shard(cid, 4)].append(cid)
for s in ids:
    print(" ".join(sorted(s)))
PY
}
mapfile -t expected_ids < <(shard_ids)
busiest=0
for t in 1 2 3; do
  [ "$(wc -w <<<"${expected_ids[$t]}")" -gt "$(wc -w <<<"${expected_ids[$busiest]}")" ] && busiest=$t
done
[ "$(wc -w <<<"${expected_ids[$busiest]}")" -ge 2 ] || { say "no shard has two requests"; exit 1; }

# Requeue the busiest task once it runs and has a result in its output.
task="${array_id}_$busiest"
shard_out="$tmp/out/shard-$busiest-of-4.jsonl"
task_log="$tmp/out/logs/strata-${array_id}_$busiest.log"
for i in $(seq 1 600); do
  if [ "$(job_field "$task" JobState)" = RUNNING ] && [ -s "$shard_out" ]; then break; fi
  [ "$i" = 600 ] && { say "task $busiest never ran with a result written"; exit 1; }
  sleep 0.2
done
say "requeueing task $busiest after $(wc -l <"$shard_out") of its" \
    "$(wc -w <<<"${expected_ids[$busiest]}") results"
scontrol requeue "$task"
# A requeued job waits ~120 s before it may start again; let it start now.
for i in $(seq 1 100); do
  [ "$(job_field "$task" JobState)" = PENDING ] && scontrol update jobid="$task" StartTime=now \
    2>/dev/null && break
  sleep 0.2
done

for i in $(seq 1 300); do
  state="$(job_field "$merge_id" JobState)"
  reason="$(job_field "$merge_id" Reason)"
  case "$state" in
    COMPLETED) break ;;
    FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY)
      say "merge job ended $state"; exit 1 ;;
  esac
  [ "$reason" = DependencyNeverSatisfied ] && { say "an array task failed"; exit 1; }
  [ "$i" = 300 ] && { say "timed out waiting for the merge job (state $state)"; exit 1; }
  sleep 1
done
say "merge job $merge_id completed"

merged="$tmp/out/merged.jsonl"
restarts="$(job_field "$task" Restarts)"
[ "$restarts" -ge 1 ] || { say "task $busiest shows Restarts=$restarts, expected a restart"; exit 1; }
grep -q "strata stopped early (exit 75)" "$task_log" ||
  { say "task $busiest was not stopped mid-job by the requeue"; exit 1; }
grep -q "SLURM_RESTART_COUNT=1" "$task_log" || { say "task $busiest never started again"; exit 1; }
grep -q "resuming: " "$task_log" ||
  { say "task $busiest's second start did not resume from its output"; exit 1; }
for t in 0 1 2 3; do
  got="$(python3 -c 'import json,sys; print(" ".join(sorted(json.loads(l)["custom_id"] for l in open(sys.argv[1]))))' \
    "$tmp/out/shard-$t-of-4.jsonl")"
  [ "$got" = "${expected_ids[$t]}" ] ||
    { say "shard $t holds [$got], the shard rule gives [${expected_ids[$t]}]"; exit 1; }
done
lines="$(wc -l <"$merged")"
unique="$(python3 -c 'import json,sys; print(len({json.loads(l)["custom_id"] for l in open(sys.argv[1])}))' "$merged")"
[ "$lines" = "${#prompts[@]}" ] && [ "$unique" = "${#prompts[@]}" ] ||
  { say "merged output has $lines lines and $unique ids, expected ${#prompts[@]}"; exit 1; }
cmp "$merged" "$tmp/ref-ordered.jsonl" ||
  { say "merged output differs from the unsharded run"; diff "$merged" "$tmp/ref-ordered.jsonl"; exit 1; }
say "PASSED: ${#prompts[@]} requests over 4 shards, task $busiest requeued mid-job and resumed;" \
    "merged output equals the unsharded run"
