"""Writes dequant_probe.json: reference values of the default model's GGUF tensors.

Run with a Python that has gguf, numpy, torch and transformers:
  python tests/data/smollm2/make_dequant_probe.py ~/.cache/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf

token_embd.weight (Q8_0) comes from gguf-py's own dequantization. The attention q/k weights
(Q4_1) come from transformers' GGUF loader, which undoes llama.cpp's q/k permutation itself, so
they check strata's un-permute against an independent implementation. Indices are flat indices
into the Hugging Face layout ([out, in], row-major).
"""
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def main():
    path = sys.argv[1]
    reader = GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    rng = np.random.default_rng(7)
    probes = []

    emb = tensors["token_embd.weight"]
    emb_f = dequantize(emb.data, emb.tensor_type).reshape(-1)
    for idx in [0, 1, 575, 576, 12345 * 576 + 17, emb_f.size - 1, *rng.integers(0, emb_f.size, 4)]:
        probes.append({"tensor": "token_embd.weight", "index": int(idx), "value": float(emb_f[idx])})

    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(
        os.path.dirname(path), gguf_file=os.path.basename(path), torch_dtype="float32")
    sd = model.state_dict()
    for gguf_name, hf_name in [("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight"),
                               ("blk.0.attn_k.weight", "model.layers.0.self_attn.k_proj.weight"),
                               ("blk.29.attn_q.weight", "model.layers.29.self_attn.q_proj.weight")]:
        w = sd[hf_name].numpy().reshape(-1)
        # Index 576 + 5 lies in HF row 1, which the permutation took from GGUF row 2.
        for idx in [0, 1, 576 + 5, 33 * 576 + 100, w.size - 1, *rng.integers(0, w.size, 4)]:
            probes.append({"tensor": gguf_name, "index": int(idx), "value": float(w[idx])})

    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dequant_probe.json")
    with open(out, "w") as f:
        json.dump({"model": os.path.basename(path), "probes": probes}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
