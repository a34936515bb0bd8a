#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: configure and build strata with the CUDA backend
# for this GPU's architecture, run every test labelled `gpu`, run the kernel benchmarks and
# `strata profile`, and print a short table LAST, so that the end of the output alone tells the
# story.
#
#   scripts/gpu_check.sh [--quick] [--full] [--no-build]
#     --quick     shorter benchmarks (one context length, fewer repetitions)
#     --full      build every target of the project, not only the gpu tests and benchmarks
#     --no-build  run from the existing BUILD_DIR as it is (a built tree, or one carried to a GPU
#                 machine that cannot configure strata: ../shared/tools/gpu-bundle.sh)
#
# Environment: BUILD_DIR (default build-gpu), JOBS (default nproc), OUT (when set, logs are copied
# there). Exit status: 0 when every gpu test passed (none skipped) and every benchmark target was
# met; 1 otherwise; 2 when there is no usable GPU or the build failed.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=""
FULL=0
NO_BUILD=0
for arg in "$@"; do
  case "$arg" in
    --quick) QUICK="--quick" ;;
    --full) FULL=1 ;;
    --no-build) NO_BUILD=1 ;;
    *) echo "usage: scripts/gpu_check.sh [--quick] [--full] [--no-build]" >&2; exit 2 ;;
  esac
done
BUILD="${BUILD_DIR:-build-gpu}"
JOBS="${JOBS:-$(nproc)}"
LOGS="$BUILD/gpu-check"

# Architecture from the driver's compute capability ("9.0" -> 90); 90 when nvidia-smi cannot say.
ARCH=""
DEVICE=""
if command -v nvidia-smi >/dev/null 2>&1; then
  ARCH="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d ' .')"
  DEVICE="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
fi
[[ "$ARCH" =~ ^[0-9]+$ ]] || ARCH=90
echo "== gpu_check: ${DEVICE:-no GPU visible to nvidia-smi}, sm_${ARCH}, build dir ${BUILD}"

GPU_TARGETS=(cuda_kernels_test cuda_backend_test cuda_kv_q4_backend_test cuda_memory_test)
GPU_TARGETS+=(engine_cuda_test device_probes_test decode_attention_bench strata)
GPU_TARGETS+=(prefill_bench)  # issue 30: prefill attention and fp16 GEMMs (block below)
GPU_TARGETS+=(q4_channel_head_dims_test)  # issue 29: the default 4-bit cache at head_dim 80, 96
GPU_TARGETS+=(cli_test)       # issue 28: --device cuda runs or is refused
GPU_TARGETS+=(cuda_half_activations_test)  # issue 28: every op on fp16 and bf16 activations
GPU_TARGETS+=(cuda_lt_gemm_test)  # issue 30: cuBLASLt GEMMs, their epilogues and kept plans
mkdir -p "$LOGS"
if [[ $NO_BUILD -eq 1 ]]; then
  for t in "$BUILD/strata" "$BUILD/bench/cuda/decode_attention_bench" "$BUILD/CTestTestfile.cmake"; do
    if [[ ! -e "$t" ]]; then
      echo "gpu_check: FAIL (--no-build, but $t is missing: build $BUILD with -DSTRATA_CUDA=ON first)"
      exit 2
    fi
  done
elif ! cmake -S . -B "$BUILD" -DSTRATA_CUDA=ON -DSTRATA_CUDA_ARCHS="$ARCH" \
    -DCMAKE_BUILD_TYPE=Release >"$BUILD/configure.log" 2>&1; then
  tail -n 30 "$BUILD/configure.log"
  echo "gpu_check: FAIL (configure failed; log in $BUILD/configure.log)"
  exit 2
fi
if [[ $FULL -eq 1 ]]; then
  BUILD_ARGS=()
else
  BUILD_ARGS=(--target "${GPU_TARGETS[@]}")
fi
if [[ $NO_BUILD -eq 0 ]] && ! cmake --build "$BUILD" -j "$JOBS" ${BUILD_ARGS[@]+"${BUILD_ARGS[@]}"} >"$LOGS/build.log" 2>&1; then
  # With --full, an unrelated broken module should not hide the GPU results.
  if [[ $FULL -eq 0 ]] || ! cmake --build "$BUILD" -j "$JOBS" --target "${GPU_TARGETS[@]}" \
      >>"$LOGS/build.log" 2>&1; then
    grep -E "error" "$LOGS/build.log" | head -n 20
    echo "gpu_check: FAIL (build failed; log in $LOGS/build.log)"
    exit 2
  fi
  echo "gpu_check: full build failed (see $LOGS/build.log); the GPU targets built"
fi

if [[ -z "$DEVICE" ]]; then
  echo
  echo "================ strata gpu_check: no GPU ================"
  echo "built with CUDA for sm_${ARCH}; no GPU visible, so no gpu tests and no benchmarks ran"
  echo "gpu_check: NO GPU (exit 2)"
  exit 2
fi

# Tests labelled gpu. On a GPU machine a skipped test means the device was not usable: a failure.
(cd "$BUILD" && ctest -L gpu --output-on-failure) >"$LOGS/ctest.log" 2>&1
CTEST_RC=$?
tail -n 40 "$LOGS/ctest.log"
TOTAL=$(grep -cE "^ *[0-9]+/[0-9]+ Test" "$LOGS/ctest.log")
PASSED=$(grep -cE "^ *[0-9]+/[0-9]+ Test.* Passed" "$LOGS/ctest.log")
SKIPPED=$(grep -cE "^ *[0-9]+/[0-9]+ Test.*Skipped" "$LOGS/ctest.log")
FAILED=$((TOTAL - PASSED - SKIPPED))

# Kernel benchmarks.
BENCH_RC=0
"$BUILD/bench/cuda/decode_attention_bench" $QUICK >"$LOGS/bench.log" 2>&1 || BENCH_RC=$?
grep -v '^RESULT' "$LOGS/bench.log" | tail -n 5

# This machine's profile, as `strata plan`, `run` and `bench` would use it.
PROFILE_RC=0
"$BUILD/strata" profile --out "$LOGS/hw.yaml" --offload-dir "$BUILD" >"$LOGS/profile.log" 2>&1 \
  || PROFILE_RC=$?

if [[ -n "${OUT:-}" ]]; then
  mkdir -p "$OUT" && cp "$LOGS"/*.log "$LOGS"/hw.yaml "$OUT"/ 2>/dev/null
fi

# The table.
TEST_VERDICT=PASS
if [[ $CTEST_RC -ne 0 || $FAILED -ne 0 || $SKIPPED -ne 0 || $TOTAL -eq 0 ]]; then TEST_VERDICT=FAIL; fi
echo
echo "================ strata gpu_check: ${DEVICE:-unknown GPU} (sm_${ARCH}) ================"
printf "gpu tests: %d run, %d passed, %d failed, %d skipped  -> %s\n" \
  "$TOTAL" "$PASSED" "$FAILED" "$SKIPPED" "$TEST_VERDICT"
if [[ $PROFILE_RC -eq 0 ]]; then
  echo "profile: $(grep -E '^(h2d_gbps|d2d_gbps|gpu_prefill_tflops|gpu_decode_tflops|gpu_attention_q4_gbps|gpu_emulated):' "$LOGS/hw.yaml" | tr '\n' ' ')"
else
  echo "profile: strata profile exited with status $PROFILE_RC (see profile.log)"
fi
awk -v bench_rc="$BENCH_RC" '
  function field(name,   i, kv) {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  BEGIN {
    printf "%-11s %-30s %9s %7s %7s %s\n", "kernel", "shape", "GB/s", "x D2D", "target", "result"
    missed = 0; rows = 0
  }
  /^RESULT/ {
    k = field("kernel")
    if (k == "d2d_copy") {
      printf "%-11s %-30s %9s %7s %7s %s\n", k, "1 GiB, read+write", field("gbps"), "1.000", "-", "bound"
      next
    }
    shape = sprintf("d%s g%s kv%s ctx%s b%s", field("head_dim"), field("group"), field("kv_heads"),
                    field("ctx"), field("batch"))
    verdict = field("pass") == "1" ? "PASS" : "FAIL"
    if (verdict == "FAIL") ++missed
    ++rows
    if (k == "q4_vs_f16") {
      printf "%-11s %-30s %9s %7s %7s %s\n", k, shape, field("speedup") "x", "-", ">=" field("target") "x", verdict
    } else {
      target = field("target") == "-" ? "-" : ">=" field("target")
      printf "%-11s %-30s %9s %7s %7s %s\n", k, shape, field("gbps"), field("ratio"), target, verdict
    }
  }
  END {
    if (bench_rc != 0) { printf "benchmark exited with status %d (see bench.log)\n", bench_rc; missed = -1 }
    else if (rows == 0) { print "benchmark produced no results"; missed = -1 }
    if (missed == 0) print "benchmark targets: all met -> PASS"
    else if (missed > 0) printf "benchmark targets: %d missed -> FAIL\n", missed
    else print "benchmark targets: not measured -> FAIL"
    exit(missed == 0 ? 0 : 1)
  }' "$LOGS/bench.log"
BENCH_VERDICT=$?

# Issue 30: tensor-core prefill attention and fp16 GEMMs (prefill_bench), beside PyTorch's SDPA
# and matmul measured in the same run when torch is importable (bench/cuda/prefill_reference.py).
# Targets: the H200 figures of the issue (FlashAttention-2 backend; 0.95 of cuBLAS via PyTorch).
PREFILL_RC=0
"$BUILD/bench/cuda/prefill_bench" $QUICK >"$LOGS/prefill_bench.log" 2>&1 || PREFILL_RC=$?
if python3 -c "import torch" >/dev/null 2>&1; then
  python3 bench/cuda/prefill_reference.py $QUICK >"$LOGS/prefill_reference.log" 2>&1
else
  echo "# torch not importable: no PyTorch reference" >"$LOGS/prefill_reference.log"
fi
[[ -n "${OUT:-}" ]] && cp "$LOGS"/prefill_*.log "$OUT"/ 2>/dev/null
awk -v bench_rc="$PREFILL_RC" '
  function field(name,   i, kv) {
    for (i = 2; i <= NF; ++i) { split($i, kv, "="); if (kv[1] == name) return kv[2] }
    return ""
  }
  function key() {
    if (field("m") != "") return sprintf("%sx%sx%s", field("m"), field("n"), field("k"))
    return sprintf("d%s t%s %sx%s/%s", field("head_dim"), field("tokens"), field("seqs"),
                   field("heads"), field("kv_heads"))
  }
  # PyTorch beside each of strata's rows: SDPA's FlashAttention-2 backend beside prefill,
  # torch.matmul beside gemm, F.linear with a bias beside gemm_bias.
  FILENAME == ARGV[1] && /^RESULT kernel=torch_sdpa_flash / { torch["prefill:" key()] = field("tflops") }
  FILENAME == ARGV[1] && /^RESULT kernel=torch_matmul / { torch["gemm:" key()] = field("tflops") }
  FILENAME == ARGV[1] && /^RESULT kernel=torch_linear_bias / { torch["gemm_bias:" key()] = field("tflops") }
  FILENAME == ARGV[2] && /^RESULT kernel=(prefill|gemm|gemm_bias) / {
    if (!header) {
      printf "%-9s %-26s %7s %7s %7s %7s %s\n", "kernel", "shape", "TFLOPS", "torch", "x torch", "target", "result"
      header = 1
    }
    k = field("kernel"); t = torch[k ":" key()]
    verdict = field("pass") == "1" ? "PASS" : "FAIL"
    # A GEMM is held to PyTorch on this card when PyTorch ran here (the issue: same shapes, same
    # machine); else to the H200 figure the benchmark carries.
    if (k ~ /^gemm/ && t != "") verdict = field("tflops") >= field("target") * t ? "PASS" : "FAIL"
    if (field("target") == "") verdict = "-"
    if (verdict == "FAIL") ++missed
    tgt = k ~ /^gemm/ ? ">=" field("target") "x" (t == "" ? field("torch") : t) : ">=" field("target")
    printf "%-9s %-26s %7s %7s %7s %7s %s\n", k, key(), field("tflops"), (t == "" ? "-" : t),
           (t == "" ? "-" : sprintf("%.2f", field("tflops") / t)), (field("target") == "" ? "-" : tgt), verdict
    ++rows
  }
  END {
    if (bench_rc != 0) { printf "prefill_bench exited with status %d (see prefill_bench.log)\n", bench_rc; exit 1 }
    if (rows == 0) { print "prefill_bench produced no results"; exit 1 }
    if (missed > 0) { printf "prefill targets: %d missed -> FAIL\n", missed; exit 1 }
    print "prefill targets: all met -> PASS"
  }' "$LOGS/prefill_reference.log" "$LOGS/prefill_bench.log" || BENCH_VERDICT=1
# Issue 28: the engine on the GPU through the binary (scripts/gpu_engine_check.sh: strata run on
# fixture models, placements, CPU attention, CUDA against CPU, device memory against the plan).
bash scripts/gpu_engine_check.sh "$BUILD/strata" "$LOGS" cuda >"$LOGS/engine.log" 2>&1 || BENCH_VERDICT=1
if "$BUILD/tests/cli/cli_test" --gtest_filter='DeviceCliTest.*' >"$LOGS/device_cli.log" 2>&1; then
  echo "engine  DeviceCliTest: run, bench, perplexity, profile --device cuda; --gpu-memory   PASS" >>"$LOGS/engine.log"
else
  echo "engine  DeviceCliTest (see device_cli.log)                                            FAIL" >>"$LOGS/engine.log"
  BENCH_VERDICT=1
fi
cat "$LOGS/engine.log"

# FlexGen's benchmark shape on a 16 GiB device: OPT-30B, prompts of 512, 32 generated tokens, the
# searched plan run in full; tokens/s beside FlexGen's 41.2 on the H200 (docs/ANCHORS.md), and
# the host->device stream as a fraction of the profile's pinned rate. Given what is left of an
# 8-minute budget.
OPT_BUDGET=$((480 - SECONDS))
((OPT_BUDGET < 60)) && OPT_BUDGET=60
HW_FLAG=()
[[ -f "$LOGS/hw.yaml" ]] && HW_FLAG=(--hardware "$LOGS/hw.yaml")
OPT_RC=0
timeout "$OPT_BUDGET" "$BUILD/strata" bench --model opt-30b --gpu-memory 16GiB --prompt-len 512 \
  --gen-len 32 --max-block-size 256 --device cuda --offload-dir "$BUILD" ${HW_FLAG[@]+"${HW_FLAG[@]}"} \
  >"$LOGS/opt30b.log" 2>&1 || OPT_RC=$?
[[ -n "${OUT:-}" ]] && cp "$LOGS"/engine.log "$LOGS"/device_cli.log "$LOGS"/opt30b.log "$OUT"/ 2>/dev/null
if [[ $OPT_RC -eq 0 ]]; then
  echo "opt-30b 16GiB: $(grep -E '^total' "$LOGS/opt30b.log") (FlexGen: 41.2 on the H200)"
  echo "opt-30b 16GiB: $(grep -E '^(plan|h2d|device mem)' "$LOGS/opt30b.log" | tr '\n' ' ')"
else
  echo "opt-30b 16GiB: bench exited with status $OPT_RC (124: over its ${OPT_BUDGET} s) -> FAIL; see opt30b.log"
  BENCH_VERDICT=1
fi
echo "logs: $LOGS (configure, build, ctest, bench, engine, opt30b)"
if [[ "$TEST_VERDICT" == PASS && $BENCH_VERDICT -eq 0 ]]; then
  echo "gpu_check: PASS"
  exit 0
fi
echo "gpu_check: FAIL"
exit 1
