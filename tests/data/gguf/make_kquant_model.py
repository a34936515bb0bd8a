"""Re-quantizes a GGUF model's matrices to ggml's K-quant, Q5 and IQ4 types, to check that
strata loads and runs such files (docs/PERFORMANCE.md, "K-quant, Q5 and IQ4 GGUF files").

  python tests/data/gguf/make_kquant_model.py IN.gguf OUT.gguf [TYPE]

Needs gguf (gguf-py) and numpy. gguf-py dequantizes every type but quantizes none of the
K-quants or IQ4 types, so this script packs them itself with a plain quantizer (not llama.cpp's
error-minimising search: the file is somewhat less accurate than a llama.cpp Q4_K_M file of the
same model). Each packing is checked against gguf-py's dequantization before it is written.
Matrices whose rows are a multiple of 256 cycle through Q2_K, Q3_K, Q4_K, Q5_K and Q6_K by
layer, or all become TYPE (one of those), or keep their type (TYPE "keep"); the others become
Q5_0, or Q5_1 for attn_v (llama.cpp's fallbacks for rows K-quants cannot hold). With TYPE "IQ4"
they become IQ4_XS and IQ4_NL instead. Norms and the embedding keep their types.
"""
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

from gguf_copy import copy_metadata

K_CYCLE = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).reshape(-1, 1).view(np.uint8)


def pack_scale_min_k4(sc, m):
    """12 bytes per block: the 6-bit scales and minima of 8 sub-blocks (get_scale_min_k4)."""
    out = np.zeros((sc.shape[0], 12), dtype=np.uint8)
    out[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 0x0F) | ((m[:, 4:8] & 0x0F) << 4)
    return out


def sub_block_affine(x, sub, levels, scale_bits):
    """x: [n, 256]. Per sub-block of `sub` elements: scale and minimum (x = d*sc*q - dmin*m)
    quantized to `scale_bits` bits against fp16 super-block d and dmin; returns the codes too."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    lo = np.minimum(xs.min(axis=2), 0.0)
    hi = xs.max(axis=2)
    scale = (hi - lo) / levels
    top = (1 << scale_bits) - 1
    d = (scale.max(axis=1) / top).astype(np.float16)
    dmin = ((-lo).max(axis=1) / top).astype(np.float16)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.clip(np.round(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), 0, top)
    m = np.clip(np.round(np.divide(-lo, dminf, out=np.zeros_like(lo), where=dminf > 0)), 0, top)
    dl = (df * sc)[:, :, None]
    ml = (dminf * m)[:, :, None]
    q = np.clip(np.round(np.divide(xs + ml, dl, out=np.zeros_like(xs), where=dl > 0)), 0, levels)
    return d, dmin, sc.astype(np.uint8), m.astype(np.uint8), q.astype(np.uint8).reshape(n, 256)


def symmetric_scales(x, sub, code_max, scale_max):
    """x [n, 256] in sub-blocks of `sub`: the sub-blocks, fp16 d, signed sub-block scales sc
    (-scale_max - 1 <= sc <= scale_max) with d * sc * code_max about each sub-block's largest |x|,
    and the effective scales d * sc, shaped to divide the sub-blocks."""
    n = x.shape[0]
    xs = x.reshape(n, -1, sub)
    scale = np.abs(xs).max(axis=2) / code_max
    d = (scale.max(axis=1) / scale_max).astype(np.float16)
    df = d.astype(np.float32)[:, None]
    sc = np.round(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0))
    sc = np.clip(sc, -scale_max - 1, scale_max)
    return xs, d, sc, (df * sc)[:, :, None]


def quantize_q2_k(x):
    n = x.shape[0]
    d, dmin, sc, m, q = sub_block_affine(x, 16, 3, 4)
    scales = sc | (m << 4)
    qs = np.zeros((n, 64), dtype=np.uint8)
    for half in range(2):
        for j in range(4):  # shift 2j takes elements 128 half + 32 j ..
            part = q[:, 128 * half + 32 * j:128 * half + 32 * j + 32]
            qs[:, 32 * half:32 * half + 32] |= part << (2 * j)
    return np.concatenate([scales, qs, f16_bytes(d).reshape(n, 2), f16_bytes(dmin).reshape(n, 2)], axis=1)


def quantize_q3_k(x):
    n = x.shape[0]
    xs, d, sc, dl = symmetric_scales(x, 16, 4, 31)  # values in [-4, 3]
    q = np.clip(np.round(np.divide(xs, dl, out=np.zeros_like(xs), where=dl != 0)), -4, 3)
    q = (q + 4).astype(np.uint8).reshape(n, 256)  # 0..7: bit 2 set means "no -4"
    s = (sc + 32).astype(np.uint8)
    packed = np.zeros((n, 12), dtype=np.uint8)
    packed[:, 0:8] = (s[:, 0:8] & 0x0F) | ((s[:, 8:16] & 0x0F) << 4)
    for i in range(16):
        packed[:, 8 + i % 4] |= ((s[:, i] >> 4) & 3) << (2 * (i // 4))
    hmask = np.zeros((n, 32), dtype=np.uint8)
    qs = np.zeros((n, 64), dtype=np.uint8)
    for half in range(2):
        for j in range(4):
            part = q[:, 128 * half + 32 * j:128 * half + 32 * j + 32]
            qs[:, 32 * half:32 * half + 32] |= (part & 3) << (2 * j)
            hmask |= ((part >> 2) & 1) << (4 * half + j)
    return np.concatenate([hmask, qs, packed, f16_bytes(d).reshape(n, 2)], axis=1)


def quantize_q45_k(x, high_bits):
    n = x.shape[0]
    levels = 31 if high_bits else 15
    d, dmin, sc, m, q = sub_block_affine(x, 32, levels, 6)
    qs = np.zeros((n, 128), dtype=np.uint8)
    qh = np.zeros((n, 32), dtype=np.uint8)
    for p in range(4):
        lo, hi = q[:, 64 * p:64 * p + 32], q[:, 64 * p + 32:64 * p + 64]
        qs[:, 32 * p:32 * p + 32] = (lo & 0x0F) | ((hi & 0x0F) << 4)
        qh |= ((lo >> 4) & 1) << (2 * p)
        qh |= ((hi >> 4) & 1) << (2 * p + 1)
    parts = [f16_bytes(d).reshape(n, 2), f16_bytes(dmin).reshape(n, 2), pack_scale_min_k4(sc, m)]
    parts += [qh, qs] if high_bits else [qs]
    return np.concatenate(parts, axis=1)


def quantize_q6_k(x):
    n = x.shape[0]
    xs, d, sc, dl = symmetric_scales(x, 16, 32, 127)
    q = np.clip(np.round(np.divide(xs, dl, out=np.zeros_like(xs), where=dl != 0)), -32, 31)
    q = (q + 32).astype(np.uint8).reshape(n, 256)
    ql = np.zeros((n, 128), dtype=np.uint8)
    qh = np.zeros((n, 64), dtype=np.uint8)
    for half in range(2):
        e = q[:, 128 * half:128 * half + 128]
        q1, q2, q3, q4 = e[:, 0:32], e[:, 32:64], e[:, 64:96], e[:, 96:128]
        ql[:, 64 * half:64 * half + 32] = (q1 & 0x0F) | ((q3 & 0x0F) << 4)
        ql[:, 64 * half + 32:64 * half + 64] = (q2 & 0x0F) | ((q4 & 0x0F) << 4)
        qh[:, 32 * half:32 * half + 32] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6)
    return np.concatenate([ql, qh, sc.astype(np.int8).view(np.uint8), f16_bytes(d).reshape(n, 2)], axis=1)


IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                      dtype=np.float32)


def iq4_codes(x, d):
    """Nearest IQ4 grid value of x / d per element; x [..., n], d broadcastable to it."""
    ratio = np.divide(x, d, out=np.zeros_like(x), where=d != 0)
    return np.abs(ratio[..., None] - IQ4_VALUES).argmin(axis=-1).astype(np.uint8)


def pack_iq4_nibbles(q):
    """q [n, k, 32] codes -> [n, k * 16] bytes: element j in the low nibble, j + 16 in the high."""
    return (q[..., :16] | (q[..., 16:] << 4)).reshape(q.shape[0], -1)


def quantize_iq4_nl(x):
    n = x.shape[0]
    xs = x.reshape(n, 32)
    d = (np.abs(xs).max(axis=1) / 127).astype(np.float16)
    q = iq4_codes(xs, d.astype(np.float32)[:, None])
    return np.concatenate([f16_bytes(d).reshape(n, 2), pack_iq4_nibbles(q[:, None, :])], axis=1)


def quantize_iq4_xs(x):
    n = x.shape[0]
    xs, d, sc, dl = symmetric_scales(x, 32, 127, 31)
    q = iq4_codes(xs, dl)
    s = (sc + 32).astype(np.uint8)
    scales_l = (s[:, 0::2] & 0x0F) | ((s[:, 1::2] & 0x0F) << 4)
    scales_h = np.zeros(n, dtype=np.uint16)
    for ib in range(8):
        scales_h |= ((s[:, ib] >> 4) & 3).astype(np.uint16) << (2 * ib)
    return np.concatenate([f16_bytes(d).reshape(n, 2), scales_h.reshape(n, 1).view(np.uint8),
                           scales_l, pack_iq4_nibbles(q)], axis=1)


PACKERS = {
    T.Q2_K: quantize_q2_k,
    T.Q3_K: quantize_q3_k,
    T.Q4_K: lambda x: quantize_q45_k(x, False),
    T.Q5_K: lambda x: quantize_q45_k(x, True),
    T.Q6_K: quantize_q6_k,
    T.IQ4_NL: quantize_iq4_nl,
    T.IQ4_XS: quantize_iq4_xs,
}
# Worst acceptable relative RMS error of a packing against the values it packs.
MAX_ERROR = {T.Q2_K: 0.6, T.Q3_K: 0.35, T.Q4_K: 0.15, T.Q5_K: 0.08, T.Q6_K: 0.05,
             T.Q5_0: 0.08, T.Q5_1: 0.08, T.IQ4_NL: 0.15, T.IQ4_XS: 0.15}


def requantize(values, qtype):
    """values: float32 [rows, cols]. Returns ggml blocks as uint8 [rows, bytes per row]."""
    rows, cols = values.shape
    if qtype in PACKERS:
        block = 32 if qtype == T.IQ4_NL else 256
        blocks = PACKERS[qtype](values.reshape(-1, block).astype(np.float32))
        data = blocks.reshape(rows, -1)
    else:
        data = quantize(values, qtype)
    back = dequantize(data, qtype).reshape(rows, cols)
    err = np.sqrt(np.mean((back - values) ** 2) / np.mean(values ** 2))
    assert err < MAX_ERROR[qtype], (qtype.name, err)
    return data, err


def main():
    src, dst = sys.argv[1], sys.argv[2]
    choice = sys.argv[3] if len(sys.argv) > 3 else "cycle"
    cycle = K_CYCLE if choice in ("cycle", "keep") else [T.IQ4_XS] if choice == "IQ4" else [T[choice]]
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(dst, arch)
    copy_metadata(reader, writer)
    counts, errors = {}, {}
    for t in reader.tensors:
        shape = [int(v) for v in reversed(t.shape)]  # outermost first
        qtype = t.tensor_type
        data = t.data
        if len(shape) == 2 and t.name.startswith("blk."):
            layer = int(t.name.split(".")[1])
            values = dequantize(t.data, t.tensor_type).reshape(shape)
            if shape[1] % 256 == 0:
                if choice == "keep":
                    counts[qtype.name] = counts.get(qtype.name, 0) + 1
                    writer.add_tensor(t.name, data, raw_dtype=qtype)
                    continue
                qtype = cycle[layer % len(cycle)]
            elif choice == "IQ4":
                qtype = T.IQ4_NL
            else:
                qtype = T.Q5_1 if "attn_v" in t.name else T.Q5_0
            data, err = requantize(values, qtype)
            errors.setdefault(qtype.name, []).append(err)
        counts[qtype.name] = counts.get(qtype.name, 0) + 1
        writer.add_tensor(t.name, data, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print("tensors by type:", dict(sorted(counts.items())))
    print("mean relative RMS error of the re-quantized matrices:",
          {k: round(float(np.mean(v)), 4) for k, v in sorted(errors.items())})


if __name__ == "__main__":
    main()
