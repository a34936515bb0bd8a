"""Writes blocks.json: ggml quantized blocks and their values as gguf-py dequantizes them.

Run with a Python that has gguf (the llama.cpp project's gguf-py, a NumPy port of ggml's
dequantize_row_* functions) and numpy:
  python tests/data/gguf/make_block_fixture.py

For each block type strata expands beyond the ones the default model holds, three blocks of
random bytes whose fp16 scale fields are replaced by finite random values (every other bit
pattern is a valid block), and gguf-py's dequantization of them. tests/model/gguf_dequant_test.cc
expands the same bytes with strata's code and compares.
"""
import json
import os

import numpy as np
from gguf import GGMLQuantizationType, GGML_QUANT_SIZES
from gguf.quants import dequantize

# Byte offsets of each type's fp16 fields (ggml-common.h's block_* structs).
HALF_FIELDS = {
    "Q5_0": [0],
    "Q5_1": [0, 2],
    "Q2_K": [80, 82],
    "Q3_K": [108],
    "Q4_K": [0, 2],
    "Q5_K": [0, 2],
    "Q6_K": [208],
    "IQ4_NL": [0],
    "IQ4_XS": [0],
}
BLOCKS = 3


def main():
    rng = np.random.default_rng(20261122)
    out = {"gguf_package": "gguf (gguf-py)", "types": {}}
    for name, fields in HALF_FIELDS.items():
        qtype = GGMLQuantizationType[name]
        block_size, type_bytes = GGML_QUANT_SIZES[qtype]
        data = rng.integers(0, 256, size=(BLOCKS, type_bytes), dtype=np.uint8)
        for b in range(BLOCKS):
            for f in fields:
                half = np.float16(rng.normal(0.0, 0.02))
                data[b, f:f + 2] = np.frombuffer(half.tobytes(), dtype=np.uint8)
        values = dequantize(data, qtype).astype(np.float32).reshape(-1)
        assert values.size == BLOCKS * block_size and np.all(np.isfinite(values))
        out["types"][name] = {
            "ggml_type": int(qtype),
            "block_size": int(block_size),
            "bytes_hex": data.tobytes().hex(),
            "values": [float(v) for v in values],
        }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "blocks.json")
    with open(path, "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
