#!/usr/bin/env python3
"""PyTorch's figures at prefill_bench's shapes, measured on the machine at hand (issue 30).

Times torch's scaled_dot_product_attention (causal, fp16) with the FlashAttention-2 and cuDNN
backends, and fp16 GEMMs through torch.matmul (A[m,k] @ B[k,n]) and F.linear (A[m,k] @ W[n,k]^T,
strata's layout; without and with a bias), each the median of CUDA-event timings after a warm-up.
Prints the RESULT lines of prefill_bench (kernel=torch_sdpa_flash, torch_sdpa_cudnn, torch_matmul,
torch_linear, torch_linear_bias) so that one call runs both and the ratios come from one card.

Usage: python3 bench/cuda/prefill_reference.py [--quick]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F

ATTENTION_SHAPES = [  # head_dim, tokens, seqs, heads, kv_heads (prefill_bench.cc's list)
    (128, 512, 64, 56, 56),
    (128, 2048, 16, 56, 56),
    (128, 4096, 4, 32, 32),
    (64, 512, 64, 56, 56),
    (128, 2048, 16, 32, 8),
]
GEMM_SHAPES = [(8192, 7168, 7168), (8192, 28672, 7168), (16384, 8192, 8192),
               (256, 28672, 7168), (64, 7168, 7168)]


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def attention(reps):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = [("torch_sdpa_flash", SDPBackend.FLASH_ATTENTION),
                ("torch_sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)]
    for d, tokens, seqs, heads, kv_heads in ATTENTION_SHAPES:
        q = torch.randn(seqs, heads, tokens, d, device="cuda", dtype=torch.float16)
        k = torch.randn(seqs, kv_heads, tokens, d, device="cuda", dtype=torch.float16)
        v = torch.randn(seqs, kv_heads, tokens, d, device="cuda", dtype=torch.float16)
        flops = 4.0 * seqs * heads * tokens * tokens * d / 2.0
        extra = {"enable_gqa": True} if kv_heads != heads else {}
        for name, backend in backends:
            try:
                with sdpa_kernel(backend):
                    ms = median_ms(lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=True, **extra), 3, reps)
            except Exception as e:  # a backend that refuses the shape, or an older torch
                print(f"# {name} d{d} t{tokens}: unavailable ({type(e).__name__}: {e})"[:200])
                continue
            print(f"RESULT kernel={name} head_dim={d} tokens={tokens} seqs={seqs} heads={heads} "
                  f"kv_heads={kv_heads} ms={ms:.4f} tflops={flops / ms / 1e9:.1f}", flush=True)
        del q, k, v


def gemm(reps):
    for m, n, k in GEMM_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        w = torch.randn(n, k, device="cuda", dtype=torch.float16)
        bias = torch.randn(n, device="cuda", dtype=torch.float16)
        flops = 2.0 * m * n * k
        for name, fn in (("torch_matmul", lambda: torch.matmul(a, b)),
                         ("torch_linear", lambda: F.linear(a, w)),
                         ("torch_linear_bias", lambda: F.linear(a, w, bias))):
            ms = median_ms(fn, 5, reps)
            print(f"RESULT kernel={name} m={m} n={n} k={k} ms={ms:.4f} "
                  f"tflops={flops / ms / 1e9:.1f}", flush=True)
        del a, b, w, bias


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-gemm", action="store_true")
    parser.add_argument("--skip-attention", action="store_true")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("prefill_reference: no CUDA device", file=sys.stderr)
        return 2
    print(f"prefill_reference: torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    reps = 5 if args.quick else 20
    if not args.skip_attention:
        attention(reps)
    if not args.skip_gemm:
        gemm(reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
